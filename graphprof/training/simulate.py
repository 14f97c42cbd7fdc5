"""One step of a model planned: the model and its inputs as the session builds them
(:func:`graphprof.session.build_model`), wrapped (checkpointing, FSDP) and
simulated into a :class:`~graphprof.training.result.MemoryPlan`. The floor :func:`graphprof.training.plan_memory`,
the checkpoint planner and the ranks search stand on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from graphprof.base.choices import Optimizer
from graphprof.base.inputs import describe_inputs, format_inputs
from graphprof.run.step import Wrap
from graphprof.session import BuiltModel
from graphprof.sharding.spec import ShardSpec
from graphprof.sharding.wraps import TensorParallel, fake_world, sharding_wraps
from graphprof.training.result import MemoryPlan, StepExecution
from graphprof.training.step import StepInputs, simulate_step

__all__ = ["plan_step"]


@contextlib.contextmanager
def _world(spec: ShardSpec | None, step: BuiltModel) -> Iterator[tuple[Wrap, ...]]:
    """The wraps that shard the step's copy (:func:`graphprof.sharding.wraps.sharding_wraps`: tensor
    parallelism, then FSDP), on a fake process group held while the step runs."""
    if spec is None:
        yield ()
        return
    with fake_world(spec) as meshes:
        yield tuple(w for w in sharding_wraps(spec, meshes, step.args, step.kwargs, step.name) if w is not None)


def plan_step(
    step: BuiltModel,
    *,
    dtype: torch.dtype | None,
    optimizer: Optimizer,
    foreach: bool,
    shard: ShardSpec | None,
    wraps: tuple[Wrap, ...] = (),
    cpu_kernels: bool = False,
) -> MemoryPlan:
    """One step of ``step`` simulated (checkpoint ``wraps`` first, then the sharding), as a :class:`MemoryPlan`;
    ``cpu_kernels``: for a CPU, whose matrix products copy operands BLAS cannot read."""
    with _world(shard, step) as sharding:
        wrapped = (*wraps, *sharding)
        inputs = StepInputs(step.model, step.args, step.kwargs, dtype, optimizer, foreach, step.real, wrapped, cpu_kernels)
        outcome, _ = simulate_step(inputs)
    notes = [
        f"{'real values on the CPU (the forward reads them)' if step.real else 'a dry run on FakeTensors'}: the storages the step's aten calls made, "
        "each phase's peak after the call that reached it (an estimate: no allocator rounding, "
        + ("of the kernels' private buffers only the CPU matrix products' copies)" if cpu_kernels else "no kernel's private workspace)"),
        f"a step with the optimizer's state already made (as after a first step); {optimizer.value}"
        f"{', multi-tensor (foreach)' if foreach else ', one tensor at a time'}; the loss is the sum of the outputs",
        "parameters include the buffers",
    ]
    if shard is not None:
        notes.append(f"per rank of {shard}, on a fake process group of {shard.world} ranks" + _sharding_note(shard, sharding))
    return MemoryPlan(
        model_name=step.name, inputs=format_inputs(describe_inputs(step.args, step.kwargs, dtype)),
        dtype=str(dtype or _model_dtype(step.model)).removeprefix("torch."), optimizer=optimizer, foreach=foreach,
        execution=StepExecution.REAL if step.real else StepExecution.FAKE, phases=outcome.phases, saved_activation_bytes=outcome.saved_total,
        shard=None if shard is None else str(shard), notes=tuple(notes),
    )  # fmt: skip


def _sharding_note(spec: ShardSpec, wraps: tuple[Wrap, ...]) -> str:
    parts = []
    for wrap in wraps:
        if isinstance(wrap, TensorParallel):
            parts.append(f"; tensor parallelism (DTensor) over {spec.tp} ranks, {wrap.plan.describe()}")
    if spec.fsdp > 1:
        parts.append(f"; FSDP2 fully_shard over {spec.fsdp} ranks, the gathered units are transients")
    return "".join(parts)


def _model_dtype(model: nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
