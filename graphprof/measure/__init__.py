"""Measurement: real runs beside every estimate (model-level times, per-layer and per-op times, memory, traces).

The dry run needs no device; everything here runs the model for real. Entry points:
``PreparedModel.measure(...)`` (-> :class:`Measurement`), seed 004's helpers (:func:`profile_forward`,
:func:`profile_backward`, :func:`profile_training_step`, :func:`benchmark_function`,
:func:`get_memory_breakdown`, :class:`ProfilingContext`) and seed 003's traces
(:func:`capture_model`, :func:`parse_model_trace`).
"""

from __future__ import annotations

from graphprof.devices.local import Host
from graphprof.errors import MeasurementError
from graphprof.measure.layers import RANGE_PREFIX, LayerRanges, attribute
from graphprof.measure.memory import get_memory_breakdown, memory_stats
from graphprof.measure.result import LayerTime, MeasuredMemory, Measurement, MemoryBreakdown, MemoryStats, OpTime
from graphprof.measure.run import MeasureOptions, measure_run
from graphprof.measure.timing import (
    ProfilingContext,
    RuntimeStats,
    benchmark_function,
    profile_backward,
    profile_forward,
    profile_training_step,
)
from graphprof.measure.trace import capture_model, parse_model_trace

__all__ = [
    "Measurement",
    "LayerTime",
    "OpTime",
    "MeasuredMemory",
    "MemoryStats",
    "MemoryBreakdown",
    "Host",
    "RuntimeStats",
    "MeasurementError",
    "MeasureOptions",
    "measure_run",
    "benchmark_function",
    "profile_forward",
    "profile_backward",
    "profile_training_step",
    "get_memory_breakdown",
    "memory_stats",
    "ProfilingContext",
    "capture_model",
    "parse_model_trace",
    "LayerRanges",
    "attribute",
    "RANGE_PREFIX",
]
