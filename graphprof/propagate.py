"""Shape propagation: run the captured graph on FakeTensors and record every aten call per node.

This is the dry run. Parameters, buffers and inputs are replaced by ``FakeTensor``s (torch's own
metadata-only tensors), so no real arithmetic is done and no activation memory is allocated: a batch of
64 or a model on the ``meta`` device costs about as much to propagate as a batch of 1. Where a model
needs real values (data-dependent shapes, such as detection post-processing), :func:`propagate` is
called with ``fake=False`` and runs the same graph on real tensors; the caller says so in the output.

Each aten call is seen by a ``TorchDispatchMode`` below autograd and attributed to a *key*:

* for a captured FX graph, the graph node running (``torch.fx.Interpreter.run_node``);
* for the eager capture, the innermost module whose ``forward`` is running (global module hooks,
  removed on exit; nothing is attached to the user's modules).

In train mode the backward pass runs through ``torch.autograd.grad`` (no ``.grad`` is accumulated
anywhere) and each backward aten call is attributed to the forward key that created the autograd node
running it: after each forward key, the new autograd nodes are tagged in their ``metadata``, and
``torch._C._current_autograd_node()`` names the node during backward.

The pass writes nothing to the graph's ``node.meta``; it returns a :class:`Trace`.

Example (the numbers are shapes, not values, and nothing is computed)::

    >>> import torch, torchvision
    >>> from graphprof.capture import capture_graph
    >>> m = torchvision.models.resnet18().eval()
    >>> x = torch.randn(64, 3, 224, 224)
    >>> cap = capture_graph(m, (x,), {})
    >>> trace = propagate(cap, m, (x,), {})
    >>> trace.keys[0].name, trace.keys[0].output_shapes
    ('conv1', ((64, 64, 112, 112),))
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from graphprof.capture import CapturedGraph
from graphprof.errors import ShapePropagationError
from graphprof.formulas import TensorMeta
from graphprof.moe import grouped_mm_any_dtype
from graphprof.names import module_path
from graphprof.params import parameter_tensors

__all__ = ["OpCall", "TraceKey", "Trace", "propagate", "DataDependentError"]

_TAG = "graphprof_key"


class DataDependentError(ShapePropagationError):
    """The dry run needs real values (a data-dependent shape); run again with ``fake=False``."""


@dataclass
class OpCall:
    """One aten call with its tensors reduced to shapes and dtypes."""

    func: torch._ops.OpOverload
    args: tuple
    kwargs: dict
    out: Any
    phase: str


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


@dataclass
class Trace:
    """What :func:`propagate` saw: the keys in execution order and memory facts."""

    keys: list[TraceKey]
    fake: bool
    output_bytes: int
    input_bytes: int
    peak_activation_bytes: int
    unattributed: TraceKey


def _to_meta(value: Any, memo: dict[int, TensorMeta]) -> Any:
    """Tensors -> :class:`TensorMeta`; one tensor passed twice stays one object (so it is read once)."""
    if isinstance(value, torch.Tensor):
        meta = memo.get(id(value))
        if meta is None:
            meta = memo[id(value)] = TensorMeta(tuple(int(s) for s in value.shape), value.dtype)
        return meta
    if isinstance(value, list):
        return [_to_meta(v, memo) for v in value]
    if isinstance(value, tuple):  # plain tuple also for torch.return_types structs
        return tuple(_to_meta(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: _to_meta(v, memo) for k, v in value.items()}
    return value


def shapes_of(value: Any) -> tuple[tuple[int, ...], ...]:
    """The shapes of the tensors (or :class:`TensorMeta`) in a nested value, in pytree order."""
    leaves, _ = tree_flatten(value)
    return tuple(tuple(int(s) for s in t.shape) for t in leaves if isinstance(t, (torch.Tensor, TensorMeta)))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _LiveMemory:
    """Bytes of live activation storages, and their peak, from weak references to storages.

    A storage is live while some tensor still refers to it: the FX interpreter drops a node's value
    after its last user, and autograd keeps what it saved for backward, so the peak follows the real
    lifetime of activations. Parameters and buffers are excluded.
    """

    def __init__(self, static: list[torch.Tensor]) -> None:
        self.static = {StorageWeakRef(t.untyped_storage()) for t in static}
        self.live: dict[StorageWeakRef, int] = {}
        self.current = 0
        self.peak = 0

    def add(self, value: Any) -> None:
        leaves, _ = tree_flatten(value)
        for t in leaves:
            if isinstance(t, torch.Tensor):
                ref = StorageWeakRef(t.untyped_storage())
                if ref not in self.static and ref not in self.live:
                    size = t.untyped_storage().nbytes()
                    self.live[ref] = size
                    self.current += size
        for ref in [r for r in self.live if r.expired()]:
            self.current -= self.live.pop(ref)
        self.peak = max(self.peak, self.current)


class _Recorder(TorchDispatchMode):
    def __init__(self, memory: _LiveMemory, unattributed: TraceKey) -> None:
        super().__init__()
        self.key: TraceKey | None = None
        self.phase = "forward"
        self.memory = memory
        self.unattributed = unattributed
        self.tags: dict[int, TraceKey] = {}
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = grouped_mm_any_dtype(func, args, kwargs)  # a float32 MoE's grouped products on FakeTensors
        if self.paused:
            return out
        if self.phase == "backward":
            autograd_node = torch._C._current_autograd_node()
            tag = None if autograd_node is None else autograd_node.metadata.get(_TAG)
            key = self.tags.get(tag, self.unattributed) if tag is not None else self.unattributed
        else:
            key = self.key or self.unattributed
        memo: dict[int, TensorMeta] = {}
        key.calls.append(
            OpCall(func, _to_meta(args, memo), _to_meta(kwargs, memo), _to_meta(out, {}), self.phase)
        )
        self.memory.add(out)
        return out

    def tag_autograd(self, key: TraceKey, value: Any) -> None:
        """Tag the autograd nodes created while ``key`` ran (those reachable and not yet tagged)."""
        tag = id(key)
        self.tags[tag] = key
        leaves, _ = tree_flatten(value)
        stack = [t.grad_fn for t in leaves if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while stack:
            fn = stack.pop()
            if fn is None or _TAG in fn.metadata:
                continue
            fn.metadata[_TAG] = tag
            stack.extend(next_fn for next_fn, _ in fn.next_functions)


def _node_type(node: torch.fx.Node, root: nn.Module) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(str(node.target))).__name__
    if node.op == "call_method":
        return str(node.target)
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    return name.split(".")[-1]


def _graph_keys(gm: torch.fx.GraphModule, model: nn.Module, dynamo: bool) -> dict[str, TraceKey]:
    """One key per computing node. Names: the module path for a leaf module's call, else
    ``<module path>.<function>`` (``layer1.0.add``), unique within the graph."""
    params = {id(p) for p in gm.parameters()}
    modules = dict(model.named_modules(remove_duplicate=False))
    keys: dict[str, TraceKey] = {}
    taken: set[str] = set()
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
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
            name = module if is_leaf and module not in taken else ".".join(filter(None, [module, node_type]))
            if is_leaf and module not in taken:
                node_type = type(owner).__name__
        else:
            name = f"{module}.{node.name}" if module else node.name
        base, n = name, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        keys[node.name] = TraceKey(name=name, node=node.name, module=module, type=node_type, params=used)
    return keys


def _fetch_attr(gm: nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


class _GraphRunner(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, recorder: _Recorder, keys: dict[str, TraceKey], train: bool):
        super().__init__(gm)
        self.recorder = recorder
        self.keys = keys
        self.train = train

    def fetch_args_kwargs_from_env(self, n: torch.fx.Node) -> tuple[tuple, dict]:
        # Graph constants are immutable_list / immutable_dict; the generated forward would pass fresh
        # lists, and some wrapped functions mutate their arguments (video Swin's window sizes).
        args, kwargs = super().fetch_args_kwargs_from_env(n)
        return _mutable(args), _mutable(kwargs)

    def run_node(self, n: torch.fx.Node) -> Any:
        key = self.keys.get(n.name)
        self.recorder.key = key
        try:
            out = super().run_node(n)
        except DataDependentError:
            raise
        except Exception as exc:
            reason = _needs_values(exc)
            if reason:
                raise DataDependentError(f"node {n.name!r}: {reason}") from exc
            raise ShapePropagationError(
                f"shape propagation failed at node {n.name!r} ({n.format_node()}): {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self.recorder.key = None
        if key is not None:
            key.output_shapes = shapes_of(out)
            if self.train:
                self.recorder.tag_autograd(key, out)
        return out


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


class _Executor(nn.Module):
    """Wraps a graph so that ``torch.func.functional_call`` can swap its parameters for fakes."""

    def __init__(self, gm: torch.fx.GraphModule, runner_factory: Any) -> None:
        super().__init__()
        self.gm = gm
        self._runner_factory = runner_factory

    def forward(self, *flat: Any) -> Any:
        return self._runner_factory(self.gm).run(*flat, enable_io_processing=False)


def _needs_values(exc: BaseException) -> str | None:
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
        seen = seen.__cause__ or seen.__context__
    return None


@contextlib.contextmanager
def _module_attribution(model: nn.Module, recorder: _Recorder, keys: dict[str, TraceKey], train: bool) -> Iterator[None]:
    """Attribute aten calls to the innermost running module, through global forward hooks."""
    names = {id(m): name for name, m in model.named_modules(remove_duplicate=False)}
    stack: list[TraceKey | None] = []

    def key_for(module: nn.Module) -> TraceKey | None:
        path = names.get(id(module))
        if path is None:
            return None
        if path not in keys:
            keys[path] = TraceKey(
                name=path or "(model)",
                node=path or "(model)",
                module=path or None,
                type=type(module).__name__,
                params=parameter_tensors(module, recurse=False),
            )
        return keys[path]

    def pre_hook(module: nn.Module, args: Any) -> None:
        stack.append(recorder.key)
        key = key_for(module)
        if key is not None:
            recorder.key = key

    def post_hook(module: nn.Module, args: Any, output: Any) -> None:
        key = key_for(module)
        if key is not None:
            key.output_shapes = shapes_of(output)
            if train:
                recorder.tag_autograd(key, output)
        recorder.key = stack.pop() if stack else None

    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(pre_hook),
        torch.nn.modules.module.register_module_forward_hook(post_hook, always_call=True),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def propagate(
    captured: CapturedGraph,
    model: nn.Module,
    args: tuple,
    kwargs: dict,
    *,
    train: bool = False,
    dtype: torch.dtype | None = None,
    fake: bool = True,
) -> Trace:
    """Run the captured graph once on ``args``/``kwargs`` and record every aten call per key.

    ``fake=True`` (the dry run) computes nothing; ``fake=False`` runs for real. ``dtype`` casts the
    floating-point parameters, buffers and inputs of the run (the model itself is not changed).
    Raises :class:`DataDependentError` when the dry run cannot go on without real values and
    :class:`ShapePropagationError` naming the node for any other failure.
    """
    gm = captured.graph_module
    root: nn.Module = gm if gm is not None else model
    named = dict(root.named_parameters(remove_duplicate=False))
    named.update(dict(root.named_buffers(remove_duplicate=False)))

    fake_mode = None
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def convert(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        out = fake_mode.from_tensor(t) if fake_mode is not None else t
        if dtype is not None and out.is_floating_point() and out.dtype != dtype:
            with torch.no_grad():
                out = out.to(dtype)
            if isinstance(t, nn.Parameter):
                out.requires_grad_(t.requires_grad and train)
        return out

    if gm is None:
        keys: dict[str, TraceKey] = {}
    else:
        keys = _graph_keys(gm, model, captured.method == "dynamo.export")
    unattributed = TraceKey(name="(unattributed)", node="(unattributed)", module=None, type="-")

    with contextlib.ExitStack() as stack:
        if fake_mode is not None:
            stack.enter_context(fake_mode)
        memo: dict[int, Any] = {}

        def convert_memo(t: Any) -> Any:
            if isinstance(t, torch.Tensor):
                if id(t) not in memo:
                    memo[id(t)] = convert(t)
                return memo[id(t)]
            return t

        state = {name: convert_memo(t) for name, t in named.items()}
        call_args = tree_map(convert_memo, args)
        call_kwargs = tree_map(convert_memo, kwargs)
        if not fake and dtype is None:
            state = {}
        leaves_in, _ = tree_flatten((call_args, call_kwargs))
        input_bytes = sum(_nbytes(t) for t in leaves_in if isinstance(t, torch.Tensor))

        memory = _LiveMemory([t for t in state.values()] or [t for t in named.values()])
        memory.add((call_args, call_kwargs))
        recorder = _Recorder(memory, unattributed)
        grad_ctx = torch.enable_grad() if train else torch.no_grad()
        stack.enter_context(grad_ctx)
        stack.enter_context(recorder)

        if gm is not None:
            flat = captured.flat_inputs(call_args, call_kwargs)
            executor = _Executor(gm, lambda g: _GraphRunner(g, recorder, keys, train))
            prefixed = {f"gm.{k}": v for k, v in state.items()}
            outputs = torch.func.functional_call(executor, prefixed, tuple(flat), strict=False)
        else:
            stack.enter_context(_module_attribution(model, recorder, keys, train))
            try:
                outputs = torch.func.functional_call(model, state, call_args, call_kwargs, strict=False)
            except Exception as exc:
                reason = _needs_values(exc) if fake else None
                if reason:
                    raise DataDependentError(reason) from exc
                raise ShapePropagationError(f"running the model failed: {type(exc).__name__}: {exc}") from exc

        out_leaves = [t for t in tree_flatten(outputs)[0] if isinstance(t, torch.Tensor)]
        output_bytes = sum(_nbytes(t) for t in out_leaves)
        if train:
            # in a real run without a dtype the model's own tensors are used (state is empty)
            _backward(recorder, out_leaves, [t for t in (state or named).values() if t.requires_grad], leaves_in)

    ordered = list(keys.values())
    return Trace(
        keys=ordered,
        fake=fake,
        output_bytes=output_bytes,
        input_bytes=input_bytes,
        peak_activation_bytes=memory.peak,
        unattributed=unattributed,
    )


def _backward(recorder: _Recorder, outputs: list[torch.Tensor], params: list[torch.Tensor], inputs: list[Any]) -> None:
    """Backward of ``sum(outputs)`` with respect to every leaf that requires grad; nothing accumulates."""
    differentiable = [t for t in outputs if t.requires_grad and t.is_floating_point()]
    if not differentiable:
        raise ShapePropagationError("train mode: no output of the model requires grad, so there is no backward pass")
    leaves = list(params)
    leaves += [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves:
        raise ShapePropagationError("train mode: the model has no parameter that requires grad")
    recorder.key = None
    recorder.paused = True  # the seed gradient of ones is the loss's business, not the model's
    grads = [torch.ones_like(t) for t in differentiable]
    recorder.paused = False
    recorder.phase = "backward"
    try:
        torch.autograd.grad(differentiable, leaves, grad_outputs=grads, allow_unused=True)
    finally:
        recorder.phase = "forward"
