"""``plan_memory``: will one training step fit, and where is its peak (``graphprof fits``).

The step is simulated (:mod:`graphprof.training.step`): parameters, gradients, optimizer state, the
activations saved for backward and every transient, as each phase's peak; per rank with ``shard="fsdp:N"``
(FSDP2's ``fully_shard`` over a fake process group, as :mod:`graphprof.sharding` runs it). With
``memory_budget`` a checkpoint plan is chosen (:mod:`graphprof.training.checkpoint`).

>>> plan = plan_memory("resnet18", batch_size=8, hardware="h100")
>>> plan.peak.phase.value, plan.fits
('backward', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Optimizer
from graphprof.base.options import parse_dtype
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import InvalidInputError
from graphprof.session import build_model
from graphprof.sharding.spec import ShardSpec, parse_shard
from graphprof.training.result import MemoryPlan
from graphprof.training.simulate import plan_step

__all__ = ["plan_memory", "parse_memory"]


#: Byte units, decimal as everywhere in graphprof (``format_bytes``; a device's ``memory_gb``), binary by name.
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_memory(text: str | int) -> int:
    """``"40GB"`` -> ``40_000_000_000``; ``"1.5GiB"``, ``"800 MB"`` and a plain number of bytes too.

    >>> parse_memory("40GB"), parse_memory("1GiB"), parse_memory(512)
    (40000000000, 1073741824, 512)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = float(text), "b"
    else:
        raw = str(text).strip().lower().replace(" ", "")
        number = raw.rstrip("kmgtib")
        unit = raw[len(number) :] or "b"
        try:
            value = float(number)
        except ValueError:
            value = float("nan")
    if unit not in _UNITS or not value > 0 or value == float("inf"):
        raise InvalidInputError(f"memory {text!r}: write a positive size such as 40GB, 800MB or 1.5GiB")
    return int(value * _UNITS[unit])


def plan_memory(
    model_or_name: nn.Module | str,
    *,
    optimizer: Optimizer | str = Optimizer.ADAMW,
    hardware: Hardware | str | None = None,
    dtype: str | torch.dtype | None = None,
    shard: ShardSpec | str | None = None,
    memory_budget: int | str | None = None,
    foreach: bool | None = None,
    batch_size: int | None = None,
    input_shape: Sequence[int] | str | None = None,
    example_inputs: tuple[Any, ...] | None = None,
    example_kwargs: dict[str, Any] | None = None,
) -> MemoryPlan:
    """Will a training step of ``model_or_name`` fit ``hardware``? See the module docstring.

    ``foreach`` (the optimizer's multi-tensor step) defaults to what torch picks on the device: on for a
    GPU preset (NVIDIA's or AMD's: ROCm runs torch's CUDA defaults), off for the CPU. ``memory_budget`` (bytes, or ``"40GB"``) adds a checkpoint plan.
    """
    opt = Optimizer.parse(optimizer) if isinstance(optimizer, str) else optimizer
    device = get_hardware(hardware) if isinstance(hardware, str) else hardware
    spec = parse_shard(shard) if isinstance(shard, str) else shard
    budget = None if memory_budget is None else parse_memory(memory_budget)
    run_dtype = parse_dtype(dtype)
    multi = device is not None and "GPU" in device.kind if foreach is None else foreach
    step = build_model(
        model_or_name, batch_size=batch_size, input_shape=input_shape, example_inputs=example_inputs, example_kwargs=example_kwargs
    )
    plan = plan_step(step, dtype=run_dtype, optimizer=opt, foreach=multi, shard=spec)
    if budget is not None:
        from graphprof.training.checkpoint import plan_checkpoint

        plan = replace(
            plan, checkpoint=plan_checkpoint(step, plan, budget, device, dtype=run_dtype, optimizer=opt, foreach=multi, shard=spec)
        )
    if device is None:
        return plan
    return replace(plan, device=device.label, device_memory_bytes=device.memory_bytes)
