"""This machine: what it is (:func:`detect_host`: processor, cores, threads, load) and where its ``local``
preset lives and how that is read (plain JSON; no torch).

``graphprof calibrate`` (:mod:`graphprof.calibrate.store`) writes ``$XDG_CACHE_HOME/graphprof/local.json``
(``~/.cache/graphprof/local.json`` when the variable is unset); ``--hardware local``
(:func:`graphprof.devices.hardware.get_hardware`) reads it here, below the devices, so that they need not
import the calibration package. It is read once, where the device is resolved: the preset, its calibration
and their notes then travel as one :class:`graphprof.devices.hardware.Hardware`, and nothing below opens
the file again (learning from a run re-reads it under its lock: :mod:`graphprof.calibrate.learn`). The file holds three parts:
``hardware`` (a :class:`graphprof.devices.hardware.Hardware` as a dict: measured peaks and bandwidth),
``calibration`` (a :class:`graphprof.devices.table.Calibration` as a dict) and ``device`` (what was measured,
with the thread count and the load while measuring), plus the raw op table under ``table`` so that it
can be fitted again.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from graphprof.errors import InvalidInputError

__all__ = [
    "FORMAT",
    "LOCAL",
    "MAX_LEARNED",
    "LEARNED_SECONDS",
    "check_current",
    "stale_reasons",
    "learned_note",
    "usable_learned",
    "local_path",
    "read_local",
    "require_local",
    "missing_local_message",
    "Host",
    "detect_host",
    "load_average",
]

#: The name ``--hardware`` takes for the calibrated machine.
LOCAL = "local"
#: Version of the file's layout; a file of another version is refused with a message to calibrate again.
#: 2: per-kind latency models (``calibration.op_model``), learned samples (``learned``), staleness checks.
#: 3: ops timed in place (the context features), the smearing term per kind.
#: 4: piecewise-linear and exponential activations as two kinds; timings taken on the settled C heap
#: (:mod:`graphprof.measure.heap`).
FORMAT = 4
#: The most samples learned from the user's runs a file keeps (the oldest go first).
MAX_LEARNED = 20000
#: The seconds a learned op record may hold: no kernel runs in under a nanosecond or over an hour, so a
#: record outside (negative, zero, ``1e30``, ``inf``) is damaged and refused when read, never written.
LEARNED_SECONDS = (1e-9, 3600.0)


def local_path() -> Path:
    """``$XDG_CACHE_HOME/graphprof/local.json``, or ``~/.cache/graphprof/local.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "graphprof" / "local.json"


def missing_local_message(path: Path | None = None) -> str:
    """The one line that says the local preset is absent and how to make it."""
    return f"no local calibration at {path or local_path()}: run `graphprof calibrate` (about 2.5 minutes; `--quick`: under one) first"


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
    problem = problem or _rates(data["calibration"]["rates"]) or _schema_problem(data)
    if problem:
        raise InvalidInputError(f"the local calibration {path} is damaged: {problem}; run `graphprof calibrate` again")
    learned = data.get("learned", [])
    kept = [row for row in learned if usable_learned(row)] if isinstance(learned, list) else []
    refused = (len(learned) if isinstance(learned, list) else 1) - len(kept)
    return {**data, "learned": kept, **({"learned_refused": refused} if refused else {})}


def _schema_problem(data: dict[str, Any]) -> str | None:
    """Where ``data`` leaves the calibration's JSON schema (``graphprof/schemas/calibrate.schema.json``: every
    field's type and range, a peak of 1e308 or a string among the op model's coefficients), else ``None``.
    Without ``jsonschema`` installed, the field checks above alone. A file without the envelope (``kind``,
    ``schema_version``: written by hand, or before it) is read as the current version (``format`` is the gate)."""
    from graphprof.errors import MissingDependencyError
    from graphprof.schemas import envelope, validate

    try:
        validate({**envelope("calibrate"), **data}, "calibrate")
    except MissingDependencyError:
        return None
    except InvalidInputError as exc:
        return str(exc).removeprefix("calibrate JSON does not fit its schema at ")
    return None


