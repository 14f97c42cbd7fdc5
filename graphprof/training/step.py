"""One training step, as a planner simulates it and as a real run measures it: the same step for both.

A step is ``loss = sum of the outputs; loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)``.
:func:`simulate_step` runs it through the run loop (:func:`graphprof.run.step.run_step`, the loop's step
seam), on a copy of the model whose optimizer state is made first (as a first step does), tracked by the
observer :class:`~graphprof.training.tracker.StepMemory` beside any others. The copy's parameters are
FakeTensors (nothing allocated) unless the model's forward reads values (a graph model's edge list), which
then runs on the CPU for real. The user's model is never touched: the copy is the one wrapped, checkpointed
or sharded. :func:`train_step` is the same step on a real model, for the measured reference
(:mod:`graphprof.training.measured`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

from graphprof.base.choices import Optimizer, Phase
from graphprof.measure.timing import default_loss
from graphprof.run.events import Observer
from graphprof.run.step import StepSpec, Wrap, run_step
from graphprof.training.result import PhasePeak, StepBreakdown
from graphprof.training.tracker import StepMemory, dense_tensors

__all__ = ["StepInputs", "StepOutcome", "train_step", "make_optimizer", "simulate_step", "storage_bytes"]


@dataclass(frozen=True)
class StepInputs:
    """What one step runs: the model (meta, or real), its inputs, the dtype, the optimizer and whether its
    step is the multi-tensor one (``foreach``: CUDA's default, with a temporary per parameter list)."""

    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    dtype: torch.dtype | None
    optimizer: Optimizer = Optimizer.ADAMW
    foreach: bool = False
    real: bool = False
    wraps: tuple[Wrap, ...] = field(default=())
    #: the step runs on a CPU: its matrix products' private copies count (:func:`~graphprof.training.tracker.cpu_matrix_copies`)
    cpu_kernels: bool = False


@dataclass(frozen=True)
class StepOutcome:
    """The simulated step: each phase's peak, the bytes saved for backward, the base's parts."""

    phases: tuple[PhasePeak, ...]
    saved_total: int


def make_optimizer(model: nn.Module, optimizer: Optimizer, foreach: bool) -> torch.optim.Optimizer:
    """torch's optimizer with its defaults (AdamW: lr 1e-3, two moments in the parameters' dtype)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer is Optimizer.ADAMW:
        return torch.optim.AdamW(params, foreach=foreach)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)


class LocalShards(torch.optim.Optimizer):
    """The optimizer of a sharded model run on each parameter's local shard: the same kernels on the same
    storages as on the DTensors (a DTensor's update is its local tensors'), without DTensor's sharding
    propagation of every multi-tensor call, which costs a 70B model's simulation half a minute.
    ``state`` is the inner optimizer's; gradients are handed over (no copy) before each step."""

    def __init__(self, model: nn.Module, optimizer: Optimizer, foreach: bool) -> None:
        self.pairs = [(p, nn.Parameter(_local(p), requires_grad=True)) for p in model.parameters() if p.requires_grad]
        self.inner = make_optimizer(nn.ParameterList([local for _, local in self.pairs]), optimizer, foreach)
        self.state = self.inner.state
        self.param_groups = self.inner.param_groups

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for p, local in self.pairs:
            local.grad = None if p.grad is None else _local(p.grad)
        self.inner.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p, local in self.pairs:
            p.grad = local.grad = None


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (the tensor its storage is), without a copy or an autograd edge; a plain
    tensor itself (a parameter tensor parallelism leaves whole)."""
    local: torch.Tensor = getattr(t, "_local_tensor", t)  # DTensor's attribute, not in torch's stubs
    return local


def _is_sharded(model: nn.Module) -> bool:
    return any(hasattr(p, "_local_tensor") for p in model.parameters())


def train_step(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    mark: Callable[[Phase], None] = lambda _p: None,
) -> None:
    """One step: forward, the sum of the outputs as the loss, backward, the optimizer's step, gradients
    set to ``None``. ``mark`` is told each phase as it starts."""
    mark(Phase.FORWARD)
    loss = default_loss(model(*args, **kwargs))
    mark(Phase.BACKWARD)
    loss.backward()
    del loss
    mark(Phase.OPTIMIZER)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def storage_bytes(tensors: Any) -> int:
    """Bytes of the storages under ``tensors`` (any nesting), each storage once."""
    seen: dict[StorageWeakRef, int] = {}
    for t in dense_tensors(tree_flatten(tensors)[0]):
        seen[StorageWeakRef(t.untyped_storage())] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _create_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's state as a first step leaves it (AdamW's moments and step counts), made by one
    optimizer step on zero gradients: a whole first training step would cost a forward and a backward more."""
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _optimizer_with_state(optimizer: Optimizer, foreach: bool) -> Callable[[nn.Module], torch.optim.Optimizer]:
    """The step's optimizer on its wrapped copy (a sharded model's on each local shard), its state made."""

    def make(model: nn.Module) -> torch.optim.Optimizer:
        opt = LocalShards(model, optimizer, foreach) if _is_sharded(model) else make_optimizer(model, optimizer, foreach)
        _create_state(model, opt)
        return opt

    return make


def simulate_step(inputs: StepInputs, observers: Sequence[Observer] = ()) -> tuple[StepOutcome, dict[str, int]]:
    """One step of a copy of ``inputs.model`` through the run loop (:func:`graphprof.run.step.run_step`),
    tracked by :class:`~graphprof.training.tracker.StepMemory` and watched by ``observers`` too. Returns the
    outcome and the base's parts in bytes (``parameters``, ``optimizer_state``, ``inputs``)."""
    tracker = StepMemory(inputs.cpu_kernels)
    spec = StepSpec(
        loss=default_loss,
        optimizer=_optimizer_with_state(inputs.optimizer, inputs.foreach),
        wraps=inputs.wraps,
        dtype=inputs.dtype,
        real=inputs.real,
    )
    run_step(inputs.model, inputs.args, inputs.kwargs, [tracker, *observers], spec)
    base = tracker.base
    phases = tuple(
        PhasePeak(phase, StepBreakdown(base["parameters"], snap.gradients, base["optimizer_state"], snap.activations, base["inputs"], snap.transients), snap.module, snap.op)
        for phase, snap in tracker.peaks.items()
    )  # fmt: skip
    return StepOutcome(phases, tracker.saved_total), base
