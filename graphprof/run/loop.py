"""The run loop: run a captured graph (or the eager model) once and tell observers what happened.

Every pass that needs to see the model run is an :class:`~graphprof.run.events.Observer`; the events it is
told are in :mod:`graphprof.run.events`. The run is put together from parts, one job each:

* :mod:`graphprof.run.fakes`: the run's copy of each tensor (FakeTensors on a dry run, cast to a dtype);
* :mod:`graphprof.run.layers`: the layers (graph nodes, or modules in the eager capture) and the forward;
* :mod:`graphprof.run.dispatch`: the event bus and the one ``TorchDispatchMode`` that sees every aten call;
* :mod:`graphprof.run.failures`: why a dry run cannot go on (values needed, no FakeTensor kernel, meta);
* :mod:`graphprof.run.params`: the weights a module holds (packed quantized ones too).

Ops are seen by a ``TorchDispatchMode`` below autograd, installed only when some observer has
``wants_ops``; producers are tracked only when some observer has ``wants_producers``; the backward
attribution (a walk of the autograd graph at each layer's exit) runs only in train mode with some
``wants_ops`` observer. A run with neither (a timer) installs no dispatch mode and pays nothing per op.

The run itself: parameters, buffers and inputs are swapped for ``FakeTensor``s on a dry run
(``fake=True``: no arithmetic, no memory) through ``torch.func.functional_call``, so nothing of the
user's model is touched; ``dtype`` casts the floating-point ones for the run only. In train mode the
backward pass runs through ``torch.autograd.grad`` (nothing accumulates in ``.grad``).

Example: count the aten calls of each layer of resnet18 on a dry run::

    >>> import torch, torchvision
    >>> from graphprof.capture.methods import capture_graph
    >>> m = torchvision.models.resnet18().eval()
    >>> x = torch.randn(8, 3, 224, 224)
    >>> from graphprof.run.events import Observer
    >>> class Count(Observer):
    ...     wants_ops = True
    ...     def __init__(self): self.n = {}
    ...     def op(self, e): self.n[e.layer.name] = self.n.get(e.layer.name, 0) + 1
    >>> c = Count()
    >>> _ = run_model(capture_graph(m, (x,), {}), m, (x,), {}, [c])
    >>> c.n["conv1"]
    1
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from graphprof.base.choices import Method, Phase
from graphprof.capture.methods import CapturedGraph
from graphprof.errors import DataDependentError, ShapePropagationError
from graphprof.run.dispatch import EventBus, watch
from graphprof.run.events import Layer, Observer, Producer, RunContext, RunOutcome
from graphprof.run.failures import MetaDeviceError
from graphprof.run.fakes import Converter, all_meta, faking, nbytes, small_tensor_attributes
from graphprof.run.layers import graph_layers, run_eager, run_graph
from graphprof.run.values import IndexValues

__all__ = ["run_model"]


def run_model(
    captured: CapturedGraph | None,
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    observers: Sequence[Observer],
    *,
    train: bool = False,
    dtype: torch.dtype | None = None,
    fake: bool = True,
    modes: Sequence[contextlib.AbstractContextManager[Any]] = (),
    meta: bool = True,
) -> RunOutcome:
    """Run ``captured`` (or ``model`` itself for the eager capture, or with ``captured=None``) once and
    tell ``observers``.

    A dry run of a model whose state and inputs are all on the meta device dispatches to the meta kernels
    directly (``meta=False`` asks for FakeTensors all the same); where the meta device cannot go on (an
    ``.item()``, an op without a meta kernel) it raises :class:`MetaDeviceError`, and the caller may run
    again with ``meta=False``: FakeTensors answer what transformers' code asks of a traced tensor.

    ``fake=True`` (the dry run) computes nothing; ``fake=False`` runs for real. ``dtype`` casts the
    floating-point parameters, buffers and inputs of the run (the model itself is not changed).
    ``modes`` are context managers entered inside the fake mode, outside the op tap (a
    ``TorchFunctionMode`` that lowers calls for a target, say). Raises :class:`DataDependentError`
    when the dry run cannot go on without real values and :class:`ShapePropagationError` naming the
    node for any other failure.
    """
    gm = captured.graph_module if captured is not None else None
    root: nn.Module = gm if gm is not None else model
    named: dict[str, torch.Tensor] = dict(root.named_parameters(remove_duplicate=False))
    named.update(dict(root.named_buffers(remove_duplicate=False)))
    # a model and inputs all on the meta device already say nothing but shapes: the dry run dispatches
    # to the meta kernels straight away, as FlopCounterMode on a meta model does, without FakeTensors
    on_meta = fake and meta and all_meta([*named.values(), *tree_flatten((args, kwargs))[0]])
    if fake_run := fake and not on_meta:
        named.update(small_tensor_attributes(root))
    convert = Converter(named, fake_run, dtype, train)
    dynamo = captured is not None and captured.method is Method.DYNAMO
    layers: dict[str, Layer] = {} if gm is None else graph_layers(gm, model, dynamo)
    loop = EventBus(observers, train)
    loop.dry = fake

    with contextlib.ExitStack() as stack:
        if convert.fake_mode is not None:
            stack.enter_context(faking(convert.fake_mode))
        run = _RunTensors.convert(convert, named, args, kwargs, keep_real=not fake and dtype is None)
        if fake_run:
            loop.values = IndexValues.of_inputs((args, kwargs), (run.args, run.kwargs))
        run.mark(loop)
        loop.start(RunContext(model, gm, fake, train, (run.args, run.kwargs), run.state, layers, unobserved=loop.unobserved))
        _enter_run(stack, loop, train, modes)
        try:
            outputs = _forward(captured, gm, model, loop, layers, run, fake)
            out_leaves = [t for t in tree_flatten(outputs)[0] if isinstance(t, torch.Tensor)]
            if train:
                _backward(loop, out_leaves, [t for t in run.state.values() if t.requires_grad], run.leaves_in)
        except DataDependentError as exc:
            if on_meta:
                raise MetaDeviceError(str(exc)) from exc
            raise
        loop.finish(outputs)

    return RunOutcome(
        outputs=outputs,
        layers=list(layers.values()),
        input_bytes=sum(nbytes(t) for t in run.leaves_in),
        output_bytes=sum(nbytes(t) for t in out_leaves),
        real_ops=tuple(sorted(loop.values.real_ops.items())) if loop.values is not None else (),
        empty_ops=tuple(sorted(loop.values.empty_ops.items())) if loop.values is not None else (),
        on_meta=on_meta,
    )


@dataclass
class _RunTensors:
    """The run's own tensors: its inputs and state as the run sees them (fake on a dry run, cast to the
    run's dtype), and the converted state the forward swaps in (``swapped``; the same as ``state`` unless a
    real run in the model's own dtype keeps the model's tensors)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    swapped: dict[str, torch.Tensor]
    state: dict[str, torch.Tensor]
    leaves_in: list[torch.Tensor]

    @classmethod
    def convert(cls, convert: Converter, named: dict[str, torch.Tensor], args: Any, kwargs: Any, keep_real: bool) -> _RunTensors:
        swapped = {name: convert(t) for name, t in named.items()}
        call_args, call_kwargs = tree_map(convert, args), tree_map(convert, kwargs)
        state = dict(named) if keep_real else swapped
        leaves_in = [t for t in tree_flatten((call_args, call_kwargs))[0] if isinstance(t, torch.Tensor)]
        return cls(call_args, call_kwargs, swapped, state, leaves_in)

    def mark(self, loop: EventBus) -> None:
        """Where each input and state tensor came from, for the observers that follow producers."""
        for i, t in enumerate(self.leaves_in):
            loop.mark(t, Producer("input", i))
        for name, t in self.state.items():
            loop.mark(t, Producer("state", name=name))