def usable_learned(row: object) -> bool:
    """Whether ``row`` is a learned record (``[kind, [features], seconds, source, group]``) whose features are
    finite numbers and whose seconds lie within :data:`LEARNED_SECONDS`."""
    if not isinstance(row, list) or len(row) != 5 or not isinstance(row[0], str) or not isinstance(row[1], list):
        return False
    numbers = [row[2], *row[1]]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in numbers):
        return False
    return bool(LEARNED_SECONDS[0] <= row[2] <= LEARNED_SECONDS[1])


def learned_note(data: Mapping[str, Any], path: Path | None = None) -> str | None:
    """The note a prediction with the ``local`` preset carries when damaged learned records were left out of
    ``data`` (the file at ``path`` as :func:`read_local` read it)."""
    refused = int(data.get("learned_refused", 0))
    if not refused:
        return None
    low, high = LEARNED_SECONDS
    return (
        f"{refused} learned record(s) in {path or local_path()} with damaged seconds (not a number from {low:g} to "
        f"{high:g} s) were left out of the prediction; the next run that learns drops them"
    )


def stale_reasons(device: Mapping[str, Any], threads: int | None = None) -> list[str]:
    """What differs between the machine a CPU calibration measured and this run: CPU, threads (``threads``,
    by default this process's), torch."""
    import torch

    from graphprof.devices.local import cpu_model

    now = {"name": cpu_model(), "threads": torch.get_num_threads() if threads is None else threads, "torch": torch.__version__}
    return [f"{key} {device.get(key)!r}, this run {value!r}" for key, value in now.items() if device.get(key) != value]


def check_current(device: object, path: Path | None = None) -> None:
    """Refuse (one line, :class:`InvalidInputError`) a CPU calibration made on another CPU, at another thread
    count or with another torch: its times are not this run's. ``device`` is the file's ``device`` part (what
    was measured). A CUDA calibration is not checked here."""
    if not isinstance(device, Mapping):
        raise InvalidInputError(f"the local calibration {path or local_path()} records no device; run `graphprof calibrate` again")
    if device.get("type", "cpu") != "cpu":
        return
    stale = stale_reasons(device)
    if stale:
        raise InvalidInputError(
            f"the local calibration {path or local_path()} is stale ({'; '.join(stale)}); run `graphprof calibrate` again"
        )


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
    check_current(data.get("device"), path)
    return data


@dataclass(frozen=True)
class Host:
    """The machine that measured: CPU model and cores, GPU name and memory, driver, CUDA and torch versions."""

    cpu: str
    cores: int | None
    platform: str
    torch: str
    gpu: str | None = None
    gpu_memory_bytes: int | None = None
    driver: str | None = None
    cuda: str | None = None
    #: torch's intra-op threads when the host was read (``torch.get_num_threads()``)
    threads: int | None = None
    #: the 1, 5 and 15 minute load averages (``/proc/loadavg``), ``None`` where the system has none
    loadavg: tuple[float, float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "cores": self.cores,
            "platform": self.platform,
            "torch": self.torch,
            "gpu": self.gpu,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "driver": self.driver,
            "cuda": self.cuda,
            "threads": self.threads,
            "loadavg": None if self.loadavg is None else list(self.loadavg),
        }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s, else the platform's)."""
    return _cpu_model()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi`` (torch does not expose it), or ``None``."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages (``os.getloadavg``, ``/proc/loadavg`` on Linux), or ``None``."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):  # Windows has none
        return None
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def detect_host(device: torch.device | str = "cpu") -> Host:
    """What this machine is, with torch's threads and the load now; GPU fields are filled for a CUDA ``device``."""
    dev = torch.device(device)
    gpu = memory = driver = cuda = None
    if dev.type == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(dev)
        gpu, memory, driver, cuda = props.name, int(props.total_memory), _driver(), torch.version.cuda
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else os.cpu_count()
    return Host(
        cpu=_cpu_model(),
        cores=cores,
        platform=platform.platform(),
        torch=torch.__version__,
        gpu=gpu,
        gpu_memory_bytes=memory,
        driver=driver,
        cuda=cuda,
        threads=torch.get_num_threads(),
        loadavg=load_average(),
    )
