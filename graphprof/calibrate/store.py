"""How ``graphprof calibrate`` writes the ``local`` preset; reading it is :mod:`graphprof.devices.local`'s
(re-exported here), below :mod:`graphprof.devices.hardware`, which reads it for ``--hardware local``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphprof.base.atomic import check_path, locked, write_atomic
from graphprof.devices.local import FORMAT, local_path
from graphprof.errors import OutputError
from graphprof.schemas import envelope

__all__ = ["check_preset_path", "write_preset"]


def check_preset_path(path: Path | None = None) -> None:
    """Before measuring: the preset can be written to ``path`` (default :func:`local_path`, whose folder is
    made when missing): a regular file or none, never a symbolic link followed to replace what it points at
    (:func:`graphprof.base.atomic.check_path`)."""
    target = local_path() if path is None else path
    if path is None and not target.parent.exists():
        return  # the cache's folder is graphprof's to make, at the write
    check_path(target)


def write_preset(preset: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``preset`` (with ``format`` set) as JSON to ``path`` (default :func:`local_path`, its folder made),
    atomically (:func:`graphprof.base.atomic.write_atomic`); the path."""
    text = json.dumps({**envelope("calibrate"), "format": FORMAT, **preset}, indent=1) + "\n"
    if path is not None:
        write_atomic(path, text)  # whole, or the old file kept
        return path
    path = local_path()  # the cache's folder is graphprof's to make; a folder the user names must exist
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write the calibration to {path}: {exc.strerror or exc}") from exc
    with locked(path):  # not between another run's re-read and write of its learned records
        write_atomic(path, text)
    return path
