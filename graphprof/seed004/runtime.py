"""Seed 004's ``src/profiling/runtime.py`` (Runtime profiling): ``from graphprof.seed004.runtime import ...``.

The names are :mod:`graphprof.compat.seed004`'s (also importable from :mod:`graphprof.seed004`); this
module only lays them out as the seed's package does.
"""

from __future__ import annotations

from graphprof.compat.seed004 import (
    RuntimeProfiler,
    RuntimeStats,
    benchmark_function,
    profile_backward,
    profile_forward,
    profile_pe_computation,
    profile_training_step,
)

__all__ = ["RuntimeProfiler", "RuntimeStats", "benchmark_function", "profile_forward", "profile_backward", "profile_training_step", "profile_pe_computation"]
