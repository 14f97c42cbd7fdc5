"""Payloads the hostile-input tests plant: each leaves a marker file when it runs, so a test can tell."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["Payload"]


class Payload:
    """Unpickling this runs ``touch MARKER`` (through ``subprocess.call``, which torch does not block outright,
    so a loader that falls back on ``add_safe_globals`` advice runs it too)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[list[str]]]:
        return (subprocess.call, (["touch", str(self.marker)],))
