"""Warm up a model, then capture its graph: ``torch.fx.symbolic_trace``, falling back to an eager capture.

The strategy of seed 001:

1. warm up once (models with lazily initialised state, such as YOLO's anchors, need it);
2. ``torch.fx.symbolic_trace``: fast, names are the module paths;
3. ``torch._dynamo.export`` (tried by default when symbolic tracing fails, except for the families whose
   record says it costs too long, see :func:`dynamo_skip_reason`): handles control flow on
   Python values, attribute mutation and most Python patterns; its node names are mangled,
   :mod:`graphprof.base.names` makes them readable;
4. when the graph methods fail (detection post-processing, data-dependent loops), an **eager** capture: the model
   itself is run op by op under a dispatch mode and each aten call is attributed to the module that
   issued it. It is not a graph of the Python program, but every op is still seen and counted.

``torch._dynamo.export`` is kept as the fallback rather than ``torch.export.export``: for torchvision
detection/segmentation models and YOLO, ``torch.export`` (strict or not) fails on the same models
Dynamo fails on, and Dynamo keeps ``nn_module_stack`` at the level of the user's Python calls
(``conv2d``, ``batch_norm``) rather than decomposed aten ops, which is what a per-layer table wants.

Nothing here changes the user's model: the warm-up runs under ``torch.no_grad`` in eval mode, and the
training flag and every buffer are restored afterwards (see :func:`preserved_state`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import operator
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Method, WarmUp
from graphprof.base.inputs import materialize
from graphprof.base.logs import FAKE_TENSOR_LOGGER, quiet_loggers
from graphprof.errors import CaptureError, InvalidInputError, ModelBuildError, one_line
from graphprof.models.family import CUSTOM

__all__ = [
    "CapturedGraph",
    "capture_graph",
    "warm_up",
    "preserved_state",
    "slice_batch",
    "METHODS",
    "default_methods",
    "dynamo_skip_reason",
    "family_of",
    "NOT_TRIED",
]

#: How an attempt that was skipped, not failed, begins: ``("dynamo.export", "not tried: <why>")``.
NOT_TRIED = "not tried"

#: Every capture method, in the order :func:`capture_graph` tries them when given no ``methods``, and the
#: order :func:`graphprof.profile_model` uses by default (``--capture auto``): symbolic tracing (a fraction
#: of a second where it works), then Dynamo export (a whole graph with true shapes where Python control
#: flow defeats symbolic tracing), then the eager capture (every module a layer, always works). The
#: session's :class:`~graphprof.capture.plan.CapturePlan` decides how the default order is walked.
METHODS: tuple[Method, ...] = tuple(Method)


def family_of(model: nn.Module, family: str) -> str:
    """``family``, or for a model object handed over (``custom``) the family whose library defines its class
    (:attr:`graphprof.models.family.Family.library`)."""
    if family != CUSTOM:
        return family
    from graphprof.models.registry import library_family

    return library_family(type(model).__module__) or family


def dynamo_skip_reason(family: str, methods: tuple[Method, ...]) -> str | None:
    """Why ``auto`` does not try Dynamo export for a model of ``family`` (its record's ``dynamo_skip``), or
    ``None`` when it does."""
    if methods != METHODS:
        return None
    from graphprof.models.registry import family_traits

    return family_traits(family).dynamo_skip


def default_methods(model: nn.Module) -> tuple[Method, ...]:
    """The capture order :func:`graphprof.profile_model` uses for ``model``: :data:`METHODS`."""
    return METHODS


@dataclass
class CapturedGraph:
    """The outcome of :func:`capture_graph`.

    ``graph_module`` is ``None`` for the eager method. ``attempts`` holds ``(method, error)`` for every
    method tried before the one that worked, so the output can say why the faster ones failed.
    """

    method: Method
    graph_module: torch.fx.GraphModule | None
    attempts: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    num_subgraphs: int = 1
    #: a Dynamo export specialised to its example inputs' sizes (``assume_static_by_default``): it holds for
    #: those sizes only, where a symbolic export holds wherever its guards do
    static_shapes: bool = False

    def accepts(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether this capture holds for a call with these inputs.

        An FX graph is shape-generic and the eager capture has no graph: both always hold. A Dynamo
        export is specialised to its example inputs: it holds when each input has the rank, the static
        sizes and the dtype it was exported with, and its symbolic sizes satisfy the export's guards.
        """
        if self.method is not Method.DYNAMO or self.graph_module is None:
            return True
        examples = [n.meta.get("example_value") for n in self.graph_module.graph.nodes if n.op == "placeholder"]
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        if len(leaves) != len(examples):
            return False
        return _guards_hold(examples, leaves)


def _guards_hold(examples: list[Any], values: list[Any]) -> bool:
    """Check the Dynamo export's shape guards for new input sizes (see :meth:`CapturedGraph.accepts`)."""
    import sympy

    binding: dict[Any, int] = {}
    shape_env = None
    for example, value in zip(examples, values, strict=True):
        if not isinstance(example, torch.Tensor) or not isinstance(value, torch.Tensor):
            if isinstance(example, torch.Tensor) != isinstance(value, torch.Tensor):
                return False
            continue
        if example.dim() != value.dim() or example.dtype != value.dtype:
            return False
        for dim, size in zip(example.shape, value.shape, strict=True):
            if isinstance(dim, int):
                if dim != size:
                    return False
                continue
            expr = dim.node.expr
            shape_env = dim.node.shape_env
            if expr.is_number:  # a size the export specialised
                if int(expr) != int(size):
                    return False
                continue
            if not expr.is_Symbol:
                return False  # a derived size: not worth solving for
            if binding.setdefault(expr, int(size)) != int(size):
                return False
    if shape_env is None:
        return True
    for symbol, size in binding.items():
        bounds = shape_env.var_to_range.get(symbol)
        if bounds is not None and not (bounds.lower <= size <= bounds.upper):
            return False
    # a size the export specialised (a number in the example) keeps its symbol in the guards, pinned to one value
    for symbol, bounds in shape_env.var_to_range.items():
        if symbol not in binding and bounds.is_singleton():
            binding[symbol] = int(bounds.lower)
    for guard in shape_env.guards:
        if guard.expr.xreplace(binding) is not sympy.true:
            return False
    return True


@contextlib.contextmanager
def preserved_state(model: nn.Module) -> Iterator[None]:
    """Restore the model's training flags, plain attributes, buffers and ``requires_grad`` flags on exit.

    Buffers are compared by identity and value: a buffer that was replaced is put back, one changed in
    place (a BatchNorm running mean, ``num_batches_tracked``) gets its old value copied back. Meta
    tensors hold no values and are only checked for identity.
    """
    modes = {m: m.training for m in model.modules()}
    # public plain attributes (YOLO's anchors, strides and last input shape, set by its forward)
    attributes = {m: {k: v for k, v in vars(m).items() if not k.startswith("_")} for m in model.modules()}
    requires_grad = {p: p.requires_grad for p in model.parameters()}
    buffers: dict[tuple[nn.Module, str], tuple[torch.Tensor | None, torch.Tensor | None]] = {}
    for module in model.modules():
        for name, buf in module._buffers.items():
            saved = None if buf is None or buf.is_meta else buf.detach().clone()
            buffers[(module, name)] = (buf, saved)
    try:
        yield
    finally:
        for module, saved_attributes in attributes.items():
            current = vars(module)
            for name in [k for k in current if not k.startswith("_") and k not in saved_attributes]:
                del current[name]
            for name, value in saved_attributes.items():
                if current.get(name) is not value:
                    current[name] = value
        for module, training in modes.items():
            module.training = training
        for param, flag in requires_grad.items():
            param.requires_grad_(flag)
        for (module, name), (buf, saved) in buffers.items():
            if dict(module._buffers.items()).get(name) is not buf:  # a TorchScript module's is a read-only wrapper
                module._buffers[name] = buf
            if buf is not None and saved is not None and not torch.equal(buf, saved):
                with torch.no_grad():
                    buf.copy_(saved)


def slice_batch(value: Any) -> Any:
    """The first sample of a batch: ``x[:1]`` for tensors, the first item of a list of images.

    Used for the warm-up, which only has to initialise lazy state, so its cost does not grow with the
    batch size.
    """
    if isinstance(value, torch.Tensor):
        return value[:1] if value.dim() > 0 and value.shape[0] > 1 else value
    if isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value):
        return value[:1]
    if isinstance(value, tuple):
        return tuple(slice_batch(v) for v in value)
    if isinstance(value, dict):
        return {k: slice_batch(v) for k, v in value.items()}
    return value


