"""Where the ``local`` preset lives and how it is read and written (plain JSON; no torch).

``graphprof calibrate`` writes ``$XDG_CACHE_HOME/graphprof/local.json`` (``~/.cache/graphprof/local.json``
when the variable is unset). The file holds three parts: ``hardware`` (a :class:`graphprof.hardware.Hardware`
as a dict: measured peaks and bandwidth), ``calibration`` (a :class:`graphprof.predict.Calibration` as a
dict) and ``device`` (what was measured, with the thread count and the load while measuring), plus the
raw op table under ``table`` so that it can be fitted again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from graphprof.atomic import write_atomic
from graphprof.errors import InvalidInputError, OutputError

__all__ = ["FORMAT", "LOCAL", "local_path", "read_local", "require_local", "write_preset", "missing_local_message"]

#: The name ``--hardware`` takes for the calibrated machine.
LOCAL = "local"
#: Version of the file's layout; a file of another version is refused with a message to calibrate again.
FORMAT = 1


def local_path() -> Path:
    """``$XDG_CACHE_HOME/graphprof/local.json``, or ``~/.cache/graphprof/local.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "graphprof" / "local.json"


def missing_local_message(path: Path | None = None) -> str:
    """The one line that says the local preset is absent and how to make it."""
    return f"no local calibration at {path or local_path()}: run `graphprof calibrate` (under a minute) first"


def read_local(path: Path | None = None) -> dict[str, Any] | None:
    """The stored preset as a dict, ``None`` when there is no file; an unreadable file is an error."""
    path = path or local_path()
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"the local calibration {path} is unreadable ({exc}); run `graphprof calibrate` again") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not {"hardware", "calibration"} <= set(data):
        raise InvalidInputError(f"the local calibration {path} is of another version; run `graphprof calibrate` again")
    return data


def require_local(path: Path | None = None) -> dict[str, Any]:
    """The stored preset, or :class:`InvalidInputError` saying how to make it."""
    data = read_local(path)
    if data is None:
        raise InvalidInputError(missing_local_message(path))
    return data


def write_preset(preset: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``preset`` (with ``format`` set) as JSON to ``path`` (default :func:`local_path`, its folder made),
    atomically (:func:`graphprof.atomic.write_atomic`); the path."""
    if path is None:  # the cache's folder is graphprof's to make; a folder the user names must exist
        path = local_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot write the calibration to {path}: {exc.strerror or exc}") from exc
    write_atomic(path, json.dumps({"format": FORMAT, **preset}, indent=1) + "\n")  # whole, or the old file kept
    return path
