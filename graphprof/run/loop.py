"""The run loop: run a captured graph (or the eager model) once and tell observers what happened.

Every pass that needs to see the model run (the op recorder that costs, the live-memory tracker, a
timer, an edge builder) is an :class:`Observer`. The loop knows nothing about what observers do with
the events, and an observer knows nothing about the others: every observer sees the same events in the
same order, and an :class:`OpEvent` is frozen, so the order of the observers does not matter. The
events:

* :meth:`Observer.started`: the run's tensors are ready (:class:`RunContext`: inputs, parameters and
  buffers as this run sees them, the layers known up front);
* :meth:`Observer.layer_entered` / :meth:`Observer.layer_left`: a layer (a graph node, or a module in
  the eager capture) starts and ends, with its output;
* :meth:`Observer.op`: an aten call ran (:class:`OpEvent`: the call, its outputs, the layer it
  belongs to, and for each input tensor the op or graph input that produced it). In backward, the
  layer is the forward layer whose autograd node runs: the loop attributes it before any observer
  sees the event;
* :meth:`Observer.phase_started`: ``"forward"``, then ``"backward"`` in train mode;
* :meth:`Observer.finished`: the model's outputs.

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
import inspect
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from graphprof.base.choices import Method, Phase
from graphprof.base.names import module_path
from graphprof.capture.methods import CapturedGraph
from graphprof.errors import CaptureError, DataDependentError, ShapePropagationError
from graphprof.run.hooks import module_call_hooks
from graphprof.run.lowering import GROUPED_MM, grouped_mm_any_dtype
from graphprof.run.shapes import DRY_SHAPE_OPS, dry_outputs, new_fake
from graphprof.run.values import IndexValues

__all__ = [
    "Layer",
    "OpEvent",
    "Producer",
    "RunContext",
    "RunOutcome",
    "Observer",
    "run_model",
    "MetaDeviceError",
    "needs_values",
    "parameter_tensors",
    "count_parameters",
    "packed_tensors",
]


@dataclass(eq=False)
class Layer:
    """What ops are attributed to: a graph node, or a module in the eager capture.

    ``name`` is readable and unique in the run, ``node`` the graph node's own name, ``module`` the
    dotted path of the innermost ``nn.Module`` it belongs to (``None`` at top level), ``params`` the
    parameters it uses directly.
    """

    name: str
    node: str
    module: str | None
    type: str
    params: list[torch.Tensor] = field(default_factory=list)


@dataclass(frozen=True)
class Producer:
    """Where a tensor came from: ``kind`` is ``"input"`` (``index``: position among the flat inputs),
    ``"state"`` (``name``: a parameter or buffer) or ``"op"`` (``index``: the :class:`OpEvent` index)."""

    kind: str
    index: int = -1
    name: str = ""


@dataclass(frozen=True, eq=False)
class OpEvent:
    """One aten call. ``args``/``kwargs``/``out`` hold the run's tensors (fake on a dry run).

    ``producers`` has one entry per tensor among ``(args, kwargs)`` in pytree order (``None`` for a
    tensor made outside the run, such as a constant); it is empty unless an observer asked for it.
    ``layer`` is the layer running; in backward it is the forward layer whose autograd node runs
    (attributed by the loop before any observer sees the event), else ``None``. The event is frozen:
    every observer sees the same one.
    """

    index: int
    func: torch._ops.OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any
    phase: Phase
    layer: Layer | None
    producers: tuple[Producer | None, ...] = ()


@dataclass
class RunContext:
    """What observers may read when the run starts and while it runs."""

    model: nn.Module
    #: the captured graph that runs, or ``None`` when the model itself runs (the eager capture)
    graph_module: torch.fx.GraphModule | None
    fake: bool
    train: bool
    inputs: tuple[tuple[Any, ...], dict[str, Any]]
    state: dict[str, torch.Tensor]
    layers: dict[str, Layer]
    #: a context in which the ops an observer itself causes (reading what autograd saved, say) are not
    #: events: every observer sees the run's own ops only
    unobserved: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


@dataclass
class RunOutcome:
    """The run's outputs (fake on a dry run) and its layers in execution order."""

    outputs: Any
    layers: list[Layer]
    input_bytes: int
    output_bytes: int
    #: ops whose outputs' shapes were computed from the input's real values (:mod:`graphprof.run.values`), with counts
    real_ops: tuple[tuple[str, int], ...] = ()