def _enter_run(stack: contextlib.ExitStack, loop: EventBus, train: bool, modes: Sequence[contextlib.AbstractContextManager[Any]]) -> None:
    """Grad mode, the caller's modes, and the op tap when some observer wants ops (none: no dispatch mode,
    nothing paid per op); then the forward phase starts."""
    stack.enter_context(torch.enable_grad() if train else torch.no_grad())
    for mode in modes:
        stack.enter_context(mode)
    watch(stack, loop)
    loop.set_phase(Phase.FORWARD)


def _forward(
    captured: CapturedGraph | None,
    gm: torch.fx.GraphModule | None,
    model: nn.Module,
    loop: EventBus,
    layers: dict[str, Layer],
    run: _RunTensors,
    fake: bool,
) -> Any:
    if captured is not None and gm is not None:
        return run_graph(captured, gm, loop, layers, run.swapped, run.args, run.kwargs)
    swap = run.swapped if run.state is run.swapped else {}
    return run_eager(model, loop, layers, swap, run.args, run.kwargs, fake)


def _backward(loop: EventBus, outputs: list[torch.Tensor], params: list[torch.Tensor], inputs: list[Any]) -> None:
    """Backward of ``sum(outputs)`` with respect to every leaf that requires grad; nothing accumulates."""
    differentiable = [t for t in outputs if t.requires_grad and t.is_floating_point()]
    if not differentiable:
        raise ShapePropagationError("train mode: no output of the model requires grad, so there is no backward pass")
    leaves = list(params)
    leaves += [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves:
        raise ShapePropagationError("train mode: the model has no parameter that requires grad")
    loop.layer = None
    loop.paused = True  # the seed gradient of ones is the loss's business, not the model's
    grads = [torch.ones_like(t) for t in differentiable]
    loop.paused = False
    loop.set_phase(Phase.BACKWARD)
    torch.autograd.grad(differentiable, leaves, grad_outputs=grads, allow_unused=True)
