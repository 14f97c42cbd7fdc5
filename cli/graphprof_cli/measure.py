"""``graphprof --model X --measure``: the dry run, then a real run beside it (kept apart from main.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


def measure_hardware(hardware: Any, device: Any) -> Any:
    """The device whose roofline gives the estimate: the one asked for, else a preset for the measured device."""
    from graphprof.hardware import get_hardware

    if hardware is not None:
        return hardware
    if device.type == "cuda":
        import torch

        name = torch.cuda.get_device_name(device).lower()
        for key in ("h200", "h100", "a100", "l4", "t4"):
            if key in name:
                return get_hardware(key)
        return None
    return get_hardware("cpu")


def check_measure_options(*, device: str | None, iters: int, warmup: int, optimizer: str) -> Any:
    """Check the measurement options before anything is built; the torch device to measure on."""
    from graphprof.errors import InvalidInputError
    from graphprof.measure.run import OPTIMIZERS, resolve_device
    from graphprof.measure.timing import check_runs

    check_runs(iters, warmup)
    if optimizer not in OPTIMIZERS:
        raise InvalidInputError(f"unknown optimizer {optimizer!r} (use one of: {', '.join(OPTIMIZERS)})")
    return resolve_device(device)


def run_measure(
    prepared: Any,
    profile: Any,
    *,
    hardware: Any,
    device: Any,
    iters: int,
    warmup: int,
    trace: Path | None,
    optimizer: str,
) -> tuple[Any, Any]:
    """The real run beside the dry run's ``profile``: (profile with its measurement, the hardware the estimate is for)."""
    measurement = prepared.measure(device=device, iters=iters, warmup=warmup, trace_dir=trace, optimizer=optimizer)
    return dataclasses.replace(profile, measurement=measurement), measure_hardware(hardware, device)
