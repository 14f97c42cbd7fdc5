"""Shape propagation: run the captured graph on FakeTensors and record every aten call per layer.

This is the dry run. It is one run of :func:`graphprof.run.loop.run_model` with two observers: the
:class:`OpRecorder` below (every aten call, reduced to shapes and dtypes, per layer, backward ops
under the forward layer the loop attributes them to) and the live-memory tracker
(:mod:`graphprof.run.observers`). Parameters, buffers and inputs are FakeTensors, so no arithmetic is done
and no activation memory is allocated: a batch of 64 or a model on the ``meta`` device costs about as
much to propagate as a batch of 1. Where a model needs real values (data-dependent shapes, such as
detection post-processing), :func:`propagate` is called with ``fake=False`` and runs the same graph on
real tensors; the caller says so in the output.

The pass writes nothing to the graph's ``node.meta``; it returns a :class:`Trace`.

Example (the numbers are shapes, not values, and nothing is computed)::

    >>> import torch, torchvision
    >>> from graphprof.capture.methods import capture_graph
    >>> m = torchvision.models.resnet18().eval()
    >>> x = torch.randn(64, 3, 224, 224)
    >>> cap = capture_graph(m, (x,), {})
    >>> trace = propagate(cap, m, (x,), {})
    >>> trace.keys[0].name, trace.keys[0].output_shapes
    ('conv1', ((64, 64, 112, 112),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from graphprof.base.choices import Phase
from graphprof.base.ladder import Fallback, Rung
from graphprof.capture.methods import CapturedGraph
from graphprof.errors import one_line
from graphprof.formulas import TensorMeta
from graphprof.formulas.registry import summarise_call, to_meta
from graphprof.run.events import Layer, Observer, OpEvent, RunContext, RunOutcome
from graphprof.run.failures import MetaDeviceError
from graphprof.run.loop import run_model
from graphprof.run.observers import LiveMemory, SavedActivations
from graphprof.run.observers.allocations import AllocationOrder, Step
from graphprof.run.observers.empty import EmptyInputs

__all__ = ["OpCall", "TraceKey", "Trace", "OpRecorder", "propagate", "shapes_of", "op_call"]


@dataclass
class OpCall:
    """One aten call with its tensors reduced to shapes and dtypes."""

    func: torch._ops.OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any
    phase: Phase


@dataclass
class TraceKey:
    """Something aten calls are attributed to: a graph node, or a module in the eager capture."""

    name: str
    node: str
    module: str | None
    type: str
    params: list[torch.Tensor] = field(default_factory=list)
    output_shapes: tuple[tuple[int, ...], ...] = ()
    calls: list[OpCall] = field(default_factory=list)
    #: bytes this key saved for backward (train mode; :class:`~graphprof.run.observers.SavedActivations`)
    saved_bytes: int = 0


@dataclass
class Trace:
    """What :func:`propagate` saw: the keys in execution order and memory facts."""

    keys: list[TraceKey]
    fake: bool
    output_bytes: int
    input_bytes: int
    peak_activation_bytes: int
    unattributed: TraceKey
    #: the layer running when the activation peak was reached
    peak_activation_layer: str | None = None
    #: ops run on the input's real values because the shapes depend on them, with counts (:mod:`graphprof.run.values`)
    real_ops: tuple[tuple[str, int], ...] = ()
    #: of those, the ops whose real output was empty, with counts
    empty_ops: tuple[tuple[str, int], ...] = ()
    #: layers where an op read a parameter or buffer beside an empty tensor (:mod:`graphprof.run.observers.empty`)
    empty_layers: tuple[str, ...] = ()
    #: the dry run's tensors (the ``tensors`` rung of :mod:`graphprof.base.ladder`): what it ran on, what it passed over
    tensors: Fallback | None = None
    #: an eval forward's allocation order, op by op (:class:`~graphprof.run.observers.allocations.Step`; none in training)
    allocations: tuple[Step, ...] = ()


def op_call(event: OpEvent) -> OpCall:
    """An op event reduced to shapes, dtypes and strides: one memo for the inputs (a tensor passed twice
    is read once), another for the outputs."""
    memo: dict[int, TensorMeta] = {}
    args, kwargs = summarise_call(event.func, event.args, event.kwargs)  # values a formula reads (flex block masks)
    return OpCall(event.func, to_meta(args, memo), to_meta(kwargs, memo), to_meta(event.out, {}), event.phase)


def shapes_of(value: Any) -> tuple[tuple[int, ...], ...]:
    """The shapes of the tensors (or :class:`TensorMeta`) in a nested value, in pytree order."""
    leaves, _ = tree_flatten(value)
    return tuple(tuple(int(s) for s in t.shape) for t in leaves if isinstance(t, (torch.Tensor, TensorMeta)))


class OpRecorder(Observer):
    """Records every aten call, reduced to shapes and dtypes, under the layer it belongs to.

    Calls outside any layer (graph glue, and backward calls no forward layer created) go to
    :attr:`unattributed`. :meth:`trace_keys` gives the layers in the run's order with their calls and
    output shapes.
    """

    wants_ops = True

    def __init__(self) -> None:
        self.by_layer: dict[int, TraceKey] = {}
        self.unattributed = TraceKey(name="(unattributed)", node="(unattributed)", module=None, type="-")
        self.layers: dict[str, Layer] = {}
        #: eager capture: each parameter's names (one tensor, several names when tied), to see what ops read
        self.param_names: dict[int, list[str]] = {}
        #: eager capture: per layer (by id), the parameters its ops read, by tensor id
        self.read: dict[int, dict[int, torch.Tensor]] = {}

    def started(self, ctx: RunContext) -> None:
        self.layers = ctx.layers
        if ctx.graph_module is None:  # the eager capture: layers are modules, called or not
            params = {name for name, _ in ctx.model.named_parameters(remove_duplicate=False)}
            for name, t in ctx.state.items():
                if name in params:
                    self.param_names.setdefault(id(t), []).append(name)

    def _key(self, layer: Layer) -> TraceKey:
        key = self.by_layer.get(id(layer))
        if key is None:
            key = self.by_layer[id(layer)] = TraceKey(
                name=layer.name, node=layer.node, module=layer.module, type=layer.type, params=layer.params
            )
        return key

    def layer_left(self, layer: Layer, output: Any) -> None:
        self._key(layer).output_shapes = shapes_of(output)

    def op(self, event: OpEvent) -> None:
        key = self._key(event.layer) if event.layer is not None else self.unattributed
        key.calls.append(op_call(event))
        if self.param_names and event.layer is not None:
            for t in tree_flatten((event.args, event.kwargs))[0]:
                if isinstance(t, torch.Tensor) and id(t) in self.param_names:
                    self.read.setdefault(id(event.layer), {})[id(t)] = t

    def trace_keys(self) -> list[TraceKey]:
        """The layers in the run's order (the graph's order, or first entry in the eager capture)."""
        keys = [self._key(layer) for layer in self.layers.values()]
        self._credit_uncalled_parameters()
        return keys

    def _credit_uncalled_parameters(self) -> None:
        """Eager capture: a parameter whose module never ran but whose weight an op read (``nn.MultiheadAttention``
        hands ``out_proj.weight`` to ``F.multi_head_attention_forward``; ``out_proj`` is never called) is
        credited to the layer whose op read it: it is used, and its MACs are counted there."""
        called = {layer.module or "" for layer in self.layers.values()}
        for layer in self.layers.values():
            key = self._key(layer)
            own = {id(p) for p in key.params}
            for tid, t in self.read.get(id(layer), {}).items():
                owners = {name.rpartition(".")[0] for name in self.param_names[tid]}
                if tid not in own and not owners & called:
                    key.params = [*key.params, t]  # a new list: the layer's own stays as it was
                    own.add(tid)


def _run(
    captured: CapturedGraph,
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    train: bool,
    dtype: torch.dtype | None,
    fake: bool,
    observers: Sequence[Observer],
    modes: Sequence[Any],
    *,
    meta: bool,
) -> tuple[OpRecorder, LiveMemory, SavedActivations, EmptyInputs, AllocationOrder, RunOutcome]:
    recorder, memory, saved, empty, order = OpRecorder(), LiveMemory(), SavedActivations(), EmptyInputs(), AllocationOrder()
    outcome = run_model(
        captured, model, args, kwargs,
        [recorder, memory, *([empty] if fake else []), *([saved] if train else [order]), *observers],
        train=train, dtype=dtype, fake=fake, modes=modes, meta=meta,
    )  # fmt: skip
    return recorder, memory, saved, empty, order, outcome


def propagate(
    captured: CapturedGraph,
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    train: bool = False,
    dtype: torch.dtype | None = None,
    fake: bool = True,
    observers: Sequence[Observer] = (),
    modes: Sequence[Any] = (),
) -> Trace:
    """Run the captured graph once on ``args``/``kwargs`` and record every aten call per layer.

    ``fake=True`` (the dry run) computes nothing; ``fake=False`` runs for real. ``dtype`` casts the
    floating-point parameters, buffers and inputs of the run (the model itself is not changed).
    ``observers`` ride along on the same run (an edge builder, say); ``modes`` as for
    :func:`~graphprof.run.loop.run_model`. Raises :class:`~graphprof.errors.DataDependentError` when the dry run cannot go
    on without real values and :class:`~graphprof.errors.ShapePropagationError` naming the node for any
    other failure.
    """
    # straight on the meta device where the model allows it (the dispatcher's speed); a run that the meta
    # device cannot finish runs again on FakeTensors, with fresh recorders. A caller's observers have seen
    # the first run's events, so with them the run is on FakeTensors from the start.
    passed: tuple[tuple[str, str], ...] = ()
    try:
        recorder, memory, saved, empty, order, outcome = _run(
            captured, model, args, kwargs, train, dtype, fake, observers, modes, meta=not observers
        )
    except MetaDeviceError as exc:
        passed = ((_META_KERNELS, one_line(exc)),)
        recorder, memory, saved, empty, order, outcome = _run(
            captured, model, args, kwargs, train, dtype, fake, observers, modes, meta=False
        )
    keys = recorder.trace_keys()
    for key in keys:
        key.saved_bytes = saved.by_layer.get(key.name, 0)
    return Trace(
        keys=keys,
        fake=fake,
        output_bytes=outcome.output_bytes,
        input_bytes=outcome.input_bytes,
        peak_activation_bytes=memory.peak,
        unattributed=recorder.unattributed,
        peak_activation_layer=memory.peak_layer,
        real_ops=outcome.real_ops,
        empty_ops=outcome.empty_ops,
        empty_layers=tuple(empty.layers),
        tensors=Fallback(Rung.TENSORS, _META_KERNELS if outcome.on_meta else "FakeTensors" if fake else "real tensors", passed),
        allocations=tuple(order.steps),
    )


#: The ``tensors`` rung's first option: a model and inputs all on the meta device run on its kernels directly.
_META_KERNELS = "meta kernels"