class Observer:
    """Base class: every event is a no-op. Override what you need.

    Set ``wants_ops`` to receive :meth:`op` events and ``wants_producers`` to have
    :attr:`OpEvent.producers` filled.
    """

    wants_ops: bool = False
    wants_producers: bool = False

    def started(self, ctx: RunContext) -> None:
        """The run's tensors are ready; nothing has run yet."""

    def phase_started(self, phase: Phase) -> None:
        """``"forward"`` at the start; ``"backward"`` when the backward pass starts (train mode)."""

    def layer_entered(self, layer: Layer) -> None:
        """``layer`` starts (in the eager capture, layers nest as modules do)."""

    def layer_left(self, layer: Layer, output: Any) -> None:
        """``layer`` returned ``output``."""

    def op(self, event: OpEvent) -> None:
        """An aten call ran (only with ``wants_ops``)."""

    def finished(self, outputs: Any) -> None:
        """The forward (and, in train mode, the backward) pass is over."""


#: Real buffers up to this many elements keep their values on a dry run (see :func:`run_model`).
_CONSTANT_ELEMENTS = 64


def _small_constant(t: torch.Tensor) -> bool:
    return (
        not isinstance(t, nn.Parameter) and not t.is_meta and t.numel() <= _CONSTANT_ELEMENTS and not t.requires_grad
        and type(t) is torch.Tensor
    )  # fmt: skip


def _small_tensor_attributes(root: nn.Module) -> dict[str, torch.Tensor]:
    """Small tensors kept as plain module attributes (not buffers), such as YOLO's ``Detect.stride``: a
    dry run swaps them for constants too, so a forward that reads their values still runs."""
    found: dict[str, torch.Tensor] = {}
    for path, module in root.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_") and _small_constant(value):
                found[f"{path}.{attr}" if path else attr] = value
    return found


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


#: The key under which a forward layer is written into an autograd node's ``metadata``.
_TAG = "graphprof_layer"


class _BackwardTags:
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
        stack: list[torch.autograd.graph.Node | None] = [
            t.grad_fn for t in leaves if isinstance(t, torch.Tensor) and t.grad_fn is not None
        ]
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


class _Loop:
    """Fans events out to the observers and keeps the current layer and the producers of tensors.

    In train mode with some op observer, it also attributes each backward op to its forward layer
    (:class:`_BackwardTags`) before building the event, so no observer depends on another.
    """

    def __init__(self, observers: Sequence[Observer], train: bool = False) -> None:
        self.observers = list(observers)
        self.op_observers = [o for o in self.observers if o.wants_ops]
        self.track = any(o.wants_producers for o in self.observers)
        self.tags = _BackwardTags() if train and self.op_observers else None
        self.producers: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.layer: Layer | None = None
        self.phase = Phase.FORWARD
        self.count = 0
        self.paused = False
        #: the real values of the index tensors a dry run on FakeTensors may need (``None``: no such run)
        self.values: IndexValues | None = None
        #: a dry run (meta tensors or FakeTensors): nothing is computed, so outputs may come from metadata
        self.dry = False

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

    def enter(self, layer: Layer) -> None:
        for o in self.observers:
            o.layer_entered(layer)

    def leave(self, layer: Layer, output: Any) -> None:
        if self.tags is not None and self.phase is Phase.FORWARD:
            self.tags.tag(layer, output)
        for o in self.observers:
            o.layer_left(layer, output)

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


class _OpTap(TorchDispatchMode):
    """Sees every aten call below autograd and hands it to the loop.

    Higher-order operators (``flex_attention`` and its backward) reach it too, as one call each: the
    operator runs with the tap popped, so the event is the operator itself, counted by its own formula
    (or reported as unsupported by name), never its decomposition.
    """

    supports_higher_order_operators = True

    def __init__(self, loop: _Loop) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # TorchDispatchMode.__init__ has no annotations
        self.loop = loop

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
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


# ---- layers of a captured FX graph -------------------------------------------------------------------


