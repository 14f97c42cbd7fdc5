"""How events reach observers: the bus that fans them out, and the one ``TorchDispatchMode`` that sees
every aten call below autograd (:class:`OpTap`).

The tap is installed only when some observer has ``wants_ops``; producers are tracked only when some
observer has ``wants_producers``; the backward attribution (a walk of the autograd graph at each layer's
exit, :class:`BackwardTags`) runs only in train mode with some ``wants_ops`` observer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from graphprof.base.choices import Phase
from graphprof.run.events import Layer, Observer, OpEvent, Producer, RunContext
from graphprof.run.lowering import GROUPED_MM, grouped_mm_any_dtype
from graphprof.run.shapes import DRY_SHAPE_OPS, dry_outputs
from graphprof.run.values import IndexValues

__all__ = ["BackwardTags", "EventBus", "OpTap", "watch"]


#: The key under which a forward layer is written into an autograd node's ``metadata``.
_TAG = "graphprof_layer"


class BackwardTags:
    """Each backward aten call belongs to the forward layer that created its autograd node.

    When a forward layer is left, the autograd nodes reachable from its output and not yet tagged are
    tagged in their ``metadata`` (the run's own nodes, never the user's); during backward,
    ``torch._C._current_autograd_node()`` names the node running, and its tag names the layer.
    """

    def __init__(self) -> None:
        self.layers: dict[int, Layer] = {}

    def tag(self, layer: Layer, output: Any) -> None:
        tag = id(layer)
        self.layers[tag] = layer
        leaves = tree_flatten(output)[0]
        stack: list[torch.autograd.graph.Node | None] = [t.grad_fn for t in leaves if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while stack:
            fn = stack.pop()
            # torch declares Node.metadata a method; it is a property returning a dict
            if fn is None or _TAG in fn.metadata:  # type: ignore[operator]
                continue
            fn.metadata[_TAG] = tag  # type: ignore[index]
            stack.extend(next_fn for next_fn, _ in fn.next_functions)

    def current(self) -> Layer | None:
        node = torch._C._current_autograd_node()
        tag = None if node is None else node.metadata.get(_TAG)  # type: ignore[attr-defined]
        return self.layers.get(tag) if tag is not None else None


class EventBus:
    """Fans events out to the observers and keeps the current layer and the producers of tensors.

    In train mode with some op observer, it also attributes each backward op to its forward layer
    (:class:`BackwardTags`) before building the event, so no observer depends on another.
    """

    def __init__(self, observers: Sequence[Observer], train: bool = False) -> None:
        self.observers = list(observers)
        self.op_observers = [o for o in self.observers if o.wants_ops]
        self.saved_observers = [o for o in self.observers if o.wants_saved] if train else []
        self.track = any(o.wants_producers for o in self.observers)
        self.tags = BackwardTags() if train and self.op_observers else None
        self.producers: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.layer: Layer | None = None
        self.phase = Phase.FORWARD
        self.count = 0
        self.paused = False
        #: the real values of the index tensors a dry run on FakeTensors may need (``None``: no such run)
        self.values: IndexValues | None = None
        #: a dry run (meta tensors or FakeTensors): nothing is computed, so outputs may come from metadata
        self.dry = False
        #: tensor subclasses whose calls the tap hands back to the subclass (``NotImplemented``), so the events
        #: are the calls it makes on its inner tensors (DTensor: one rank's calls on its shards, its collectives)
        self.defer: tuple[type, ...] = ()

    def start(self, ctx: RunContext) -> None:
        for o in self.observers:
            o.started(ctx)

    @contextlib.contextmanager
    def unobserved(self) -> Iterator[None]:
        """Ops run inside are not events (:attr:`RunContext.unobserved`)."""
        paused, self.paused = self.paused, True
        try:
            yield
        finally:
            self.paused = paused

    def finish(self, outputs: Any) -> None:
        for o in self.observers:
            o.finished(outputs)

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        for o in self.observers:
            o.phase_started(phase)

    def enter(self, layer: Layer, inputs: Any = None) -> None:
        for o in self.observers:
            o.layer_entered(layer)
            if inputs is not None:
                o.layer_inputs(layer, inputs)

    def leave(self, layer: Layer, output: Any) -> None:
        if self.tags is not None and self.phase is Phase.FORWARD:
            self.tags.tag(layer, output)
        for o in self.observers:
            o.layer_left(layer, output)

    def saved(self, tensor: torch.Tensor) -> torch.Tensor:
        """``saved_tensors_hooks``' pack: tell the observers what autograd saves, and keep the tensor itself."""
        for o in self.saved_observers:
            o.saved(self.layer, tensor)
        return tensor

    def mark(self, value: Any, producer: Producer) -> None:
        if not self.track:
            return
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor) and t not in self.producers:
                self.producers[t] = producer

    def emit(self, func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        producers: tuple[Producer | None, ...] = ()
        if self.track:
            leaves = tree_flatten((args, kwargs))[0]
            producers = tuple(self.producers.get(t) for t in leaves if isinstance(t, torch.Tensor))
        if self.phase is Phase.FORWARD:
            layer = self.layer
        else:
            layer = self.tags.current() if self.tags is not None else None
        event = OpEvent(self.count, func, args, kwargs, out, self.phase, layer, producers)
        if self.track:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.producers[t] = Producer("op", self.count)
        self.count += 1
        for o in self.op_observers:
            o.op(event)


def _data_dependent_exceptions() -> tuple[type[BaseException], ...]:
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    return (DataDependentOutputException, DynamicOutputShapeException)


#: What a FakeTensor raises for an op whose output's shape (or value) depends on its inputs' values.
_DATA_DEPENDENT = _data_dependent_exceptions()


class OpTap(TorchDispatchMode):
    """Sees every aten call below autograd and hands it to the loop.

    Higher-order operators (``flex_attention`` and its backward) reach it too, as one call each: the
    operator runs with the tap popped, so the event is the operator itself, counted by its own formula
    (or reported as unsupported by name), never its decomposition.
    """

    supports_higher_order_operators = True

    def __init__(self, loop: EventBus) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # TorchDispatchMode.__init__ has no annotations
        self.loop = loop

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if self.loop.defer and any(issubclass(t, self.loop.defer) for t in types):
            return NotImplemented
        kwargs = kwargs or {}
        values = self.loop.values
        try:
            out = self._call(func, args, kwargs)
        except _DATA_DEPENDENT as exc:
            if values is None:
                raise
            out = values.run_for_real(func, args, kwargs, exc)  # index arithmetic the shapes depend on
        else:
            if values is not None:
                values.follow(func, args, kwargs, out)
        if not self.loop.paused:
            self.loop.emit(func, args, kwargs, out)
        return out

    def _call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # a float32 MoE's grouped products on FakeTensors; on a dry run, a normalisation's outputs from its
        # input's metadata (graphprof.run.shapes: torch's meta path is its Python decomposition); every
        # other op as it is
        if func in GROUPED_MM:
            return grouped_mm_any_dtype(func, args, kwargs)
        if self.loop.dry and func in DRY_SHAPE_OPS:
            out = dry_outputs(func, args, kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)


def watch(stack: contextlib.ExitStack, loop: EventBus) -> None:
    """Enter what tells ``loop``'s observers about the run, for those that want it: what autograd saves
    (``saved_tensors_hooks``, train mode) and every aten call (the op tap; none wanted: no dispatch mode,
    nothing paid per op). The dry run and a training step both watch through this."""
    if loop.saved_observers:
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(loop.saved, _unpacked))
    if loop.op_observers:
        # torch.compile cannot trace under a dispatch mode; run what the model compiles (eager
        # flex_attention compiles its operator call) as plain eager code, so the tap sees it
        stack.enter_context(torch.compiler.set_stance("force_eager"))
        stack.enter_context(OpTap(loop))


def _unpacked(tensor: torch.Tensor) -> torch.Tensor:
    return tensor
