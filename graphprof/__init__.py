"""graphprof: what a PyTorch model costs, per layer and per aten op, before and while it runs.

Public API::

    import graphprof
    p = graphprof.profile_model("resnet18")
    p.total_params, p.total_macs, p.total_flops, p.capture_method, p.to_dict()

    pm = graphprof.prepare("yolov8n")                  # resolve, warm up, capture: once
    [pm.profile(batch_size=b) for b in (1, 2, 4, 8)]   # each a dry run on the same capture

The names below are imported on first use, so ``import graphprof.errors`` (what the command line needs
to answer ``--help`` and ``--version``) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "profile_model": "graphprof.profile",
    "compare_models": "graphprof.profile",
    "ModelOutcome": "graphprof.profile",
    "prepare": "graphprof.prepared",
    "PreparedModel": "graphprof.prepared",
    "Profile": "graphprof.result",
    "LayerRow": "graphprof.result",
    "ModuleRow": "graphprof.result",
    "OpRecord": "graphprof.result",
    "UnsupportedOp": "graphprof.result",
    "InputSpec": "graphprof.inputs",
    "Cost": "graphprof.formulas",
    "TensorMeta": "graphprof.formulas",
    "register_formula": "graphprof.formulas",
    "Mode": "graphprof.options",
    "parse_dtype": "graphprof.options",
    "parse_shape": "graphprof.options",
    "Capture": "graphprof.capture",
    "Observer": "graphprof.runloop",
    "Hardware": "graphprof.hardware",
    "get_hardware": "graphprof.hardware",
    "list_hardware": "graphprof.hardware",
    "resolve_hardware": "graphprof.hardware",
    "custom_hardware": "graphprof.hardware",
    "Roofline": "graphprof.roofline",
    "Bound": "graphprof.roofline",
    "classify": "graphprof.roofline",
    "DEFAULT_THRESHOLD": "graphprof.roofline",
    "GraphprofError": "graphprof.errors",
    "sweep": "graphprof.scaling",
    "Sweep": "graphprof.scaling",
    "ScalingExperiment": "graphprof.printing",
    "Profiler": "graphprof.graph",
    "Graph": "graphprof.graph",
    "Measurement": "graphprof.measure",
    "MemoryStats": "graphprof.measure",
    "ProfilingContext": "graphprof.measure",
    "RuntimeStats": "graphprof.measure",
    "benchmark_function": "graphprof.measure",
    "capture_model": "graphprof.measure",
    "get_memory_breakdown": "graphprof.measure",
    "parse_model_trace": "graphprof.measure",
    "profile_backward": "graphprof.measure",
    "profile_forward": "graphprof.measure",
    "profile_training_step": "graphprof.measure",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'graphprof' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from graphprof.capture import Capture  # noqa: F401
    from graphprof.errors import GraphprofError  # noqa: F401
    from graphprof.formulas import Cost, TensorMeta, register_formula  # noqa: F401
    from graphprof.graph import Graph, Profiler  # noqa: F401
    from graphprof.hardware import Hardware, custom_hardware, get_hardware, list_hardware, resolve_hardware  # noqa: F401
    from graphprof.inputs import InputSpec  # noqa: F401
    from graphprof.measure import (  # noqa: F401
        Measurement,
        MemoryStats,
        ProfilingContext,
        RuntimeStats,
        benchmark_function,
        capture_model,
        get_memory_breakdown,
        parse_model_trace,
        profile_backward,
        profile_forward,
        profile_training_step,
    )
    from graphprof.options import Mode, parse_dtype, parse_shape  # noqa: F401
    from graphprof.prepared import PreparedModel, prepare  # noqa: F401
    from graphprof.printing import ScalingExperiment  # noqa: F401
    from graphprof.profile import ModelOutcome, compare_models, profile_model  # noqa: F401
    from graphprof.result import LayerRow, ModuleRow, OpRecord, Profile, UnsupportedOp  # noqa: F401
    from graphprof.roofline import DEFAULT_THRESHOLD, Bound, Roofline, classify  # noqa: F401
    from graphprof.runloop import Observer  # noqa: F401
    from graphprof.scaling import Sweep, sweep  # noqa: F401
