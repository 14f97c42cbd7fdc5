"""Names that moved, and where to: one line for a user following an older README, not a bare error.

graphprof's top level once held seed 004's whole API and a few helpers; the seeds' APIs now live at
the edge (:mod:`graphprof.seed004`, :mod:`graphprof.compat`) and the helpers in their floors. The
package's front door (:mod:`graphprof`) asks :func:`moved_error` for a name it no longer holds, and the
native :class:`~graphprof.graph.model.Graph` for ``stats()``, which printed and now lives in
:mod:`graphprof.compat.seed000`. Data only (``tests/seeds/test_seed004.py`` checks that every name
is importable where this table says it is).

>>> str(moved_error("RuntimeProfiler"))
'graphprof.RuntimeProfiler moved: from graphprof.seed004 import RuntimeProfiler (seed 004\\'s API lives at graphprof.seed004)'
"""

from __future__ import annotations

__all__ = ["MOVED", "MovedNameError", "moved_error", "GRAPH_STATS_MOVED"]

_SEED004 = "graphprof.seed004"
_SEED004_NAMES = (
    "RuntimeProfiler", "MemoryProfiler", "RuntimeStats", "MemoryStats", "ProfilingContext", "benchmark_function",
    "profile_forward", "profile_backward", "profile_training_step", "get_memory_breakdown", "reset_memory_stats",
    "get_peak_memory", "profile_memory_usage", "set_seed", "FLOPsEstimator", "FLOPsEstimate", "estimate_model_flops",
    "estimate_linear_flops", "estimate_attention_flops", "estimate_mpnn_flops", "estimate_ffn_flops",
    "estimate_pe_flops", "estimate_attention_memory", "estimate_pe_storage", "profile_pe_computation",
    "run_node_scaling", "run_layer_scaling", "run_pe_scaling", "generate_scaling_graphs", "ScalingExperiment",
    "GraphScalingResult", "profile_report", "build_graph_model", "random_graph", "load_graph",
    "compare_graph_model", "compare_estimate", "EstimateComparison", "print_comparison",
)  # fmt: skip

#: a name the top level of graphprof once held -> the module that holds it now
MOVED: dict[str, str] = {
    **dict.fromkeys(_SEED004_NAMES, _SEED004),
    "Mode": "graphprof.base.choices",
    "Capture": "graphprof.base.choices",
    "parse_dtype": "graphprof.base.options",
    "parse_shape": "graphprof.base.options",
    "custom_hardware": "graphprof.devices.hardware",
    "resolve_hardware": "graphprof.devices.hardware",
    "DEFAULT_THRESHOLD": "graphprof.cost.bounds",
}

#: why ``Graph.stats()`` is gone from the native graph, and where it went
GRAPH_STATS_MOVED = (
    "Graph.stats() moved: the native graph prints nothing (print(graph.stats_text()) for its lines, "
    "graph.summary() for the figures); from graphprof.compat.seed000 import Profiler, whose graphs' "
    "stats() print as the edge profiler's did"
)


class MovedNameError(ImportError):
    """A name asked of ``graphprof`` that moved: the message says where (an ``ImportError``, so that
    ``from graphprof import X`` shows it as written rather than Python's generic message)."""


def moved_error(name: str) -> MovedNameError | None:
    """The error for ``graphprof.<name>``, naming where it lives now; ``None`` for a name that never moved."""
    where = MOVED.get(name)
    if where is None:
        return None
    why = " (seed 004's API lives at graphprof.seed004)" if where == _SEED004 else ""
    return MovedNameError(f"graphprof.{name} moved: from {where} import {name}{why}", name=name, path=None)
