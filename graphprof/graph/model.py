"""The graph result: nodes with costs, edges with the tensors they carry.

A :class:`Graph` is a pure record (built by :mod:`graphprof.graph.build`, written by
:mod:`graphprof.graph.export`): it never runs anything. Node ids are dense integers in execution order,
so an edge list reads as ``3 -> 7``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from graphprof.base.moved import GRAPH_STATS_MOVED
from graphprof.schemas import SCHEMA_VERSIONS

__all__ = ["GRAPH_SCHEMA_VERSION", "GraphNode", "GraphEdge", "Graph"]

#: Version of :meth:`Graph.to_dict`; bumped when a field changes meaning or disappears.
GRAPH_SCHEMA_VERSION = SCHEMA_VERSIONS["graph"]


@dataclass
class GraphNode:
    """One node: a graph input, a layer (module graph) or an aten op (detail graph).

    ``kind`` is ``"input"``, ``"module"`` or ``"op"``; ``module`` the dotted path of the module it
    belongs to (``None`` at top level); ``params`` the parameters it is the first to use. Costs are
    integers for the forward pass; ``estimated_ms`` is a roofline lower bound (``None`` without a
    device) and ``measured_ms`` a measured time (``None`` until something measures it).
    """

    id: int
    name: str
    kind: str
    type: str
    module: str | None = None
    params: int = 0
    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    output_shapes: tuple[tuple[int, ...], ...] = ()
    estimated_ms: float | None = None
    measured_ms: float | None = None
    ops: int = 0
    unsupported: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def time_ms(self) -> float | None:
        """The measured time when there is one, else the estimate."""
        return self.measured_ms if self.measured_ms is not None else self.estimated_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "type": self.type,
            "module": self.module,
            "params": self.params,
            "macs": self.macs,
            "flops": self.flops,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "output_shapes": [list(s) for s in self.output_shapes],
            "estimated_ms": self.estimated_ms,
            "measured_ms": self.measured_ms,
            "ops": self.ops,
            "unsupported": list(self.unsupported),
        }


@dataclass(frozen=True)
class GraphEdge:
    """A tensor produced by ``src`` and consumed by ``dst`` (node ids), with its shape, dtype and bytes."""

    src: int
    dst: int
    shape: tuple[int, ...]
    dtype: str
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "shape": list(self.shape), "dtype": self.dtype, "bytes": self.bytes}


@dataclass
class Graph:
    """Nodes and edges of one run: ``level`` is ``"module"`` or ``"detail"`` (aten ops)."""

    level: str
    model_name: str
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    depth: int | None = None
    hardware: str | None = None

    def node(self, name: str) -> GraphNode:
        """The node called ``name`` (``KeyError`` when there is none)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def incoming(self, node_id: int) -> list[GraphEdge]:
        return [e for e in self.edges if e.dst == node_id]

    def outgoing(self, node_id: int) -> list[GraphEdge]:
        return [e for e in self.edges if e.src == node_id]

    def orphans(self) -> list[GraphNode]:
        """Nodes other than inputs with no edge at all."""
        touched = {e.src for e in self.edges} | {e.dst for e in self.edges}
        return [n for n in self.nodes if n.kind != "input" and n.id not in touched]

    def components(self) -> int:
        """Number of weakly connected components."""
        parent = {n.id: n.id for n in self.nodes}

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for e in self.edges:
            parent[find(e.src)] = find(e.dst)
        return len({find(n.id) for n in self.nodes})

    def __getattr__(self, name: str) -> Any:
        """Only for names not found: ``stats`` (which printed, and moved) is one line saying where it went."""
        if name == "stats":
            raise AttributeError(GRAPH_STATS_MOVED)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def summary(self) -> dict[str, Any]:
        """Node and edge counts, and cost and time aggregates (times over the nodes that have one)."""
        by_kind: dict[str, int] = defaultdict(int)
        for n in self.nodes:
            by_kind[n.kind] += 1
        estimated = [n.estimated_ms for n in self.nodes if n.estimated_ms is not None]
        measured = [n.measured_ms for n in self.nodes if n.measured_ms is not None]

        def times(values: list[float]) -> dict[str, float] | None:
            if not values:
                return None
            return {"total": sum(values), "mean": sum(values) / len(values), "max": max(values)}

        return {
            "level": self.level,
            "nodes": len(self.nodes),
            "edges": len(self.edges),
            "nodes_by_kind": dict(by_kind),
            "params": sum(n.params for n in self.nodes),
            "macs": sum(n.macs for n in self.nodes),
            "flops": sum(n.flops for n in self.nodes),
            "edge_bytes": sum(e.bytes for e in self.edges),
            "estimated_ms": times(estimated),
            "measured_ms": times(measured),
        }

    def stats_text(self) -> str:
        """:meth:`summary` as the lines of the text export's stats section (seed 000's ``graph.stats()``
        prints them: :mod:`graphprof.compat.seed000`)."""
        s = self.summary()
        lines = [
            f"total_nodes: {s['nodes']}",
            f"total_edges: {s['edges']}",
            "nodes_by_kind: " + ", ".join(f"{k}={v}" for k, v in sorted(s["nodes_by_kind"].items())),
            f"total_params: {s['params']}",
            f"total_macs: {s['macs']}",
            f"total_flops: {s['flops']}",
            f"total_edge_bytes: {s['edge_bytes']}",
        ]
        for key in ("estimated_ms", "measured_ms"):
            t = s[key]
            if t is None:
                lines.append(f"{key}: none")
            else:
                lines.append(f"{key}: total={t['total']:.6f} mean={t['mean']:.6f} max={t['max']:.6f}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": GRAPH_SCHEMA_VERSION,
            "level": self.level,
            "model_name": self.model_name,
            "depth": self.depth,
            "hardware": self.hardware,
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
            "stats": self.summary(),
        }
