"""What the examples share: where they write their files."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def out_dir() -> Path:
    """The directory given as the first argument, else a fresh temporary one."""
    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix="graphprof-example-"))
