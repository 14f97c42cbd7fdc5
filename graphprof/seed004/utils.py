"""Seed 004's ``src/profiling/utils.py`` (Utilities), as the seed lays it out; the names are :mod:`graphprof.compat.seed004`'s."""

from graphprof.compat.seed004 import *  # noqa: F403 - this module's names (below) among the seed's whole API

__all__ = ["ProfilingContext", "set_seed", "profile_report", "build_graph_model", "random_graph", "load_graph"]  # noqa: F405 - defined by the import above
