"""``graphprof --model X --measure``: the dry run, then a real run beside it (kept apart from main.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from graphprof.cost.result import Profile
    from graphprof.devices.hardware import Hardware
    from graphprof.prepared import PreparedModel


def measure_hardware(hardware: Hardware | None, device: torch.device) -> tuple[Hardware | None, str | None]:
    """The device whose roofline gives the estimate, and a line saying which when none was asked for."""
    if hardware is not None:
        return hardware, None
    from graphprof.calibrate import measure_default_hardware

    name = None
    if device.type == "cuda":
        import torch

        name = torch.cuda.get_device_name(device)
    return measure_default_hardware(device.type, name)


def check_measure_options(*, device: str | None, iters: int, warmup: int) -> torch.device:
    """Check the measurement options before anything is built (the optimizer is an enum option, checked by
    the parser); the torch device to measure on."""
    from graphprof.measure.run import resolve_device
    from graphprof.measure.timing import check_runs

    check_runs(iters, warmup)
    return resolve_device(device)


def run_measure(
    prepared: PreparedModel,
    profile: Profile,
    *,
    hardware: Hardware | None,
    device: torch.device,
    iters: int,
    warmup: int,
    trace: Path | None,
    optimizer: str,
    redact: bool = False,
    model_name: str = "",
) -> tuple[Profile, Hardware | None]:
    """The real run beside the dry run's ``profile``: (profile with its measurement, the hardware the estimate is for).
    With ``redact``, the Chrome traces written are redacted (:func:`graphprof.measure.trace.redact_trace`)."""
    measurement = prepared.measure(device=device, iters=iters, warmup=warmup, trace_dir=trace, optimizer=optimizer)
    if redact and measurement.traces:
        from graphprof.measure.trace import redact_trace

        measurement = dataclasses.replace(measurement, traces=tuple(str(redact_trace(p, model_name)) for p in measurement.traces))
    chosen, note = measure_hardware(hardware, device)
    if note is not None:  # which device the estimate is for, or that there is none (never chosen silently)
        measurement = dataclasses.replace(measurement, notes=(*measurement.notes, note))
    from graphprof.measure.utilization import with_utilization

    return with_utilization(dataclasses.replace(profile, measurement=measurement), chosen), chosen