def _node_type(node: torch.fx.Node, root: nn.Module) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(str(node.target))).__name__
    if node.op == "call_method":
        return str(node.target)
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    return name.split(".")[-1]


def _fetch_attr(gm: nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


#: Nodes of a Dynamo export that read or check a size and compute nothing (its runtime asserts on the sizes of
#: a data-dependent op's output, ``sym_size`` reads): no layer of their own.
_SHAPE_BOOKKEEPING = frozenset({
    torch.ops.aten._assert_scalar.default, torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_stride.int, torch.ops.aten.sym_storage_offset.default,
})  # fmt: skip


def graph_layers(gm: torch.fx.GraphModule, model: nn.Module, dynamo: bool) -> dict[str, Layer]:
    """One layer per computing node, keyed by node name. Names: the module path for a leaf module's
    call, else ``<module path>.<function>`` (``layer1.0.add``), unique within the graph."""
    params = {id(p) for p in gm.parameters()}
    modules = dict(model.named_modules(remove_duplicate=False))
    layers: dict[str, Layer] = {}
    taken: set[str] = set()
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr") or node.target in _SHAPE_BOOKKEEPING:
            continue
        module = str(node.target) if node.op == "call_module" else module_path(node)
        used: list[torch.Tensor] = []
        if node.op == "call_module":
            used = parameter_tensors(gm.get_submodule(str(node.target)))
        for arg in node.all_input_nodes:
            if arg.op == "get_attr":
                attr = _fetch_attr(gm, str(arg.target))
                if id(attr) in params:
                    used.append(attr)
        node_type = _node_type(node, gm)
        if node.op == "call_module":
            name = str(node.target)
        elif dynamo:
            owner = modules.get(module) if module else None
            is_leaf = owner is not None and next(owner.children(), None) is None
            name = cast(str, module) if is_leaf and module not in taken else ".".join(filter(None, [module, node_type]))
            if is_leaf and module not in taken:
                node_type = type(owner).__name__
        else:
            name = f"{module}.{node.name}" if module else node.name
        base, n = name, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        layers[node.name] = Layer(name=name, node=node.name, module=module, type=node_type, params=used)
    return layers


def _mutable(value: Any) -> Any:
    if isinstance(value, torch.fx.immutable_collections.immutable_list):
        return [_mutable(v) for v in value]
    if isinstance(value, torch.fx.immutable_collections.immutable_dict):
        return {k: _mutable(v) for k, v in value.items()}
    if type(value) is tuple:
        return tuple(_mutable(v) for v in value)
    if type(value) is dict:
        return {k: _mutable(v) for k, v in value.items()}
    return value


class _GraphRunner(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, loop: _Loop, layers: dict[str, Layer]):
        super().__init__(gm)
        self.loop = loop
        self.layers = layers

    def fetch_args_kwargs_from_env(self, n: torch.fx.Node) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Graph constants are immutable_list / immutable_dict; the generated forward would pass fresh
        # lists, and some wrapped functions mutate their arguments (video Swin's window sizes).
        args, kwargs = super().fetch_args_kwargs_from_env(n)
        return _mutable(args), _mutable(kwargs)

    def run_node(self, n: torch.fx.Node) -> Any:
        layer = self.layers.get(n.name)
        if layer is not None:
            self.loop.layer = layer
            self.loop.enter(layer)
        try:
            out = super().run_node(n)
        except DataDependentError:
            raise
        except Exception as exc:
            reason = needs_values(exc)
            if reason:
                raise DataDependentError(f"node {n.name!r}: {reason}") from exc
            raise ShapePropagationError(
                f"shape propagation failed at node {n.name!r} ({n.format_node()}): {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self.loop.layer = None
        if layer is not None:
            self.loop.leave(layer, out)
        return out


class _Executor(nn.Module):
    """Wraps a graph so that ``torch.func.functional_call`` can swap its parameters for fakes."""

    def __init__(self, gm: torch.fx.GraphModule, loop: _Loop, layers: dict[str, Layer]) -> None:
        super().__init__()
        self.gm = gm
        self._loop = loop
        self._layers = layers

    def forward(self, *flat: Any) -> Any:
        return _GraphRunner(self.gm, self._loop, self._layers).run(*flat, enable_io_processing=False)


#: How torch says an op cannot run on meta tensors (a model on the meta device runs without FakeTensors):
#: ``.item()``, an op with no meta kernel, a data-dependent output.
_META_FAILURE = re.compile(r"meta tensor|'Meta' backend|with Meta tensors|on the meta device|to Meta", re.IGNORECASE)


def needs_values(exc: BaseException) -> str | None:
    """Why the dry run cannot go on without real tensors, or ``None`` when ``exc`` is another failure.

    Either an op's output shape depends on values (``nonzero``, ``.item()`` in a branch), or an op has
    no FakeTensor kernel (quantized kernels, some custom ops).
    """
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UnsupportedOperatorException):
            return f"{seen.func} has no FakeTensor kernel"
        if isinstance(seen, (DataDependentOutputException, DynamicOutputShapeException)):
            return f"{seen.func} has a data-dependent output"
        if type(seen).__name__ == "GuardOnDataDependentSymNode" or "data-dependent" in str(seen):
            return "a data-dependent shape"
        if isinstance(seen, NotImplementedError) and "fake impl" in str(seen):  # a custom or quantized op
            return f"{str(seen).split(':', 1)[0]} has no FakeTensor kernel"
        if isinstance(seen, RuntimeError) and "no fake impl registered" in str(seen):  # torch.library.custom_op
            return (
                f"{str(seen).split('registered for ', 1)[-1].split('.', 1)[0]} has no FakeTensor kernel (register_fake)"
            )
        if isinstance(seen, (RuntimeError, NotImplementedError)) and _META_FAILURE.search(str(seen)):
            return f"the meta device cannot run this ({str(seen).splitlines()[0][:200]})"
        seen = seen.__cause__ or seen.__context__
    return None


# ---- layers of the eager capture: modules, through global hooks ----------------------------------------


@contextlib.contextmanager
def _module_layers(model: nn.Module, loop: _Loop, layers: dict[str, Layer]) -> Iterator[None]:
    """Modules as layers, through global forward hooks (removed on exit; nothing is attached to the
    user's modules). A module reached under several paths (one activation instance shared by every
    block) is named by the path under the module that called it, so each call site keeps its own row."""
    paths: dict[int, list[str]] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        paths.setdefault(id(m), []).append(name)
    stack: list[tuple[Layer | None, Layer | None]] = []  # (layer before the module, layer it entered)

    def path_of(module: nn.Module) -> str | None:
        candidates = paths.get(id(module))
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        parent = loop.layer.module if loop.layer is not None else None
        for c in candidates:
            if (c.rpartition(".")[0] or None) == parent:
                return c
        return candidates[0]

    def pre_hook(module: nn.Module, args: Any) -> None:
        path = path_of(module)
        if path is None:
            stack.append((loop.layer, None))
            return
        layer = layers.get(path)
        if layer is None:
            layer = layers[path] = Layer(
                name=path or "(model)",
                node=path or "(model)",
                module=path or None,
                type=type(module).__name__,
                params=parameter_tensors(module, recurse=False),
            )
        stack.append((loop.layer, layer))
        loop.layer = layer
        loop.enter(layer)

    def post_hook(module: nn.Module, args: Any, output: Any) -> None:
        if not stack:
            return
        before, entered = stack.pop()
        if entered is not None:
            loop.leave(entered, output)
        loop.layer = before

    with module_call_hooks(pre_hook, post_hook):
        yield


# ---- the run ----------------------------------------------------------------------------------------------


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
    on_meta = fake and meta and _all_meta([*named.values(), *tree_flatten((args, kwargs))[0]])
    if fake_run := fake and not on_meta:
        named.update(_small_tensor_attributes(root))
    convert = _Converter(named, fake_run, dtype, train)
    layers: dict[str, Layer] = (
        {} if gm is None else graph_layers(gm, model, captured is not None and captured.method is Method.DYNAMO)
    )
    loop = _Loop(observers, train)
    loop.dry = fake

    with contextlib.ExitStack() as stack:
        if convert.fake_mode is not None:
            stack.enter_context(convert.fake_mode)
        state = {name: convert(t) for name, t in named.items()}
        call_args, call_kwargs = tree_map(convert, args), tree_map(convert, kwargs)
        if fake_run:
            loop.values = IndexValues.of_inputs((args, kwargs), (call_args, call_kwargs))
        run_state = state if (fake or dtype is not None) else dict(named)
        leaves_in = [t for t in tree_flatten((call_args, call_kwargs))[0] if isinstance(t, torch.Tensor)]
        for i, t in enumerate(leaves_in):
            loop.mark(t, Producer("input", i))
        for name, t in run_state.items():
            loop.mark(t, Producer("state", name=name))

        loop.start(RunContext(model, gm, fake, train, (call_args, call_kwargs), run_state, layers, loop.unobserved))
        stack.enter_context(torch.enable_grad() if train else torch.no_grad())
        for mode in modes:
            stack.enter_context(mode)
        if loop.op_observers:  # no observer wants ops: no dispatch mode, nothing paid per op
            # torch.compile cannot trace under a dispatch mode; run what the model compiles (eager
            # flex_attention compiles its operator call) as plain eager code, so the tap sees it
            stack.enter_context(torch.compiler.set_stance("force_eager"))
            stack.enter_context(_OpTap(loop))
        loop.set_phase(Phase.FORWARD)
        try:
            if captured is not None and gm is not None:
                outputs = _run_graph(captured, gm, loop, layers, state, call_args, call_kwargs)
            else:
                swap = state if run_state is state else {}
                outputs = _run_eager(model, loop, layers, swap, call_args, call_kwargs, fake)
            out_leaves = [t for t in tree_flatten(outputs)[0] if isinstance(t, torch.Tensor)]
            if train:
                _backward(loop, out_leaves, [t for t in run_state.values() if t.requires_grad], leaves_in)
        except DataDependentError as exc:
            if on_meta:
                raise MetaDeviceError(str(exc)) from exc
            raise
        loop.finish(outputs)

    return RunOutcome(
        outputs=outputs,
        layers=list(layers.values()),
        input_bytes=sum(_nbytes(t) for t in leaves_in),
        output_bytes=sum(_nbytes(t) for t in out_leaves),
        real_ops=tuple(sorted(loop.values.real_ops.items())) if loop.values is not None else (),
    )


class MetaDeviceError(DataDependentError):
    """A dry run straight on the meta device could not go on; FakeTensors may (``run_model(meta=False)``)."""


#: Leaves of a call's inputs that hold no tensor a pytree cannot see (a cache object may: it is not plain).
_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device)


