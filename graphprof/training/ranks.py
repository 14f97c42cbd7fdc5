"""How many ranks: the smallest FSDP world size at which a training step fits a device, with and without
activation checkpointing of every block.

Each world size costs one simulated step (:func:`graphprof.training.simulate.plan_step`; a 70B model's takes about
a minute), so the search simulates few: each phase's per-rank peak splits into what FSDP shards (the
parameters, their gradients and the optimizer's state: ``S / N``) and what it does not (activations, the
gathered units, transients: ``R``), so from one simulated world ``W`` every other is extrapolated as
``R + S * W / N`` (padding aside), the smallest power of two that fits is picked, and that world size is
simulated to confirm it (and its half, to confirm it is the smallest). No unsharded step runs at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Optimizer
from graphprof.base.inputs import describe_inputs, format_inputs
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import InvalidInputError
from graphprof.run.step import Wrap, checkpointed
from graphprof.session import BuiltModel, build_model
from graphprof.sharding.checkpoint import unit_names
from graphprof.sharding.spec import MAX_WORLD, ShardSpec
from graphprof.training.result import MemoryPlan, RanksPlan
from graphprof.training.simulate import plan_step

__all__ = ["plan_ranks", "extrapolate"]


def extrapolate(plan: MemoryPlan, world: int, to: int) -> int:
    """The per-rank peak at ``to`` ranks from the one simulated at ``world``: each phase's sharded part
    (parameters, gradients, optimizer state) scaled by ``world / to``, the rest kept.

    >>> # a phase of 100 B sharded + 50 B not, at 4 ranks -> 8 ranks: 50 + 100 * 4 / 8 = 100
    """
    peaks = []
    for p in plan.phases:
        b = p.breakdown
        sharded = b.parameters + b.gradients + b.optimizer_state
        peaks.append(b.total - sharded + sharded * world // to)
    return max(peaks)


def _smallest(plan: MemoryPlan, world: int, memory: int, limit: int) -> int | None:
    n = 2
    while n <= limit:
        if extrapolate(plan, world, n) <= memory:
            return n
        n *= 2
    return None


def _search(step: BuiltModel, memory: int, limit: int, wraps: tuple[Wrap, ...], **run: Any) -> tuple[int | None, list[tuple[int, int]]]:
    """The smallest power-of-two world that fits ``memory`` and every world simulated on the way."""
    tried: dict[int, int] = {}

    def simulate(n: int) -> MemoryPlan:
        plan = plan_step(step, shard=ShardSpec(fsdp=n), wraps=wraps, **run)
        tried[n] = plan.peak_bytes
        return plan

    world = 8 if limit >= 8 else 2
    guess = _smallest(simulate(world), world, memory, limit)
    while guess is not None and guess not in tried:
        plan = simulate(guess)
        if plan.peak_bytes > memory:  # the extrapolation was short: go on from the world just simulated
            guess = _smallest(plan, guess, memory, limit)
            guess = None if guess is None else max(guess, 2 * max(n for n, b in tried.items() if b > memory))
        elif guess // 2 >= 2 and guess // 2 not in tried:
            simulate(guess // 2)
    fitting = [n for n, b in tried.items() if b <= memory]
    return (min(fitting) if fitting else None), sorted(tried.items())


def _ranked(
    model: nn.Module | str,
    device: Hardware,
    candidates: Sequence[tuple[int | None, str]],
    dtype: Any,
    batch_size: int | None,
    input_shape: Sequence[int] | str | None,
) -> tuple[tuple[int, str, float, float], ...]:
    """Each fitting candidate ``(world, checkpoint)`` priced (:func:`graphprof.sharding.shard_profile`), fastest per GPU first;
    none where a candidate cannot be priced (no token inputs, or more shards than one dry run lays out)."""
    from graphprof.sharding.profile import shard_profile
    from graphprof.sharding.step_result import StepOptions

    if device.links is None:
        return ()
    out = []
    for world, checkpoint in dict.fromkeys(c for c in candidates if c[0] is not None):
        assert world is not None
        try:
            p = shard_profile(model, ShardSpec(fsdp=world), hardware=device, timing=StepOptions(checkpoint=checkpoint), dtype=dtype,
                              batch_size=batch_size, input_shape=input_shape)  # fmt: skip
        except InvalidInputError:  # the ranking is a bonus on the plan: a world too large to lay out is not ranked
            return ()
        if p.step is None or p.step.tokens_per_s_per_gpu is None:  # no token inputs: nothing to rank by
            return ()
        out.append((world, checkpoint, p.step.tokens_per_s_per_gpu, p.step.time_s))
    return tuple(sorted(out, key=lambda c: -c[2]))


def plan_ranks(
    model_or_name: nn.Module | str,
    hardware: Hardware | str,
    *,
    optimizer: Optimizer | str = Optimizer.ADAMW,
    dtype: str | torch.dtype | None = None,
    foreach: bool | None = None,
    max_world: int = 4096,
    batch_size: int | None = None,
    input_shape: Sequence[int] | str | None = None,
    rank: bool = True,
) -> RanksPlan:
    """The smallest FSDP world size (a power of two) whose per-rank step fits ``hardware``'s memory,
    without and with every block checkpointed. See the module docstring. With ``rank`` and a device whose
    links are published, the two candidates are ranked by tokens/s per GPU (one sharded dry run each).

    >>> plan_ranks("hf:llama-3-70b", "h100", dtype="bf16").world     # doctest: +SKIP
    """
    from graphprof.base.options import parse_dtype

    device = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if device.memory_bytes is None:
        raise InvalidInputError(f"{device.label} has no memory figure: give a preset that has one")
    if not 2 <= max_world <= MAX_WORLD:
        raise InvalidInputError(f"max_world must be between 2 and {MAX_WORLD}")
    opt = Optimizer.parse(optimizer) if isinstance(optimizer, str) else optimizer
    run = {"dtype": parse_dtype(dtype), "optimizer": opt, "foreach": "GPU" in device.kind if foreach is None else foreach}
    step = build_model(model_or_name, batch_size=batch_size, input_shape=input_shape)
    world, tried = _search(step, device.memory_bytes, max_world, (), **run)
    blocks = unit_names(step.model)  # the FSDP units: the blocks the priced step recomputes, so the two agree
    world_cp, tried_cp = _search(step, device.memory_bytes, max_world, (checkpointed(set(blocks)),), **run)
    ranked = _ranked(model_or_name, device, [(world, "none"), (world_cp, "full")], dtype, batch_size, input_shape) if rank else ()
    return RanksPlan(
        model_name=step.name, device=device.label, device_memory_bytes=device.memory_bytes, world=world,
        world_with_checkpoint=world_cp, tried=tuple(tried), tried_with_checkpoint=tuple(tried_cp),
        notes=(
            f"planned for the input {format_inputs(describe_inputs(step.args, step.kwargs, parse_dtype(dtype)))} per rank "
            "(--batch-size, --input-shape or the model's spec change it)",
            "per-rank peak of one training step simulated on FakeTensors with FSDP2 over a fake process group, "
            "at each world size listed; the others extrapolated (sharded state / N), then confirmed",
            f"with checkpointing: every one of {len(blocks)} FSDP units recomputed in the backward (torch.utils.checkpoint), "
            "the blocks the priced step recomputes",
            *(["ranked by tokens/s per GPU: each candidate's step priced on the device (graphprof shard's step time)"] if ranked else []),
        ), ranked=ranked,
    )  # fmt: skip