def warm_up_reason(model: nn.Module, family: str, policy: WarmUp = WarmUp.AUTO, methods: tuple[Method, ...] = METHODS) -> str | None:
    """Why ``model`` needs one real forward before its dry run, or ``None`` when it does not.

    ``policy`` (:class:`~graphprof.base.choices.WarmUp`): ``auto`` decides as below; ``always`` gives every
    model a reason (seed 001's "Warm-up (always)"); ``never`` gives none.

    A model needs one when its family's record says it builds state on its first call
    (:attr:`graphprof.models.family.Family.warm_up`)
    or when it holds lazy modules whose parameters take their shapes from the first input
    (``nn.LazyLinear``, ``nn.LazyConv2d``, ...). Any other model is profiled without running its arithmetic.

    >>> warm_up_reason(nn.LazyLinear(4), "custom")
    "lazy modules take their shapes from the first input ('' is a LazyLinear)"
    >>> warm_up_reason(nn.Linear(2, 4), "custom") is None
    True
    """
    from torch.nn.modules.lazy import LazyModuleMixin

    from graphprof.models.registry import family_traits

    traits = family_traits(family)
    reason = traits.warm_up
    if methods != METHODS and Method.DYNAMO in methods:  # a forced export (``auto`` skips it where it needs one)
        reason = reason or traits.export_warm_up
    for name, module in model.named_modules():
        if isinstance(module, LazyModuleMixin) and module.has_uninitialized_params():  # type: ignore[misc]
            lazy = f"lazy modules take their shapes from the first input ({name!r} is a {type(module).__name__})"
            if policy is WarmUp.NEVER:
                raise InvalidInputError(f"warm_up='never', but {lazy}: nothing can be counted before it; use auto or always")
            reason = reason or lazy
            break
    if policy is WarmUp.NEVER:
        return None
    return reason or ("asked for (warm_up='always')" if policy is WarmUp.ALWAYS else None)


