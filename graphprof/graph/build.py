"""Build the module graph and the operator (detail) graph of one run: an observer on the run loop.

Every tensor of the run is tagged with where it came from (a graph input, a layer, an op) in this
observer's own weak map; each consumer that reads a tagged tensor gets an edge from its producer.

* **Module graph**: one node per layer of the run (a leaf module call or a Python-level function such
  as the residual ``layer1.0.add`` in an FX graph), folded into its ancestor module at ``depth`` when
  one is given. In the eager capture, ops run directly by a module with children (the residual add in
  a ``BasicBlock.forward``) become their own nodes, ``<module>.<op>``, as FX would name them. A layer
  that only hands a tensor on (``getitem``, ``Identity``) is a node too, with the edge in and out.
* **Detail graph**: one node per aten op of the forward pass, except views, metadata queries,
  allocations and ops with no tensor result (``dim``, ``item``): their outputs keep the origin of their
  inputs, so an edge passes through them to the real producer.

Edges carry the consumed tensor's shape, dtype and bytes; one edge per produced tensor and consumer,
so a module with several outputs keeps an edge for each. Node costs come from the formula registry
(:func:`graphprof.cost.count.op_record`), parameters are credited to the first node that uses them, and a
device (:class:`~graphprof.devices.hardware.Hardware`) gives each node a roofline time estimate.

Example::

    >>> import torch, torchvision, graphprof
    >>> pm = graphprof.prepare(torchvision.models.resnet18(), input_shape=(1, 3, 64, 64))
    >>> builder = GraphBuilder()
    >>> _ = pm.run([builder])
    >>> g = builder.module_graph(pm.name)
    >>> [g.nodes[e.src].name for e in g.incoming(g.node("layer1.0.add").id)]
    ['layer1.0.bn2', 'maxpool']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from graphprof.base.choices import OpStatus, Phase
from graphprof.base.names import called_op
from graphprof.cost.bounds import roofline_time
from graphprof.cost.count import op_record
from graphprof.devices.hardware import Hardware
from graphprof.errors import InvalidInputError
from graphprof.formulas import op_status
from graphprof.formulas.registry import op_name
from graphprof.graph.model import Graph, GraphEdge, GraphNode
from graphprof.run.events import Layer, Observer, OpEvent, RunContext
from graphprof.run.propagate import op_call

__all__ = ["GraphBuilder", "passes_through"]


def passes_through(func: torch._ops.OpOverload, out: Any) -> bool:
    """True for ops that are not detail-graph nodes: views, zero-cost ops, and ops with no tensor result."""
    if getattr(func, "is_view", False) or op_status(func) is OpStatus.ZERO_COST:
        return True
    return not any(isinstance(t, torch.Tensor) for t in tree_flatten(out)[0])


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass
class _Acc:
    """A node being built."""

    node: GraphNode
    dtype: str = "float32"
    param_ids: set[int] = field(default_factory=set)


class _Level:
    """One graph under construction: nodes by key, edges deduplicated by (producer tensor, consumer)."""

    def __init__(self, level: str) -> None:
        self.level = level
        self.accs: dict[Any, _Acc] = {}
        self.edges: dict[tuple[Any, Any, int], GraphEdge] = {}
        self.owner: WeakIdKeyDictionary = WeakIdKeyDictionary()  # tensor -> ((node key, token), ...)
        self.tokens = 0

    def node(self, key: Any, name: str, kind: str, type_: str, module: str | None) -> _Acc:
        acc = self.accs.get(key)
        if acc is None:
            acc = self.accs[key] = _Acc(GraphNode(id=len(self.accs), name=name, kind=kind, type=type_, module=module))
        return acc

    def consume(self, key: Any, t: torch.Tensor) -> None:
        for src, token in self.owner.get(t, ()):
            if src != key and (src, key, token) not in self.edges:
                self.edges[(src, key, token)] = GraphEdge(
                    self.accs[src].node.id, self.accs[key].node.id, tuple(int(s) for s in t.shape),
                    _dtype_name(t.dtype), t.numel() * t.element_size(),
                )  # fmt: skip

    def produce(self, key: Any, t: torch.Tensor) -> None:
        self.tokens += 1
        self.owner[t] = ((key, self.tokens),)

    def handed_out(self, key: Any) -> tuple[tuple[int, ...], ...]:
        """The shapes of the tensors ``key``'s node hands to other nodes, one per tensor, in the order made:
        the outputs of a node folded at a depth (``layer1``), whose last inner layer is not the node."""
        src = self.accs[key].node.id
        tokens = {token: edge.shape for (s, _, token), edge in self.edges.items() if self.accs[s].node.id == src}
        return tuple(tokens[t] for t in sorted(tokens))

    def graph(self, model_name: str, depth: int | None, hardware: Hardware | None) -> Graph:
        for key, acc in self.accs.items():
            if acc.node.kind == "module" and acc.node.output_shapes == ():
                acc.node.output_shapes = self.handed_out(key)
        nodes = [acc.node for acc in self.accs.values()]
        if hardware is not None:
            for acc in self.accs.values():
                n = acc.node
                if n.kind != "input":
                    peak = hardware.peak_flops(acc.dtype)
                    n.estimated_ms = roofline_time(n.flops, n.bytes, peak, hardware.bandwidth) * 1e3
        return Graph(
            level=self.level, model_name=model_name, nodes=nodes, edges=list(self.edges.values()),
            depth=depth, hardware=hardware.name if hardware is not None else None,
        )  # fmt: skip


#: Module types that only hold others (no forward of their own): a fold's depth looks through them.
_CONTAINERS = frozenset({"ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})


class GraphBuilder(Observer):
    """Builds the module graph (and, with ``detail=True``, the operator graph) of one forward pass.

    ``depth`` folds module-graph nodes into their ancestor module at that depth (``None``: every
    layer); ``hardware`` adds roofline time estimates. Read the graphs with :meth:`module_graph` and
    :meth:`detail_graph` once the run is over.
    """

    wants_ops = True
    wants_producers = True

    def __init__(self, *, depth: int | None = None, hardware: Hardware | None = None, detail: bool = True) -> None:
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise InvalidInputError(f"a graph's depth must be a whole number of 0 or more, got {depth!r}")
        self.depth = depth
        self.hardware = hardware
        self.detail = detail
        self.modules = _Level("module")
        self.ops = _Level("detail")
        self.eager = False
        self.has_children: dict[str, bool] = {}
        self.types: dict[str, str] = {}
        self.seen_params: set[int] = set()
        self.detail_params: set[str] = set()
        self.param_names: set[str] = set()
        self.param_alias: WeakIdKeyDictionary = WeakIdKeyDictionary()  # a view of a parameter -> (name, numel)
        self.anonymous: dict[str, int] = {}
        self.forward = True

    # ---- run events --------------------------------------------------------------------------------
    def started(self, ctx: RunContext) -> None:
        self.eager = ctx.graph_module is None
        root = ctx.graph_module if ctx.graph_module is not None else ctx.model
        self.param_names = {name for name, _ in root.named_parameters(remove_duplicate=False)}
        for path, m in ctx.model.named_modules(remove_duplicate=False):
            self.has_children[path] = next(m.children(), None) is not None
            self.types[path] = type(m).__name__
        args, kwargs = ctx.inputs
        named: list[tuple[str, torch.Tensor]] = []
        arg_tensors = [_tensors(a) for a in args]
        single = sum(len(ts) for ts in arg_tensors) == 1 and not kwargs
        for i, ts in enumerate(arg_tensors):
            for j, t in enumerate(ts):
                name = "input" if single else f"input_{i}" + (f".{j}" if len(ts) > 1 else "")
                named.append((name, t))
        for key, value in kwargs.items():
            ts = _tensors(value)
            named += [(key if len(ts) == 1 else f"{key}.{j}", t) for j, t in enumerate(ts)]
        for name, t in named:
            for level in (self.modules, self.ops):
                acc = level.node(("input", name), name, "input", "input", None)
                acc.node.output_shapes = (tuple(int(s) for s in t.shape),)
                acc.node.bytes_written = t.numel() * t.element_size()
                level.produce(("input", name), t)

    def phase_started(self, phase: str) -> None:
        self.forward = phase is Phase.FORWARD

    def layer_left(self, layer: Layer, output: Any) -> None:
        if not self.forward:
            return
        outs = _tensors(output)
        fold = self._fold(layer.module)
        if fold is not None and fold == layer.name and fold in self.modules.accs and outs:
            self.modules.accs[fold].node.output_shapes = tuple(tuple(int(s) for s in t.shape) for t in outs)
        if not self._is_node_layer(layer):
            return
        if not outs:
            return
        key = self._layer_key(layer)
        acc = self._module_node(key, layer)
        if acc.node.output_shapes == () and key == layer.name:
            acc.node.output_shapes = tuple(tuple(int(s) for s in t.shape) for t in outs)
        for t in outs:
            origins = self.modules.owner.get(t, ())
            if not origins or any(src != key for src, _ in origins):
                self.modules.consume(key, t)  # a layer that hands a tensor on consumed it
                self.modules.produce(key, t)

    def op(self, event: OpEvent) -> None:
        if event.phase is not Phase.FORWARD:
            return
        through = passes_through(event.func, event.out)
        ins = _tensors((event.args, event.kwargs))
        outs = _tensors(event.out)
        record = None
        if not through:  # the op recorder's own reduction, so a node costs what the profile's row does
            record = op_record(op_call(event))
        self._module_op(event, through, ins, outs, record)
        if self.detail:
            self._detail_op(event, through, ins, outs, record)

    # ---- module graph ------------------------------------------------------------------------------
    def _is_node_layer(self, layer: Layer) -> bool:
        """A layer that is a module-graph node itself: any FX node, or a leaf module in the eager capture."""
        return not self.eager or not self.has_children.get(layer.module or "", True)

    def _fold(self, module: str | None) -> str | None:
        """``module``'s ancestor at ``depth``, counting levels through plain containers (a ``ModuleList``
        or ``ModuleDict`` has no forward of its own): ``layers.1.mlp`` at depth 1 is ``layers.1``."""
        if self.depth is None or module is None or self.depth <= 0:
            return None
        parts, level = module.split("."), 0
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if self.types.get(prefix) not in _CONTAINERS:
                level += 1
            if level == self.depth:
                return prefix
        return None

    def _layer_key(self, layer: Layer) -> str:
        return self._fold(layer.module) or layer.name

    def _module_node(self, key: str, layer: Layer | None) -> _Acc:
        folded = layer is not None and key != layer.name
        if folded:
            acc = self.modules.node(key, key, "module", self.types.get(key, "Module"), key)
        else:
            type_ = layer.type if layer is not None else "-"
            acc = self.modules.node(key, key, "module", type_, layer.module if layer is not None else None)
        if layer is not None:
            for p in layer.params:
                if id(p) not in self.seen_params:
                    self.seen_params.add(id(p))
                    acc.node.params += p.numel()
        return acc

    def _module_op(self, event: OpEvent, through: bool, ins: list[torch.Tensor], outs: list[torch.Tensor], record: Any) -> None:
        layer = event.layer
        if layer is not None and self._is_node_layer(layer):
            key = self._layer_key(layer)
            acc = self._module_node(key, layer)
        elif through:
            # a view or query run directly by a module with children: not a node, its output keeps its origin
            origins = tuple(o for t in ins for o in self.modules.owner.get(t, ()))
            for t in outs:
                if origins and t not in self.modules.owner:
                    self.modules.owner[t] = origins
            return
        else:
            module = layer.module if layer is not None else None
            short = called_op(op_name(event.func).rpartition(".")[2])  # flex_attention (an operator, no packet) too
            base = ".".join(filter(None, [module, short]))
            n = self.anonymous.get(base, 0)
            self.anonymous[base] = n + 1
            name = base if n == 0 else f"{base}_{n}"
            key = self._fold(module) or name
            if key == name:
                acc = self.modules.node(key, name, "module", short, module)
                acc.node.output_shapes = tuple(tuple(int(s) for s in t.shape) for t in outs)  # the op's own output
            else:
                acc = self.modules.node(key, key, "module", self.types.get(key, "Module"), key)
            if layer is not None:
                for p in layer.params:
                    if id(p) not in self.seen_params:
                        self.seen_params.add(id(p))
                        acc.node.params += p.numel()
        for t in ins:
            self.modules.consume(key, t)
        for t in outs:
            self.modules.produce(key, t)
        if record is not None:
            self._add_cost(acc, record, outs)

    # ---- detail graph ------------------------------------------------------------------------------
    def _param_of(self, t: torch.Tensor, producer: Any) -> tuple[str, int] | None:
        if producer is not None and producer.kind == "state" and producer.name in self.param_names:
            return producer.name, t.numel()
        return cast("tuple[str, int] | None", self.param_alias.get(t))

    def _detail_op(self, event: OpEvent, through: bool, ins: list[torch.Tensor], outs: list[torch.Tensor], record: Any) -> None:
        producers = event.producers or (None,) * len(ins)
        params = [self._param_of(t, p) for t, p in zip(ins, producers, strict=True)]
        if through:
            for param in params:  # the transposed weight of a linear layer is still that layer's weight
                if param is not None:
                    for t in outs:
                        self.param_alias[t] = param
            origins = tuple(dict.fromkeys(o for t in ins for o in self.ops.owner.get(t, ())))
            for t in outs:
                if origins and not any(t is i for i in ins):
                    self.ops.owner[t] = origins
            return
        layer = event.layer
        short = called_op(op_name(event.func)).removeprefix("aten.")
        base = f"{layer.name}:{short}" if layer is not None else short
        n = self.anonymous.get(base, 0)
        self.anonymous[base] = n + 1
        name = base if n == 0 else f"{base}_{n}"
        key = ("op", event.index)
        acc = self.ops.node(key, name, "op", called_op(op_name(event.func)), layer.module if layer is not None else None)
        acc.node.output_shapes = tuple(tuple(int(s) for s in t.shape) for t in outs)
        for param in params:
            if param is not None and param[0] not in self.detail_params:
                self.detail_params.add(param[0])
                acc.node.params += param[1]
        for t, producer, param in zip(ins, producers, params, strict=True):
            if t not in self.ops.owner and param is None and (producer is None or producer.kind != "state"):
                self._constant(t)
            self.ops.consume(key, t)
        for t in outs:
            self.ops.produce(key, t)
        self._add_cost(acc, record, outs)

    def _constant(self, t: torch.Tensor) -> None:
        """A tensor made inside the forward from Python values (``torch.tensor(scale)``, ``as_tensor(mean)``)
        comes from one source node, ``(constants)``, as the graph inputs come from theirs: scalar
        computations on constants (read back with ``.item()``) then hang off it rather than float alone."""
        acc = self.ops.node(("input", "(constants)"), "(constants)", "input", "constant", None)
        acc.node.bytes_written += t.numel() * t.element_size()
        self.ops.produce(("input", "(constants)"), t)

    # ---- costs -------------------------------------------------------------------------------------
    @staticmethod
    def _add_cost(acc: _Acc, record: Any, outs: list[torch.Tensor]) -> None:
        n = acc.node
        n.ops += 1
        n.macs += record.cost.macs
        n.flops += record.cost.flops
        n.bytes_read += record.cost.bytes_read
        n.bytes_written += record.cost.bytes_written
        if record.status is OpStatus.UNSUPPORTED and record.op not in n.unsupported:
            n.unsupported = (*n.unsupported, record.op)
        floating = [t for t in outs if t.is_floating_point()]
        if floating and n.ops == 1:
            acc.dtype = _dtype_name(floating[0].dtype)

    # ---- results -----------------------------------------------------------------------------------
    def module_graph(self, model_name: str = "model") -> Graph:
        """The module graph of the run."""
        return self.modules.graph(model_name, self.depth, self.hardware)

    def detail_graph(self, model_name: str = "model") -> Graph | None:
        """The operator graph of the run (``None`` when built with ``detail=False``)."""
        return self.ops.graph(model_name, None, self.hardware) if self.detail else None
