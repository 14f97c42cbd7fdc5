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

from graphprof.base.choices import ActivationCheckpoint, Lowering, Optimizer
from graphprof.base.limits import parse_memory
from graphprof.base.options import parse_dtype
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import InvalidInputError
from graphprof.session import BuiltModel, build_model
from graphprof.sharding.checkpoint import unit_checkpoint
from graphprof.sharding.spec import ShardSpec, parse_shard
from graphprof.training.measured import PlanCheck
from graphprof.training.result import MemoryPlan
from graphprof.training.simulate import plan_step

__all__ = ["plan_memory", "parse_memory"]


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
    verify: bool | None = None,
    checkpoint: ActivationCheckpoint | str = ActivationCheckpoint.NONE,
) -> MemoryPlan:
    """Will a training step of ``model_or_name`` fit ``hardware``? See the module docstring.

    ``foreach`` (the optimizer's multi-tensor step) defaults to what torch picks on the device: on for a
    GPU preset (NVIDIA's or AMD's: ROCm runs torch's CUDA defaults), off for the CPU. ``memory_budget`` (bytes, or ``"40GB"``) adds a checkpoint plan.
    ``verify`` runs the plan for real on this machine's CPU (random weights) and decides "fits" on the
    allocator's peak; by default on for a CPU preset's plan (a GPU's kernels are not this CPU's).
    ``checkpoint`` (``none``, ``selective``, ``full``): every FSDP unit checkpointed as the priced step recomputes
    it (:func:`graphprof.sharding.checkpoint.unit_checkpoint`), before the sharding.
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
    cpu = device is None or device.target is Lowering.CPU  # foreach's default, and the CPU kernels' copies
    wrap = unit_checkpoint(checkpoint)
    if wrap is not None and budget is not None:
        raise InvalidInputError("a memory budget plans the checkpointing itself: give --checkpoint or --memory-budget, not both")
    wraps = () if wrap is None else (wrap,)
    plan = plan_step(step, dtype=run_dtype, optimizer=opt, foreach=multi, shard=spec, wraps=wraps, cpu_kernels=cpu and spec is None)
    if budget is not None:
        from graphprof.training.checkpoint import plan_checkpoint

        check = _plan_check(step, plan, device, run_dtype, opt) if (verify if verify is not None else _on_cpu(device, spec)) else None
        plan = replace(
            plan,
            checkpoint=plan_checkpoint(step, plan, budget, device, dtype=run_dtype, optimizer=opt, foreach=multi, shard=spec, check=check),
        )
    if wrap is not None:
        note = f"activation checkpointing '{checkpoint}' of every FSDP unit, as the priced step recomputes (graphprof.sharding.checkpoint)"
        plan = replace(plan, notes=(*plan.notes, note))
    if device is None:
        return plan
    return replace(plan, device=device.label, device_memory_bytes=device.memory_bytes)


def _on_cpu(device: Hardware | None, shard: ShardSpec | None) -> bool:
    """A plan whose step runs on a CPU, on one device: its real peak can be measured here."""
    return device is not None and device.target is Lowering.CPU and shard is None


def _plan_check(step: BuiltModel, plan: MemoryPlan, device: Hardware | None, dtype: torch.dtype | None, opt: Optimizer) -> PlanCheck:
    if device is not None and device.target is not Lowering.CPU:
        raise InvalidInputError(f"verify=True measures a plan on this machine's CPU; {device.name} is not a CPU preset")
    return PlanCheck(step.model, step.args, step.kwargs, dtype=dtype, optimizer=opt, expected_bytes=plan.peak_bytes)
