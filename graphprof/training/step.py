"""One training step, as a planner simulates it and as a real run measures it: the same code for both.

A step is ``loss = sum of the outputs; loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)``
(:func:`train_step`). :func:`simulate_step` creates the optimizer's state on a copy of the model (as a
first step does) and tracks one step with
:class:`~graphprof.training.tracker.StepMemory`. The copy's parameters are FakeTensors (nothing allocated)
unless the model's forward reads values (a graph model's edge list), which then runs on the CPU for real.
The user's model is never touched: the copy is the one wrapped, checkpointed or sharded.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten, tree_map

from graphprof.base.choices import Optimizer
from graphprof.base.tied import retie, tied_groups
from graphprof.measure.timing import default_loss
from graphprof.training.result import PhasePeak, StepBreakdown, StepPhase
from graphprof.training.tracker import StepMemory, dense_tensors

__all__ = [
    "StepInputs",
    "StepOutcome",
    "StepObserver",
    "train_step",
    "make_optimizer",
    "simulate_step",
    "checkpointed",
    "storage_bytes",
]

#: Called on the step's copy of the model before its optimizer is made (FSDP's ``fully_shard``, checkpoint wrappers).
Wrap = Callable[[nn.Module], nn.Module]


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
    mark: Callable[[StepPhase], None] = lambda _p: None,
) -> None:
    """One step: forward, the sum of the outputs as the loss, backward, the optimizer's step, gradients
    set to ``None``. ``mark`` is told each phase as it starts."""
    mark(StepPhase.FORWARD)
    loss = default_loss(model(*args, **kwargs))
    mark(StepPhase.BACKWARD)
    loss.backward()
    del loss
    mark(StepPhase.OPTIMIZER)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def storage_bytes(tensors: Any) -> int:
    """Bytes of the storages under ``tensors`` (any nesting), each storage once."""
    seen: dict[StorageWeakRef, int] = {}
    for t in dense_tensors(tree_flatten(tensors)[0]):
        seen[StorageWeakRef(t.untyped_storage())] = t.untyped_storage().nbytes()
    return sum(seen.values())


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every tensor of the optimizer's state (AdamW's moments and step counts)."""
    return [t for state in optimizer.state.values() for t in tree_flatten(state)[0] if isinstance(t, torch.Tensor)]


@contextlib.contextmanager
def _fake_mode(real: bool) -> Iterator[None]:
    if real:
        yield
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        yield


def _create_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's state as a first step leaves it (AdamW's moments and step counts), made by one
    optimizer step on zero gradients: a whole first training step would cost a forward and a backward more."""
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _prepared_copy(inputs: StepInputs) -> nn.Module:
    model = copy.deepcopy(inputs.model)  # the user's model (or the meta build) is never wrapped itself
    return model if inputs.dtype is None else model.to(inputs.dtype)


def _step_inputs(value: Any, real: bool, dtype: torch.dtype | None) -> Any:
    """Inputs on the step's tensors: real ones kept, meta ones given zeros (inside the fake mode: fakes);
    floating-point ones in the step's dtype, as the model's parameters are."""

    def convert(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        cast = dtype if dtype is not None and t.is_floating_point() else t.dtype
        if real and t.device.type != "meta":
            return t.to(cast)
        return torch.zeros(t.shape, dtype=cast)

    return tree_map(convert, value)


class StepObserver(Protocol):
    """Something else that watches the tracked step (:class:`graphprof.training.checkpoint.BlockCosts`): a
    dispatch mode entered with the tracker, hooks on the step's copy, and each tensor autograd saves."""

    def attach(self, model: nn.Module) -> list[Any]: ...

    def saved(self, t: torch.Tensor) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, kind: Any, value: Any, traceback: Any, /) -> Any: ...


def simulate_step(inputs: StepInputs, observers: Sequence[StepObserver] = ()) -> tuple[StepOutcome, dict[str, int]]:
    """Two steps of a copy of ``inputs.model``; the second tracked (and watched by ``observers``). Returns
    the outcome and the base's parts in bytes (``parameters``, ``optimizer_state``, ``inputs``)."""
    tied = tied_groups(inputs.model)
    model = _prepared_copy(inputs)
    with _fake_mode(inputs.real):
        if not inputs.real:
            model = model.to_empty(device="cpu")  # FakeTensors: shapes and dtypes, no memory
        retie(model, tied)  # to_empty unties them: the step would hold a second embedding, its gradient and state
        for wrap in inputs.wraps:
            model = wrap(model)
        model.train()
        args, kwargs = (
            _step_inputs(inputs.args, inputs.real, inputs.dtype),
            _step_inputs(inputs.kwargs, inputs.real, inputs.dtype),
        )
        optimizer = (
            LocalShards(model, inputs.optimizer, inputs.foreach)
            if _is_sharded(model)
            else make_optimizer(model, inputs.optimizer, inputs.foreach)
        )
        _create_state(model, optimizer)
        tracker = StepMemory(model)
        base = {
            "parameters": tracker.set_base([*model.parameters(), *model.buffers()]),
            "optimizer_state": tracker.set_base(optimizer_tensors(optimizer)),
            "inputs": tracker.set_base(tree_flatten((args, kwargs))[0]),
        }
        handles = tracker.hooks() + [h for o in observers for h in o.attach(model)]

        def pack(t: torch.Tensor) -> torch.Tensor:
            for o in observers:
                o.saved(t)
            return tracker.pack(t)

        try:
            with contextlib.ExitStack() as stack:
                for o in observers:
                    stack.enter_context(o)
                stack.enter_context(tracker)  # innermost: sees the calls as the model makes them
                stack.enter_context(torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t))
                train_step(model, args, kwargs, optimizer, mark=lambda phase: setattr(tracker, "phase", phase))
        finally:
            for h in handles:
                h.remove()
    phases = tuple(
        PhasePeak(phase, StepBreakdown(base["parameters"], snap.gradients, base["optimizer_state"], snap.activations, base["inputs"], snap.transients), snap.module, snap.op)
        for phase, snap in tracker.peaks.items()
    )  # fmt: skip
    return StepOutcome(phases, tracker.saved_total), base


def checkpointed(modules: set[str]) -> Wrap:
    """A wrap that recomputes each named module's forward in the backward (``torch.utils.checkpoint``,
    non-reentrant, through torch's ``checkpoint_wrapper``), on the step's copy."""

    def wrap(model: nn.Module) -> nn.Module:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl,
            apply_activation_checkpointing,
            checkpoint_wrapper,
        )

        chosen = {id(m) for name, m in model.named_modules() if name in modules}
        apply_activation_checkpointing(
            model, checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
            check_fn=lambda m: id(m) in chosen,
        )  # fmt: skip
        return model

    return wrap