def warm_up(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Run one forward pass in eval mode without gradients, on the first sample of the batch.

    Safe for every model: models without lazy state are unchanged; models with it (YOLO's ``anchors``
    and ``strides``) are initialised, exactly as their own first forward would do. Buffers and flags
    are restored by the caller's :func:`preserved_state`. Returns a note when the warm-up was skipped:
    a model on the ``meta`` device that cannot run eagerly (it asks for a value, ``.item()``) is left
    to the dry run, which handles such calls.
    """
    model.eval()
    with torch.no_grad():
        try:
            model(*slice_batch(args), **slice_batch(kwargs))
            return None
        except Exception:  # the model may need the full batch (fixed shapes)
            try:
                model(*args, **kwargs)
                return None
            except Exception as exc:
                if _on_meta(model, args, kwargs):
                    return f"warm-up skipped: the meta-device model cannot run eagerly ({one_line(exc, 120, with_type=True)})"
                raise ModelBuildError(
                    f"the model's forward pass failed on its example input: {one_line(exc, 600, with_type=True)}"
                ) from exc


def _on_meta(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    tensors += list(model.parameters())
    return bool(tensors) and all(t.is_meta for t in tensors)


#: Dynamo's loggers: their warnings (symbolic-shape printing, for example) are not the user's business.
_TORCH_LOGGERS = ("torch._dynamo", "torch.fx.experimental.symbolic_shapes", "torch._guards", "torch.export")


#: Python's augmented assignments and the in-place operator each calls: ``x += y`` runs ``x.__iadd__(y)``.
_IN_PLACE = {"__iadd__": operator.iadd, "__isub__": operator.isub, "__imul__": operator.imul, "__itruediv__": operator.itruediv,
             "__ifloordiv__": operator.ifloordiv, "__imod__": operator.imod, "__ipow__": operator.ipow, "__iand__": operator.iand,
             "__ior__": operator.ior, "__ixor__": operator.ixor, "__ilshift__": operator.ilshift, "__irshift__": operator.irshift}  # fmt: skip


class _InPlaceProxy(torch.fx.Proxy):
    """FX's proxy, except that an augmented assignment is traced as the in-place call it is: FX's own proxy has no
    ``__iadd__``, so Python falls back to ``__add__`` and ``out += identity`` (torchvision's residual blocks) became
    an out-of-place ``aten.add`` with a fresh output, where the eager forward runs ``aten.add_`` into ``out``.
    Traced so, the dry run dispatches what the eager forward dispatches: resnet50 at batch 8 priced its 16 adds at
    15.9 ms against 5.8 ms measured in context (a fresh 25.7 MB output each, where the eager forward writes none),
    and the heap replay saw 16 allocations the forward never makes. FX prints such a node as ``x += y``."""


def _in_place(target: Any) -> Any:
    def method(self: torch.fx.Proxy, other: Any) -> torch.fx.Proxy:
        # named as its plain twin (``add``, ``add_1``), as the out-of-place node was: layer names do not change
        return self.tracer.create_proxy("call_function", target, (self, other), {}, name=target.__name__[1:])

    return method


for _name, _target in _IN_PLACE.items():
    setattr(_InPlaceProxy, _name, _in_place(_target))


class _CallSiteTracer(torch.fx.Tracer):
    """``torch.fx.symbolic_trace``'s tracer, except that a module reachable under several paths (one
    object held by two parents) is named by the path under the parent that called it: FX's own tracer
    names every call by the first path, which would give the first parent all of the shared module's cost;
    and that an augmented assignment is traced in place (:class:`_InPlaceProxy`).
    """

    def __init__(self, root: nn.Module) -> None:
        super().__init__()
        self._paths: dict[int, list[str]] = {}
        for name, module in root.named_modules(remove_duplicate=False):
            self._paths.setdefault(id(module), []).append(name)

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _InPlaceProxy(node, self)

    def path_of_module(self, mod: nn.Module) -> str:
        candidates = self._paths.get(id(mod), [])
        if len(candidates) > 1 and self.module_stack:
            parent = next(reversed(self.module_stack.values()))[0]  # the calling module's path
            for path in candidates:
                if path.rpartition(".")[0] == parent:
                    return path
        return super().path_of_module(mod)


def _symbolic_trace(model: nn.Module) -> torch.fx.GraphModule:
    tracer = _CallSiteTracer(model)
    graph = tracer.trace(model)
    # generates and compiles the graph's Python source only when something asks for it (its forward, its
    # code): the dry run interprets the graph node by node and never does (a tenth of a cold resnet50 run)
    from torch.fx._lazy_graph_module import _LazyGraphModule

    gm = _LazyGraphModule(tracer.root, graph, type(model).__name__)
    gm._graphprof_signature = inspect.signature(model.forward)  # type: ignore[assignment]
    return gm


def _dynamo_export(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], static_shapes: bool) -> torch.fx.GraphModule:
    """Dynamo's export at these inputs; ``static_shapes`` specialises every size to them (no symbolic sizes,
    none of their guards: pyg:gps at 2,000 nodes profiled in 1.9 s instead of 4.5 s at load 2.4, the same totals)."""
    import torch._dynamo

    # no torch._dynamo.reset() around the export: it would throw away the caller's torch.compile caches
    export = torch._dynamo.export(model, assume_static_by_default=static_shapes)
    with quiet_loggers(*_TORCH_LOGGERS), quiet_loggers(FAKE_TENSOR_LOGGER, level=logging.CRITICAL):
        result = export(*materialize(args, _device_of(model)), **materialize(kwargs, _device_of(model)))
    return result.graph_module


def _device_of(model: nn.Module) -> torch.device:
    return next((t.device for t in model.parameters()), torch.device("cpu"))


def capture_graph(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    methods: tuple[Method | str, ...] = METHODS,
    static_shapes: bool = False,
) -> CapturedGraph:
    """Capture ``model``'s graph with the first method of ``methods`` that works.

    The model must already be warmed up (see :func:`warm_up`). Raises :class:`CaptureError` naming
    every method's cause when all fail.

    >>> import torchvision
    >>> m = torchvision.models.resnet18().eval()
    >>> capture_graph(m, (torch.randn(1, 3, 224, 224),), {}).method
    'fx.symbolic_trace'
    """
    attempts: list[tuple[str, str]] = []
    start = time.perf_counter()
    for method in map(_method, methods):
        if method is Method.DYNAMO and any(why.startswith("RecursionError") for _, why in attempts):
            # a model that nests too deeply for symbolic tracing costs Dynamo minutes before it fails too
            attempts.append((method, f"{NOT_TRIED}: the model nests too deeply to trace (symbolic tracing hit the recursion limit)"))
            continue
        try:
            if method is Method.FX:
                gm: torch.fx.GraphModule | None = _symbolic_trace(model)
            elif method is Method.DYNAMO:
                gm = _dynamo_export(model, args, kwargs, static_shapes)
            else:
                gm = None
        except Exception as exc:  # every failure is recorded and the next method tried
            attempts.append((method, one_line(exc, 600, with_type=True)))
            continue
        static = static_shapes and method is Method.DYNAMO
        return CapturedGraph(method, gm, attempts, time.perf_counter() - start, static_shapes=static)
    detail = "; ".join(f"{m}: {e}" for m, e in attempts)
    raise CaptureError(f"every capture method failed ({detail})")


def _method(method: Method | str) -> Method:
    """A method named by its enum or its value; an unknown name is a :class:`CaptureError` naming the choices."""
    try:
        return Method(method)
    except ValueError:
        raise CaptureError(f"unknown capture method {method!r}; choose from {', '.join(METHODS)}") from None
