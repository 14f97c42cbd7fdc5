"""Seed 004's ``src/profiling/memory.py`` (Memory profiling): ``from graphprof.seed004.memory import ...``.

The names are :mod:`graphprof.compat.seed004`'s (also importable from :mod:`graphprof.seed004`); this
module only lays them out as the seed's package does.
"""

from __future__ import annotations

from graphprof.compat.seed004 import (
    MemoryProfiler,
    MemoryStats,
    estimate_attention_memory,
    estimate_pe_storage,
    get_memory_breakdown,
    get_peak_memory,
    profile_memory_usage,
    reset_memory_stats,
)

__all__ = ["MemoryProfiler", "MemoryStats", "reset_memory_stats", "get_peak_memory", "profile_memory_usage", "get_memory_breakdown", "estimate_attention_memory", "estimate_pe_storage"]
