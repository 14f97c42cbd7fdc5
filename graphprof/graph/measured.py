"""Measured times on the nodes of the module and operator graphs: :func:`with_measured_times`.

A measurement (:meth:`graphprof.PreparedModel.measure`) gives each layer its *self* time (the ops it ran
itself, not those of the layers inside it) and each aten op its times within its layer
(``graphprof.measure.layers``). A module-graph node gets:

* a module call (``layer1.0.relu``, ``layer1.0.relu_1``: two calls of one module): that module's self
  time, shared equally among its calls;
* a function a module runs itself (the residual ``layer1.0.add``, whose ``module`` is ``layer1.0``): the
  self time of that aten op (``aten::add``) within that module, shared equally among the nodes of that
  op there. The module's own Python (and the run loop's) between its children is no node's time;
* a node folded at a ``depth``: the self times of every layer folded into it.

The node times therefore sum to a little less than the measured forward.

An operator-graph node (``conv1:convolution``, an op the dry run's dispatch mode saw) gets the inclusive
time of the calls of that op that a dispatch mode would have seen in the real run, in the same layer:
``aten::convolution`` with the ``aten::mkldnn_convolution`` below it, not the ``aten::conv2d`` above it
(:attr:`graphprof.measure.OpTime.dispatched_time_us`), shared equally among the nodes of that op there.
A node whose op the real run did not dispatch in that layer (a different decomposition) gets none.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from graphprof.base.names import functional_op
from graphprof.graph.model import Graph, GraphNode

__all__ = ["with_measured_times"]

#: The name :mod:`graphprof.measure` gives the model's own code (outside every child layer).
_MODEL = "(model)"


def _fold(layer: str) -> str | None:
    """The ``module`` key of the nodes that take the time of ``layer``'s own ops (``None``: top-level nodes)."""
    return None if layer == _MODEL else layer


def _owner(layer: str, folds: set[str]) -> str | None:
    """The node folded at a depth that holds ``layer``: the longest dotted prefix of its name that names a
    node built for a whole module (``layers.0`` holds ``layers.0.mlp.up_proj``; ``layer1`` holds
    ``layer1.0.add``). The graph builder folds through containers (``ModuleList``), so its names, not a
    count of dots, decide. ``None``: a layer no fold holds (the model's own code)."""
    parts = layer.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in folds:
            return prefix
    return None


def with_measured_times(graph: Graph, measurement: Any) -> Graph:
    """A copy of ``graph`` (module or operator graph) whose nodes carry ``measured_ms`` from ``measurement``
    (see above): a :class:`graphprof.measure.Measurement`; kernel time on a GPU, host time on the CPU."""
    by_module: dict[str | None, list[GraphNode]] = defaultdict(list)
    for node in graph.nodes:
        if node.kind in ("module", "op"):
            by_module[node.module].append(node)  # a node folded at a depth has its fold as its module
    measured: dict[int, float] = defaultdict(float)

    def share(nodes: list[GraphNode], us: float) -> None:
        for node in nodes:
            measured[node.id] += us / 1e3 / len(nodes)

    if graph.level != "module":  # the operator graph: each dispatched op's inclusive time in its layer
        for op in measurement.ops:
            if op.dispatched_calls:
                kind = functional_op(op.op.removeprefix("aten::"))
                nodes = [n for n in by_module.get(_fold(op.layer), []) if functional_op(n.type.removeprefix("aten.")) == kind]
                share(nodes, op.dispatched_time_us)
        return _with(graph, measured)

    folds = {n.name for n in graph.nodes if n.kind == "module" and n.name == n.module} if graph.depth is not None else set()
    unfolded: set[str] = set()  # layers whose own ops go to the function nodes of their module
    for layer in measurement.layers:
        owner = _owner(layer.name, folds)
        if owner is not None:
            share([n for n in by_module[owner] if n.name == owner], layer.time_us)  # the whole module's time
        else:
            unfolded.add(layer.name)
            share([n for n in by_module.get(_fold(layer.name), []) if n.type == layer.type], layer.time_us)
    for op in measurement.ops:  # functions run by a module itself: their own aten op's time there
        if op.layer in unfolded:
            kind = functional_op(op.op.removeprefix("aten::"))  # `out += x` runs aten::add_ where the graph has add
            nodes = [n for n in by_module.get(_fold(op.layer), []) if functional_op(n.type) == kind]
            share(nodes, op.kernel_us if op.kernel_us is not None else op.cpu_us)
    return _with(graph, measured)


def _with(graph: Graph, measured: dict[int, float]) -> Graph:
    nodes = [dataclasses.replace(n, measured_ms=measured[n.id]) if n.id in measured else n for n in graph.nodes]
    return dataclasses.replace(graph, nodes=nodes)
