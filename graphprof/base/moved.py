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

import dis
from types import FrameType

__all__ = ["MOVED", "MovedAttributeError", "MovedNameError", "asked_by_import", "moved_error", "GRAPH_STATS_MOVED"]

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
    """``from graphprof import X`` of a name that moved: the message says where (an ``ImportError``: Python
    would swap an ``AttributeError`` there for its generic "cannot import name")."""


class MovedAttributeError(AttributeError):
    """``graphprof.X`` of a name that moved, the same message: an ``AttributeError``, so that ``hasattr``
    answers ``False`` and ``getattr(graphprof, X, default)`` gives the default.

    One class cannot be both: CPython refuses a subclass of ``ImportError`` and ``AttributeError``
    ("multiple bases have instance lay-out conflict"), so :func:`moved_error` picks by how it was asked."""


def moved_error(name: str, *, importing: bool = True) -> MovedNameError | MovedAttributeError | None:
    """The error for ``graphprof.<name>``, naming where it lives now: a :class:`MovedNameError` for an
    import (``importing``), else a :class:`MovedAttributeError`; ``None`` for a name that never moved."""
    where = MOVED.get(name)
    if where is None:
        return None
    why = " (seed 004's API lives at graphprof.seed004)" if where == _SEED004 else ""
    message = f"graphprof.{name} moved: from {where} import {name}{why}"
    return MovedNameError(message, name=name, path=None) if importing else MovedAttributeError(message, name=name)


def asked_by_import(frame: FrameType | None) -> bool:
    """Whether ``frame`` (the caller of a module's ``__getattr__``) is running ``from module import name``:
    its current instruction is ``IMPORT_FROM``. ``hasattr``, ``getattr`` and ``module.name`` are not."""
    return frame is not None and frame.f_code.co_code[frame.f_lasti] == dis.opmap["IMPORT_FROM"]
