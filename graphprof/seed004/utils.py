"""Seed 004's ``src/profiling/utils.py`` (Utilities): ``from graphprof.seed004.utils import ...``.

The names are :mod:`graphprof.compat.seed004`'s (also importable from :mod:`graphprof.seed004`); this
module only lays them out as the seed's package does.
"""

from __future__ import annotations

from graphprof.compat.seed004 import (
    ProfilingContext,
    build_graph_model,
    load_graph,
    profile_report,
    random_graph,
    set_seed,
)

__all__ = ["ProfilingContext", "set_seed", "profile_report", "build_graph_model", "random_graph", "load_graph"]