def _all_meta(values: list[Any]) -> bool:
    """Every value is a tensor on the meta device or a plain constant, and one at least is a tensor: an
    object the pytree does not open (a transformers cache, say) keeps the FakeTensor path."""
    tensors = [t for t in values if isinstance(t, torch.Tensor)]
    plain = all(isinstance(v, (torch.Tensor, *_PLAIN)) for v in values)
    return plain and bool(tensors) and all(t.is_meta for t in tensors)


class _Converter:
    """The run's copy of each tensor: a FakeTensor on a dry run, cast to ``dtype`` if given; each
    tensor converted once (a parameter shared by two modules stays one tensor). Call it inside the
    fake mode."""

    def __init__(self, named: dict[str, torch.Tensor], fake: bool, dtype: torch.dtype | None, train: bool) -> None:
        self.fake_mode = None
        if fake:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.home = next((t.device for t in named.values() if not t.is_meta), None)
        self.dtype = dtype
        self.train = train
        self.memo: dict[int, Any] = {}

    def __call__(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in self.memo:
            self.memo[id(t)] = self._convert(t)
        return self.memo[id(t)]

    def _convert(self, t: torch.Tensor) -> torch.Tensor:
        fake_mode = self.fake_mode
        if fake_mode is not None and t.layout != torch.strided:
            # FakeTensors of sparse layouts cannot be made from real ones (no storage to describe)
            raise DataDependentError(
                f"a {str(t.layout).removeprefix('torch.')} tensor of shape {tuple(t.shape)} cannot be a FakeTensor"
            )
        if fake_mode is not None and t.is_meta and self.home is not None:
            # a meta input to a model with real weights stands for a tensor on the model's device
            out = torch.empty(t.shape, dtype=t.dtype, device=self.home)
        elif fake_mode is not None:
            out = self._fake(fake_mode, t)
        else:
            out = t
        if self.dtype is not None and out.is_floating_point() and out.dtype != self.dtype:
            with torch.no_grad():
                out = out.to(self.dtype)
            if isinstance(t, nn.Parameter):
                out.requires_grad_(t.requires_grad and self.train)
        return out

    @staticmethod
    def _fake(fake_mode: Any, t: torch.Tensor) -> torch.Tensor:
        """``t`` as a FakeTensor. Small real tensors (YOLO's strides) keep their values as constants, so a
        forward that reads them (``.item()``, ``torch.full(..., stride)``) still runs on a dry run; each is
        a copy, so the run never writes to the user's tensor. Any failure of the conversion asks
        for a real run, naming the tensor."""
        try:
            if _small_constant(t):
                from torch._subclasses.fake_tensor import unset_fake_temporarily

                # a copy, made outside the fake mode: an in-place op of the run on the constant (BatchNorm's
                # num_batches_tracked += 1) must not reach the user's tensor, and a view cannot be a constant
                with unset_fake_temporarily():
                    own = t.clone()
                if _plain_dense(own):
                    return _fake_from_metadata(fake_mode, own, constant=own)
                return cast(
                    torch.Tensor, fake_mode.fake_tensor_converter.from_real_tensor(fake_mode, own, make_constant=True)
                )
            if _plain_dense(t):
                return _fake_from_metadata(fake_mode, t)
            return cast(torch.Tensor, fake_mode.from_tensor(t))
        except Exception as exc:
            raise DataDependentError(
                f"a {t.dtype} tensor of shape {tuple(t.shape)} cannot be a FakeTensor ({type(exc).__name__}: {exc})"
            ) from exc


def _plain_dense(t: torch.Tensor) -> bool:
    """Whether ``t`` is fully described by its metadata: a plain tensor or parameter that owns its storage from
    offset 0 (not resized to nothing), a leaf with no gradient held, dense, no conjugate or negative bit, neither
    quantized nor an inference tensor nor an ``nn.Buffer``. Anything else (a view, a subclass, a tensor with
    ``.grad``) goes through torch's full converter, which follows storages, grads and those flags."""
    return bool(
        type(t) in (torch.Tensor, nn.Parameter) and t.layout == torch.strided and t.is_leaf and t.grad is None
        and not t._is_view() and t.storage_offset() == 0 and not t.is_quantized and not t.is_conj() and not t.is_neg()
        and not t.is_inference() and not getattr(t, "_is_buffer", False)
        and (t.numel() == 0 or t.untyped_storage().nbytes() > 0)
    )  # fmt: skip


def _fake_from_metadata(fake_mode: Any, t: torch.Tensor, constant: torch.Tensor | None = None) -> torch.Tensor:
    """``t`` as a FakeTensor built straight from its sizes, strides, dtype, device and ``requires_grad``: the
    same tensor ``fake_mode.from_tensor`` gives for a :func:`_plain_dense` one (a parameter stays one to
    ``isinstance``; ``constant`` keeps a small tensor's values, as ``from_real_tensor(make_constant=True)``
    does), without torch's general converter, which describes and memoises every storage (a fifth of a cold
    resnet50 dry run). ``tests/test_fake_params.py`` holds the two against each other."""
    fake = new_fake(
        fake_mode, t.device, t.size(), t.dtype, stride=t.stride(), requires_grad=t.requires_grad, constant=constant
    )
    if isinstance(t, nn.Parameter):
        fake._is_param = True
    return fake


def _run_graph(
    captured: CapturedGraph,
    gm: torch.fx.GraphModule,
    loop: _Loop,
    layers: dict[str, Layer],
    state: dict[str, torch.Tensor],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """The forward of a captured graph, node by node, with the run's parameters and buffers."""
    flat = _graph_inputs(captured, gm, args, kwargs)
    executor = _Executor(gm, loop, layers)
    prefixed = {f"gm.{k}": v for k, v in state.items()}
    return torch.func.functional_call(executor, prefixed, tuple(flat), strict=False)


def _graph_inputs(
    captured: CapturedGraph, gm: torch.fx.GraphModule, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[Any]:
    """The graph's placeholder values for a call ``model(*args, **kwargs)``: a Dynamo graph takes the
    call's flattened leaves; an FX graph's placeholders are the forward's parameters, bound by name."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if captured.method is Method.DYNAMO:
        leaves, _ = tree_flatten((args, kwargs))
        if len(leaves) != len(placeholders):
            raise CaptureError(f"the Dynamo graph takes {len(placeholders)} inputs but the call has {len(leaves)}")
        return leaves
    return _bind_placeholders(placeholders, getattr(gm, "_graphprof_signature", None), args, kwargs)


def _bind_placeholders(
    placeholders: list[torch.fx.Node],
    signature: inspect.Signature | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[Any]:
    """Each placeholder's value: the argument of its name, else its default (an FX placeholder's ``args``)."""
    bound: dict[str, Any] = {}
    if signature is not None:
        bound = dict(signature.bind_partial(*args, **kwargs).arguments)
    else:
        bound = {cast(str, p.target): a for p, a in zip(placeholders, args, strict=False)}
        bound.update(kwargs)
    values = []
    for p in placeholders:
        name = str(p.target).lstrip("*")
        if name in bound:
            values.append(bound[name])
        elif p.args:
            values.append(p.args[0])
        else:
            values.append(None)
    return values


def _run_eager(
    model: nn.Module,
    loop: _Loop,
    layers: dict[str, Layer],
    swap: dict[str, torch.Tensor],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    fake: bool,
) -> Any:
    """The forward of the model itself (the eager capture), its modules as layers; ``swap`` replaces
    its parameters and buffers for the run (empty: run on its own)."""
    with _module_layers(model, loop, layers):
        try:
            if isinstance(model, torch.jit.ScriptModule):
                # the stateless API refuses TorchScript; its ops still reach the dispatcher (and the fake
                # mode converts its real parameters on the fly), so it runs on its own state
                return model(*args, **kwargs)
            return torch.func.functional_call(model, swap, args, kwargs, strict=False)
        except Exception as exc:
            reason = needs_values(exc) if fake else None
            if reason:
                raise DataDependentError(reason) from exc
            raise ShapePropagationError(f"running the model failed: {type(exc).__name__}: {exc}") from exc


def _backward(loop: _Loop, outputs: list[torch.Tensor], params: list[torch.Tensor], inputs: list[Any]) -> None:
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


#: module -> (the packed object, its unpacked tensors)
_UNPACKED: weakref.WeakKeyDictionary[nn.Module, tuple[Any, list[torch.Tensor]]] = weakref.WeakKeyDictionary()


def packed_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The weights a quantized layer keeps packed (not parameters), unpacked once; ``[]`` for any other module."""
    packed = getattr(module, "_packed_params", None)
    if packed is None or not callable(getattr(module, "weight", None)):
        return []
    cached = _UNPACKED.get(module)
    if cached is not None and cached[0] is packed:
        return list(cached[1])
    tensors = _unpack(module)
    _UNPACKED[module] = (packed, tensors)
    return list(tensors)


def _unpack(module: nn.Module) -> list[torch.Tensor]:
    """Weight and bias, from one unpacking where the layer offers both at once (``_weight_bias``)."""
    both = getattr(module, "_weight_bias", None)
    if callable(both):
        weight, bias = both()
    else:
        weight = cast(Callable[[], torch.Tensor], module.weight)()
        bias = cast(Callable[[], torch.Tensor], module.bias)() if callable(getattr(module, "bias", None)) else None
    return [weight] + ([bias] if isinstance(bias, torch.Tensor) else [])


def parameter_tensors(module: nn.Module, recurse: bool = True) -> list[torch.Tensor]:
    """``module.parameters(recurse)`` plus the packed weights of quantized layers, each once."""
    tensors: list[torch.Tensor] = list(module.parameters(recurse=recurse))
    modules = module.modules() if recurse else [module]
    for sub in modules:
        tensors.extend(packed_tensors(sub))
    return tensors


def count_parameters(module: nn.Module) -> int:
    """``sum(p.numel() for p in module.parameters())``, packed quantized weights included."""
    return sum(t.numel() for t in parameter_tensors(module))
