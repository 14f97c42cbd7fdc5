"""How ``graphprof calibrate`` writes the ``local`` preset; reading it is :mod:`graphprof.hardware_local`'s
(re-exported here), below :mod:`graphprof.hardware`, which reads it for ``--hardware local``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphprof.errors import OutputError
from graphprof.hardware_local import FORMAT, LOCAL, local_path, missing_local_message, read_local, require_local

__all__ = ["FORMAT", "LOCAL", "local_path", "read_local", "require_local", "write_preset", "missing_local_message"]


def write_preset(preset: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``preset`` (with ``format`` set) as JSON to ``path`` (default :func:`local_path`); the path."""
    path = path or local_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"format": FORMAT, **preset}, indent=1) + "\n")
        tmp.replace(path)
    except OSError as exc:
        raise OutputError(f"cannot write the calibration to {path}: {exc}") from exc
    return path
