"""The layers ops are attributed to, and the forward that runs them: a captured graph node by node
(:func:`run_graph`, its nodes as layers), or the model itself with its modules as layers (:func:`run_eager`)."""

from __future__ import annotations

import contextlib
import inspect
import operator
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from graphprof.base.choices import Method
from graphprof.base.names import module_path
from graphprof.capture.methods import CapturedGraph
from graphprof.errors import CaptureError, DataDependentError, ShapePropagationError
from graphprof.run.dispatch import EventBus
from graphprof.run.events import Layer
from graphprof.run.failures import needs_values
from graphprof.run.hooks import module_call_hooks, own_module_hooks
from graphprof.run.params import parameter_tensors

__all__ = ["graph_layers", "module_layers", "run_graph", "run_eager"]


# ---- layers of a captured FX graph -------------------------------------------------------------------


def _node_type(node: torch.fx.Node, root: nn.Module) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(str(node.target))).__name__
    if node.op == "call_method":
        return str(node.target)
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    if getattr(target, "__module__", None) == "_operator" and name.startswith("i") and hasattr(operator, name[1:]):
        return name[1:]  # an augmented assignment (``x += y``, operator.iadd) is an ``add`` as its plain twin is
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
    def __init__(self, gm: torch.fx.GraphModule, loop: EventBus, layers: dict[str, Layer]):
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

    def __init__(self, gm: torch.fx.GraphModule, loop: EventBus, layers: dict[str, Layer]) -> None:
        super().__init__()
        self.gm = gm
        self._loop = loop
        self._layers = layers

    def forward(self, *flat: Any) -> Any:
        return _GraphRunner(self.gm, self._loop, self._layers).run(*flat, enable_io_processing=False)


# ---- layers of the eager capture: modules, through global hooks ----------------------------------------


@contextlib.contextmanager
def module_layers(model: nn.Module, loop: EventBus, layers: dict[str, Layer], own: bool = False) -> Iterator[None]:
    """Modules as layers, through global forward hooks (removed on exit; nothing is attached to the
    user's modules), or, for a copy the run owns (``own``), hooks on its modules after its wrappers' own
    (:func:`graphprof.run.hooks.own_module_hooks`). A module reached under several paths (one activation
    instance shared by every block) is named by the path under the module that called it, so each call
    site keeps its own row."""
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
        loop.enter(layer, args)

    def post_hook(module: nn.Module, args: Any, output: Any) -> None:
        if not stack:
            return
        before, entered = stack.pop()
        if entered is not None:
            loop.leave(entered, output)
        loop.layer = before

    with own_module_hooks(model, pre_hook, post_hook) if own else module_call_hooks(pre_hook, post_hook):
        yield


def run_graph(
    captured: CapturedGraph,
    gm: torch.fx.GraphModule,
    loop: EventBus,
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


def _graph_inputs(captured: CapturedGraph, gm: torch.fx.GraphModule, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
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
    placeholders: list[torch.fx.Node], signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
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


def run_eager(
    model: nn.Module,
    loop: EventBus,
    layers: dict[str, Layer],
    swap: dict[str, torch.Tensor],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    fake: bool,
) -> Any:
    """The forward of the model itself (the eager capture), its modules as layers; ``swap`` replaces
    its parameters and buffers for the run (empty: run on its own)."""
    with module_layers(model, loop, layers):
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
