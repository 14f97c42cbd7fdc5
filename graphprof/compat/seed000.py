"""Seed 000's ``Profiler`` (the edge profiler): :class:`graphprof.Profiler`, whose graphs' ``stats()`` print.

The native :class:`graphprof.Profiler` returns :class:`~graphprof.graph.model.Graph` records, which print
nothing (``graph.summary()`` returns the figures, ``graph.stats_text()`` the lines). The edge profiler's
``graph.stats()`` prints its stats section to standard output; this module's :class:`Profiler` returns
:class:`SeedGraph`, the same record with that method.

>>> from graphprof.compat.seed000 import Profiler          # in place of: from utils.profiler import Profiler
>>> prof = Profiler(model, granularity="layer", auto_profile=False)   # doctest: +SKIP
>>> prof.profile_once(x).stats()                                       # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from graphprof.graph.model import Graph
from graphprof.profiler import Profiler as _NativeProfiler

__all__ = ["Profiler", "SeedGraph"]


class SeedGraph(Graph):
    """A :class:`~graphprof.graph.model.Graph` with the edge profiler's printing ``stats()``."""

    @classmethod
    def of(cls, graph: Graph | None) -> SeedGraph | None:
        if graph is None or isinstance(graph, SeedGraph):
            return graph
        return cls(**{f.name: getattr(graph, f.name) for f in dataclasses.fields(graph)})

    def stats(self, *, echo: bool = True) -> dict[str, Any]:
        """Print the stats section (:meth:`stats_text`) to standard output, as the edge profiler does, and
        return :meth:`summary`; ``echo=False`` only returns it (the one switch)."""
        summary = self.summary()
        if echo:
            sys.stdout.write(self.stats_text() + "\n")
        return summary


class Profiler(_NativeProfiler):
    """:class:`graphprof.Profiler` whose ``graph`` and ``detail_graph`` are :class:`SeedGraph` records."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("graph", "detail_graph") and isinstance(value, Graph):
            value = SeedGraph.of(value)
        super().__setattr__(name, value)

    def profile_once(self, *args: Any, **kwargs: Any) -> SeedGraph:
        graph = super().profile_once(*args, **kwargs)
        assert isinstance(graph, SeedGraph)
        return graph

    def profile_detail(self, *args: Any, **kwargs: Any) -> SeedGraph:
        graph = super().profile_detail(*args, **kwargs)
        assert isinstance(graph, SeedGraph)
        return graph
