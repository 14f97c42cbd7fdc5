"""Seed 004's ``src/profiling/memory.py`` (Memory profiling), as the seed lays it out; the names are :mod:`graphprof.compat.seed004`'s."""

from graphprof.compat.seed004 import *  # noqa: F403 - this module's names (below) among the seed's whole API

__all__ = [
    "MemoryProfiler",
    "MemoryStats",
    "reset_memory_stats",
    "get_peak_memory",
    "profile_memory_usage",
    "get_memory_breakdown",
    "estimate_attention_memory",
    "estimate_pe_storage",
]
