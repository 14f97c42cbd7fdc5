"""graphprof: what a PyTorch model costs, per layer and per aten op, before and while it runs.

Public API::

    import graphprof
    p = graphprof.profile_model("resnet18")
    p.total_params, p.total_macs, p.total_flops, p.capture_method, p.to_dict()

    pm = graphprof.prepare("yolov8n")                  # resolve, warm up, capture: once
    [pm.profile(batch_size=b) for b in (1, 2, 4, 8)]   # each a dry run on the same capture

The names in ``__all__`` are imported on first use, so ``import graphprof.errors`` (what the command
line needs to answer ``--help`` and ``--version``) does not import torch; a type checker reads them
from the imports under ``TYPE_CHECKING``, so a user's ``mypy --strict`` sees each with its real type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "profile_model",
    "compare_models",
    "ModelOutcome",
    "prepare",
    "PreparedModel",
    "Profile",
    "LayerRow",
    "ModuleRow",
    "OpRecord",
    "UnsupportedOp",
    "InputSpec",
    "Cost",
    "TensorMeta",
    "register_formula",
    "Mode",
    "parse_dtype",
    "parse_shape",
    "Capture",
    "Observer",
    "Hardware",
    "get_hardware",
    "list_hardware",
    "resolve_hardware",
    "custom_hardware",
    "Roofline",
    "Bound",
    "classify",
    "DEFAULT_THRESHOLD",
    "GraphprofError",
    "sweep",
    "Sweep",
    "ScalingExperiment",
    "Profiler",
    "Graph",
    "Measurement",
    "MemoryStats",
    "ProfilingContext",
    "RuntimeStats",
    "benchmark_function",
    "capture_model",
    "get_memory_breakdown",
    "parse_model_trace",
    "profile_backward",
    "profile_forward",
    "profile_training_step",
    "RuntimeProfiler",
    "MemoryProfiler",
    "reset_memory_stats",
    "get_peak_memory",
    "profile_memory_usage",
    "set_seed",
    "FLOPsEstimator",
    "FLOPsEstimate",
    "estimate_model_flops",
    "estimate_linear_flops",
    "estimate_attention_flops",
    "estimate_mpnn_flops",
    "estimate_ffn_flops",
    "estimate_pe_flops",
    "estimate_attention_memory",
    "estimate_pe_storage",
    "profile_pe_computation",
    "run_node_scaling",
    "run_layer_scaling",
    "run_pe_scaling",
    "generate_scaling_graphs",
    "GraphScalingResult",
    "profile_report",
    "build_graph_model",
    "random_graph",
    "load_graph",
    "compare_graph_model",
    "compare_estimate",
    "EstimateComparison",
    "print_comparison",
]

if TYPE_CHECKING:  # what a type checker (a user's mypy --strict, an IDE) sees: every name with its type
    from graphprof.capture import Capture as Capture
    from graphprof.errors import GraphprofError as GraphprofError
    from graphprof.formulas import Cost as Cost
    from graphprof.formulas import TensorMeta as TensorMeta
    from graphprof.formulas import register_formula as register_formula
    from graphprof.graph import Graph as Graph
    from graphprof.graph import Profiler as Profiler
    from graphprof.hardware import Hardware as Hardware
    from graphprof.hardware import custom_hardware as custom_hardware
    from graphprof.hardware import get_hardware as get_hardware
    from graphprof.hardware import list_hardware as list_hardware
    from graphprof.hardware import resolve_hardware as resolve_hardware
    from graphprof.inputs import InputSpec as InputSpec
    from graphprof.measure import Measurement as Measurement
    from graphprof.measure import MemoryStats as MemoryStats
    from graphprof.measure import ProfilingContext as ProfilingContext
    from graphprof.measure import RuntimeStats as RuntimeStats
    from graphprof.measure import benchmark_function as benchmark_function
    from graphprof.measure import capture_model as capture_model
    from graphprof.measure import get_memory_breakdown as get_memory_breakdown
    from graphprof.measure import parse_model_trace as parse_model_trace
    from graphprof.measure import profile_backward as profile_backward
    from graphprof.measure import profile_forward as profile_forward
    from graphprof.measure import profile_training_step as profile_training_step
    from graphprof.options import Mode as Mode
    from graphprof.options import parse_dtype as parse_dtype
    from graphprof.options import parse_shape as parse_shape
    from graphprof.prepared import PreparedModel as PreparedModel
    from graphprof.prepared import prepare as prepare
    from graphprof.profile import ModelOutcome as ModelOutcome
    from graphprof.profile import compare_models as compare_models
    from graphprof.profile import profile_model as profile_model
    from graphprof.result import LayerRow as LayerRow
    from graphprof.result import ModuleRow as ModuleRow
    from graphprof.result import OpRecord as OpRecord
    from graphprof.result import Profile as Profile
    from graphprof.result import UnsupportedOp as UnsupportedOp
    from graphprof.roofline import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
    from graphprof.roofline import Bound as Bound
    from graphprof.roofline import Roofline as Roofline
    from graphprof.roofline import classify as classify
    from graphprof.runloop import Observer as Observer
    from graphprof.scaling import Sweep as Sweep
    from graphprof.scaling import sweep as sweep
    from graphprof.seed004 import EstimateComparison as EstimateComparison
    from graphprof.seed004 import FLOPsEstimate as FLOPsEstimate
    from graphprof.seed004 import FLOPsEstimator as FLOPsEstimator
    from graphprof.seed004 import GraphScalingResult as GraphScalingResult
    from graphprof.seed004 import MemoryProfiler as MemoryProfiler
    from graphprof.seed004 import RuntimeProfiler as RuntimeProfiler
    from graphprof.seed004 import ScalingExperiment as ScalingExperiment
    from graphprof.seed004 import build_graph_model as build_graph_model
    from graphprof.seed004 import compare_estimate as compare_estimate
    from graphprof.seed004 import compare_graph_model as compare_graph_model
    from graphprof.seed004 import estimate_attention_flops as estimate_attention_flops
    from graphprof.seed004 import estimate_attention_memory as estimate_attention_memory
    from graphprof.seed004 import estimate_ffn_flops as estimate_ffn_flops
    from graphprof.seed004 import estimate_linear_flops as estimate_linear_flops
    from graphprof.seed004 import estimate_model_flops as estimate_model_flops
    from graphprof.seed004 import estimate_mpnn_flops as estimate_mpnn_flops
    from graphprof.seed004 import estimate_pe_flops as estimate_pe_flops
    from graphprof.seed004 import estimate_pe_storage as estimate_pe_storage
    from graphprof.seed004 import generate_scaling_graphs as generate_scaling_graphs
    from graphprof.seed004 import get_peak_memory as get_peak_memory
    from graphprof.seed004 import load_graph as load_graph
    from graphprof.seed004 import print_comparison as print_comparison
    from graphprof.seed004 import profile_memory_usage as profile_memory_usage
    from graphprof.seed004 import profile_pe_computation as profile_pe_computation
    from graphprof.seed004 import profile_report as profile_report
    from graphprof.seed004 import random_graph as random_graph
    from graphprof.seed004 import reset_memory_stats as reset_memory_stats
    from graphprof.seed004 import run_layer_scaling as run_layer_scaling
    from graphprof.seed004 import run_node_scaling as run_node_scaling
    from graphprof.seed004 import run_pe_scaling as run_pe_scaling
    from graphprof.seed004 import set_seed as set_seed
else:  # what runs: each name imported from its module on first use (PEP 562)
    import importlib

    #: public name -> the module that defines it (the imports above, as data)
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
        "ScalingExperiment": "graphprof.seed004",  # graphprof.printing's, plus node/layer scaling of graph models
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
        "RuntimeProfiler": "graphprof.seed004",
        "MemoryProfiler": "graphprof.seed004",
        "reset_memory_stats": "graphprof.seed004",
        "get_peak_memory": "graphprof.seed004",
        "profile_memory_usage": "graphprof.seed004",
        "set_seed": "graphprof.seed004",
        "FLOPsEstimator": "graphprof.seed004",
        "FLOPsEstimate": "graphprof.seed004",
        "estimate_model_flops": "graphprof.seed004",
        "estimate_linear_flops": "graphprof.seed004",
        "estimate_attention_flops": "graphprof.seed004",
        "estimate_mpnn_flops": "graphprof.seed004",
        "estimate_ffn_flops": "graphprof.seed004",
        "estimate_pe_flops": "graphprof.seed004",
        "estimate_attention_memory": "graphprof.seed004",
        "estimate_pe_storage": "graphprof.seed004",
        "profile_pe_computation": "graphprof.seed004",
        "run_node_scaling": "graphprof.seed004",
        "run_layer_scaling": "graphprof.seed004",
        "run_pe_scaling": "graphprof.seed004",
        "generate_scaling_graphs": "graphprof.seed004",
        "GraphScalingResult": "graphprof.seed004",
        "profile_report": "graphprof.seed004",
        "build_graph_model": "graphprof.seed004",
        "random_graph": "graphprof.seed004",
        "load_graph": "graphprof.seed004",
        "compare_graph_model": "graphprof.seed004",
        "compare_estimate": "graphprof.seed004",
        "EstimateComparison": "graphprof.seed004",
        "print_comparison": "graphprof.seed004",
    }

    def __getattr__(name: str) -> object:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'graphprof' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(__all__)
