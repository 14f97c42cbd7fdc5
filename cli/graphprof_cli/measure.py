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


def run_measure(
    model: str,
    *,
    hardware: Any,
    device: str | None,
    iters: int,
    warmup: int,
    trace: Path | None,
    optimizer: str,
    profile_options: dict[str, Any],
) -> tuple[Any, Any]:
    """Options checked first, then the dry run (profile), then the measurement; returns (profile, roofline)."""
    import graphprof
    from graphprof.errors import InvalidInputError
    from graphprof.measure.run import OPTIMIZERS, resolve_device
    from graphprof.measure.timing import check_runs
    from graphprof.roofline import classify

    check_runs(iters, warmup)
    if optimizer not in OPTIMIZERS:
        raise InvalidInputError(f"unknown optimizer {optimizer!r} (use one of: {', '.join(OPTIMIZERS)})")
    dev = resolve_device(device)
    # the estimate is for the device measured: a GPU gets its fused kernels (issue 10's lowering)
    target = "cuda" if dev.type == "cuda" else (hardware.target if hardware is not None else None)
    prepared = graphprof.prepare(model, target=target, **profile_options)
    profile = prepared.profile()
    measurement = prepared.measure(device=dev, iters=iters, warmup=warmup, trace_dir=trace, optimizer=optimizer)
    profile = dataclasses.replace(profile, measurement=measurement)
    return profile, classify(profile, measure_hardware(hardware, dev))
