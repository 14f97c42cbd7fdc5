"""Seed 004's ``src/profiling/runtime.py`` (Runtime profiling), as the seed lays it out; the names are :mod:`graphprof.compat.seed004`'s."""

from graphprof.compat.seed004 import *  # noqa: F403 - this module's names (below) among the seed's whole API

__all__ = [
    "RuntimeProfiler",
    "RuntimeStats",
    "benchmark_function",
    "profile_forward",
    "profile_backward",
    "profile_training_step",
    "profile_pe_computation",
]
