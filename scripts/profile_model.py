"""Seed 004's script at the seed's own path: ``python scripts/profile_model.py --model graph_transformer --profile runtime memory flops``.

The same script as ``cli/profile_model.py`` (a thin shim over :mod:`graphprof_cli.seed_profile`); it works
from a checkout whether or not graphprof is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

_CLI = Path(__file__).resolve().parents[1] / "cli"
if str(_CLI) not in sys.path:
    sys.path.insert(0, str(_CLI))

import _shim  # noqa: E402, F401 - puts cli/ and the checkout on sys.path

from graphprof_cli.seed_profile import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
