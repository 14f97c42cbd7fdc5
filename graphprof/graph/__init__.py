"""Module and operator graphs with every edge: build (an observer), the result type, exports (seed 000's ``Profiler`` is :mod:`graphprof.profiler`)."""

from __future__ import annotations

from graphprof.graph.build import GraphBuilder
from graphprof.graph.export import write_graph
from graphprof.graph.measured import with_measured_times
from graphprof.graph.model import GRAPH_SCHEMA_VERSION, Graph, GraphEdge, GraphNode

__all__ = ["GRAPH_SCHEMA_VERSION", "Graph", "GraphEdge", "GraphNode", "GraphBuilder", "with_measured_times", "write_graph"]
