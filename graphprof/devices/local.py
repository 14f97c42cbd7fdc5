"""Where the ``local`` preset lives and how it is read (plain JSON; no torch).

``graphprof calibrate`` (:mod:`graphprof.calibrate.store`) writes ``$XDG_CACHE_HOME/graphprof/local.json``
(``~/.cache/graphprof/local.json`` when the variable is unset); ``--hardware local``
(:func:`graphprof.devices.hardware.get_hardware`) and its calibration table (:func:`graphprof.devices.predict.load_calibration`)
read it here, below both, so that neither imports the calibration package. The file holds three parts:
``hardware`` (a :class:`graphprof.devices.hardware.Hardware` as a dict: measured peaks and bandwidth),
``calibration`` (a :class:`graphprof.devices.predict.Calibration` as a dict) and ``device`` (what was measured,
with the thread count and the load while measuring), plus the raw op table under ``table`` so that it
can be fitted again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from graphprof.errors import InvalidInputError

__all__ = ["FORMAT", "LOCAL", "MAX_LEARNED", "check_current", "local_path", "read_local", "require_local", "missing_local_message"]

#: The name ``--hardware`` takes for the calibrated machine.
LOCAL = "local"
#: Version of the file's layout; a file of another version is refused with a message to calibrate again.
#: 2: per-kind latency models (``calibration.op_model``), learned samples (``learned``), staleness checks.
FORMAT = 2
#: The most samples learned from the user's runs a file keeps (the oldest go first).
MAX_LEARNED = 20000


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
        data = json.loads(path.read_text(), parse_constant=_no_constant)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"the local calibration {path} is unreadable ({exc}); run `graphprof calibrate` again") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not {"hardware", "calibration"} <= set(data):
        raise InvalidInputError(f"the local calibration {path} is of another version; run `graphprof calibrate` again")
    problem = _fields(data["hardware"], "hardware", _HARDWARE) or _fields(data["calibration"], "calibration", _CALIBRATION)
    problem = problem or _rates(data["calibration"]["rates"])
    if problem:
        raise InvalidInputError(f"the local calibration {path} is damaged: {problem}; run `graphprof calibrate` again")
    return data


def _stale(device: dict[str, Any]) -> list[str]:
    """What differs between the machine a CPU calibration measured and this process: CPU, threads, torch."""
    import torch

    from graphprof.devices.host import cpu_model

    now = {"name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__}
    return [f"{key} {device.get(key)!r}, this run {value!r}" for key, value in now.items() if device.get(key) != value]


def check_current(data: dict[str, Any], path: Path | None = None) -> None:
    """Refuse (one line, :class:`InvalidInputError`) a CPU calibration made on another CPU, at another thread
    count or with another torch: its times are not this run's. A CUDA calibration is not checked here."""
    device = data.get("device")
    if not isinstance(device, dict):
        raise InvalidInputError(f"the local calibration {path or local_path()} records no device; run `graphprof calibrate` again")
    if device.get("type", "cpu") != "cpu":
        return
    stale = _stale(device)
    if stale:
        raise InvalidInputError(f"the local calibration {path or local_path()} is stale ({'; '.join(stale)}); run `graphprof calibrate` again")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


_NUMBER = (int, float)
#: field -> (the types it may hold, whether it must be there): a Hardware's and a Calibration's dicts.
_HARDWARE: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": ((str,), True), "label": ((str,), True), "kind": ((str,), True), "peak_tflops": ((dict,), True),
    "bandwidth_gbs": (_NUMBER, True), "source": ((str,), True), "memory_gb": ((*_NUMBER, type(None)), False),
    "memory_assumed": ((bool,), False), "device_names": ((list,), False),
}  # fmt: skip
_CALIBRATION: dict[str, tuple[tuple[type, ...], bool]] = {
    "preset": ((str,), True), "kind": ((str,), False), "bandwidth_gbs": (_NUMBER, True), "launch_s": (_NUMBER, True),
    "host_per_kernel_s": (_NUMBER, True), "rates": ((dict,), True), "accuracy": ((dict,), False),
    "source": ((str,), False), "overlap": (_NUMBER, False), "view_s": (_NUMBER, False),
    "memory": ((dict, type(None)), False), "op_model": ((dict,), False),
}  # fmt: skip
_RATE_FIELDS = {"compute_fraction", "memory_fraction", "latency_s", "half_depth"}


def _fields(part: object, name: str, spec: dict[str, tuple[tuple[type, ...], bool]]) -> str | None:
    """What is wrong with ``part`` against ``spec`` (a missing, unknown or mistyped field), else ``None``."""
    if not isinstance(part, dict):
        return f"{name} is {type(part).__name__}, not an object"
    unknown = sorted(set(part) - set(spec))
    missing = sorted(k for k, (_, needed) in spec.items() if needed and k not in part)
    if unknown or missing:
        return f"{name} has {'unknown field ' + repr(unknown[0]) if unknown else 'no ' + repr(missing[0])}"
    for key, value in part.items():
        types = spec[key][0]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{name}.{key} is {value!r:.40}, not {' or '.join(t.__name__ for t in types)}"
    return None


def _rates(rates: dict[str, Any]) -> str | None:
    for dtype, table in rates.items():
        for klass, values in table.items() if isinstance(table, dict) else [("?", table)]:
            ok = isinstance(values, dict) and set(values) <= _RATE_FIELDS and set(values) >= _RATE_FIELDS - {"half_depth"}
            if not ok or any(isinstance(v, bool) or not isinstance(v, _NUMBER) for v in values.values()):
                return f"calibration.rates.{dtype}.{klass} is not {{{', '.join(sorted(_RATE_FIELDS))}: numbers}}"
    return None


def require_local(path: Path | None = None) -> dict[str, Any]:
    """The stored preset, checked current (:func:`check_current`), or :class:`InvalidInputError` saying how to make it."""
    data = read_local(path)
    if data is None:
        raise InvalidInputError(missing_local_message(path))
    check_current(data, path)
    return data
