"""Seed 004's script path: ``python cli/profile_model.py --model graph_transformer --profile runtime memory flops scaling``.

A thin shim over :mod:`graphprof_cli.seed_profile` (the seed's flags, graphprof's library underneath).
"""

from __future__ import annotations

import sys

try:
    from cli import _shim  # noqa: F401 - puts cli/ and the checkout on sys.path
except ImportError:  # run as a script: cli/ itself is on sys.path
    import _shim  # noqa: F401

from graphprof_cli.seed_profile import main

if __name__ == "__main__":
    sys.exit(main())
