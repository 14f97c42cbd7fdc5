"""One training step as the run loop runs it: forward, the loss, backward, the optimizer's step.

:func:`run_step` is the loop's step seam. It runs a copy of the model (never the user's) that it makes,
wraps and owns: the copy is cast to the step's dtype, its parameters become FakeTensors (shapes and dtypes,
nothing allocated) unless the step is ``real`` (a model whose forward reads values), tied weights are tied
again, and the caller's wraps are applied in order (activation checkpointing, tensor parallelism, FSDP).
The optimizer's state is made before anything is watched, as after a first step. Then the loop's observers
see the step as they see any run: ``started`` (the :class:`~graphprof.run.events.RunContext` carries the
copy, its inputs and the optimizer), the copy's modules as layers, every aten call through the one op tap,
every tensor autograd saves, and the phases ``forward`` (the loss included), ``backward`` and, with an
optimizer, ``optimizer`` (its step, then gradients set to ``None``).

The pieces that belong to a job stay with the job: which optimizer and how its state is made, which loss,
which wraps (:mod:`graphprof.training.step`, :mod:`graphprof.sharding.run`) come in a :class:`StepSpec`.

Example: the live bytes of a small step on FakeTensors (the training plan's tracker is such an observer)::

    >>> import torch
    >>> from torch import nn
    >>> spec = StepSpec(loss=lambda out: out.sum(), optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1))
    >>> _ = run_step(nn.Linear(4, 2), (torch.empty(3, 4, device="meta"),), {}, [], spec)
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from graphprof.base.choices import Phase
from graphprof.base.tied import retie, tied_groups
from graphprof.run.dispatch import EventBus, watch
from graphprof.run.events import Observer, RunContext
from graphprof.run.fakes import fake_mode, faking
from graphprof.run.layers import module_layers

__all__ = ["StepSpec", "Wrap", "checkpointed", "run_step"]

#: Called on the step's copy of the model, in order (``fully_shard``, checkpoint wrappers); returns the model to run.
Wrap = Callable[[nn.Module], nn.Module]


def checkpointed(modules: set[str], **checkpoint_options: Any) -> Wrap:
    """A wrap that recomputes each named module's forward in the backward (``torch.utils.checkpoint``,
    non-reentrant, through torch's ``checkpoint_wrapper``, with ``checkpoint_options`` such as a selective
    policy's ``context_fn``), on the step's copy."""

    def wrap(model: nn.Module) -> nn.Module:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl,
            apply_activation_checkpointing,
            checkpoint_wrapper,
        )

        chosen = {id(m) for name, m in model.named_modules() if name in modules}
        apply_activation_checkpointing(
            model, checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT, **checkpoint_options),
            check_fn=lambda m: id(m) in chosen,
        )  # fmt: skip
        return model

    return wrap


@dataclass(frozen=True)
class StepSpec:
    """What a training step adds to a run.

    ``loss`` turns the model's outputs into the scalar whose backward runs; ``optimizer`` makes the
    optimizer of the wrapped copy with its state already made (``None``: forward and backward only);
    ``wraps`` are applied to the copy in order; ``dtype`` casts the copy (and, with ``cast_inputs``, the
    floating-point inputs); ``real`` runs on real tensors instead of FakeTensors; ``warm`` runs once on the
    wrapped copy before anything is watched (DTensor's first sight of each op); ``defer`` are tensor
    subclasses whose calls the tap hands back, so observers see one rank's calls on its shards.
    """

    loss: Callable[[Any], torch.Tensor]
    optimizer: Callable[[nn.Module], torch.optim.Optimizer] | None = None
    wraps: tuple[Wrap, ...] = ()
    dtype: torch.dtype | None = None
    real: bool = False
    cast_inputs: bool = True
    warm: Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None] | None = None
    defer: tuple[type, ...] = ()


def run_step(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], observers: Sequence[Observer], spec: StepSpec) -> nn.Module:
    """One training step of a copy of ``model`` on ``args``/``kwargs``, told to ``observers`` (see the module
    docstring). Returns the wrapped copy the step ran (FakeTensors unless ``spec.real``), for figures a job
    reads off it afterwards (the shards' bytes)."""
    tied = tied_groups(model)  # the user's ties, put back after the conversions of the copy below
    work = copy.deepcopy(model)  # the user's model (or the meta build) is never wrapped itself
    if spec.dtype is not None:
        work = work.to(spec.dtype)  # on the copy, before its parameters become FakeTensors
    with contextlib.ExitStack() as stack:
        if not spec.real:
            stack.enter_context(faking(fake_mode()))
            work = work.to_empty(device="cpu")  # FakeTensors: shapes and dtypes, no memory
        retie(work, tied)  # to_empty unties them: the step would hold a second embedding, its gradient and state
        for wrap in spec.wraps:
            work = wrap(work)
        work.train()
        cast = spec.dtype if spec.cast_inputs else None
        call_args, call_kwargs = _step_inputs(args, spec.real, cast), _step_inputs(kwargs, spec.real, cast)
        optimizer = spec.optimizer(work) if spec.optimizer is not None else None
        if spec.warm is not None:
            spec.warm(work, call_args, call_kwargs)
        loop = EventBus(observers, train=True)
        loop.defer = spec.defer
        state = {**dict(work.named_parameters()), **dict(work.named_buffers())}
        ctx = RunContext(work, None, not spec.real, True, (call_args, call_kwargs), state, {}, optimizer, loop.unobserved)
        loop.start(ctx)
        stack.enter_context(module_layers(work, loop, ctx.layers, own=True))
        watch(stack, loop)
        _train_step(loop, work, call_args, call_kwargs, spec.loss, optimizer)
        loop.finish(None)
    return work


def _train_step(
    loop: EventBus,
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    loss_of: Callable[[Any], torch.Tensor],
    optimizer: torch.optim.Optimizer | None,
) -> None:
    """Forward and the loss, backward, the optimizer's step and gradients set to ``None``; each phase told
    as it starts. The outputs are not held past the loss, as in a training loop."""
    loop.set_phase(Phase.FORWARD)
    loss = loss_of(model(*args, **kwargs))
    loop.set_phase(Phase.BACKWARD)
    loss.backward()
    del loss
    if optimizer is not None:
        loop.set_phase(Phase.OPTIMIZER)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _step_inputs(value: Any, real: bool, dtype: torch.dtype | None) -> Any:
    """Inputs on the step's tensors: real ones kept, meta ones given zeros (inside the fake mode: fakes);
    floating-point ones in ``dtype`` where given, as the model's parameters are."""

    def convert(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        cast = dtype if dtype is not None and t.is_floating_point() else t.dtype
        if real and t.device.type != "meta":
            return t.to(cast)
        return torch.zeros(t.shape, dtype=cast)

    return tree_map(convert, value)
