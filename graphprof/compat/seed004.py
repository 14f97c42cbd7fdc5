"""Seed 004's whole API (a profiling framework for graph transformers), importable from one place.

Replace ``from src.profiling import ...`` with ``from graphprof.seed004 import ...``: the same names,
signatures and units (ms, MB). ``graphprof.seed004`` is this module; the core never imports it. What graphprof adds:
``pyg:`` models to profile (:func:`build_graph_model`), the real count of every op beside the seed's
estimates (:func:`compare_graph_model`), and growth fits per component of every scaling result.

This module sits at the edge (:mod:`graphprof.compat`), above the library and the renderers: its
:class:`ScalingExperiment` prints in ``print_summary()``, as the seed's does, and so does
:func:`print_comparison`; nothing else here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from graphprof.compat.scaling import ScalingExperiment as _SweepExperiment
from graphprof.compat.seed004_profiling import (
    MemoryProfiler,
    RuntimeProfiler,
    estimate_attention_memory,
    estimate_pe_storage,
    generate_scaling_graphs,
    get_peak_memory,
    profile_memory_usage,
    profile_pe_computation,
    profile_report,
    reset_memory_stats,
    run_layer_scaling,
    run_node_scaling,
    run_pe_scaling,
    set_seed,
)
from graphprof.gnn.compare import EstimateComparison, compare_estimate, compare_graph_model
from graphprof.gnn.datasets import load_graph
from graphprof.gnn.estimate import (
    FLOPsEstimate,
    FLOPsEstimator,
    estimate_attention_flops,
    estimate_ffn_flops,
    estimate_linear_flops,
    estimate_model_flops,
    estimate_mpnn_flops,
    estimate_pe_flops,
)
from graphprof.gnn.scaling import GraphScalingResult, run_graph_scaling
from graphprof.measure import (
    MemoryStats,
    ProfilingContext,
    RuntimeStats,
    benchmark_function,
    get_memory_breakdown,
    profile_backward,
    profile_forward,
    profile_training_step,
)
from graphprof.models.graphs import random_graph
from graphprof.models.pyg import build_graph_model
from graphprof.render.graph_models import render_comparison, render_graph_scaling
from graphprof.scaling.result import Sweep

__all__ = [
    "RuntimeProfiler", "MemoryProfiler", "RuntimeStats", "MemoryStats", "ProfilingContext",
    "benchmark_function", "profile_forward", "profile_backward", "profile_training_step",
    "get_memory_breakdown", "reset_memory_stats", "get_peak_memory", "profile_memory_usage", "set_seed",
    "FLOPsEstimator", "FLOPsEstimate", "estimate_model_flops", "estimate_linear_flops", "estimate_attention_flops",
    "estimate_mpnn_flops", "estimate_ffn_flops", "estimate_pe_flops",
    "estimate_attention_memory", "estimate_pe_storage", "profile_pe_computation",
    "run_node_scaling", "run_layer_scaling", "run_pe_scaling", "generate_scaling_graphs", "ScalingExperiment",
    "GraphScalingResult", "profile_report", "build_graph_model", "random_graph", "load_graph",
    "compare_graph_model", "compare_estimate", "EstimateComparison", "print_comparison",
]  # fmt: skip


def print_comparison(comparison: EstimateComparison) -> None:
    """Print the seed's estimate beside graphprof's count, per component, with Rich."""
    from rich.console import Console

    Console().print(render_comparison(comparison))


def _print_any(result: Sweep | GraphScalingResult) -> None:
    from rich.console import Console

    from graphprof.render.sweep import render_sweep

    Console().print(render_graph_scaling(result) if isinstance(result, GraphScalingResult) else render_sweep(result))


class ScalingExperiment(_SweepExperiment):
    """Seed 004's scaling experiment over ``model_factory(**kwargs)``: node, layer and PE scaling on
    synthetic graphs, plus every sweep of :class:`graphprof.compat.scaling.ScalingExperiment` (``run(name, values)``).

    Node and layer scaling build a graph at each point (``avg_degree``, ``num_nodes``, the model's
    feature width) and, with ``measure`` (the default, as the seed), time the forward on the CPU. Given
    ``input_shape`` or ``example_inputs``, it is :class:`graphprof.compat.scaling.ScalingExperiment` for any model.

    >>> exp = ScalingExperiment(lambda **kw: build_graph_model("gps", **kw), "cpu")   # doctest: +SKIP
    >>> exp.run_node_scaling(); exp.run_layer_scaling(); exp.print_summary()         # doctest: +SKIP
    """

    def __init__(
        self,
        model_factory: Callable[..., nn.Module],
        device: str | torch.device | None = None,
        *,
        avg_degree: float = 5.0,
        num_nodes: int = 500,
        measure: bool = True,
        num_runs: int = 10,
        **options: Any,
    ) -> None:
        super().__init__(model_factory, device, **options)
        self.graph_options: dict[str, Any] = {"avg_degree": avg_degree, "num_nodes": num_nodes, "measure": measure, "num_runs": num_runs}
        self.graph_results: dict[str, GraphScalingResult] = {}

    def run_node_scaling(self, num_nodes_list: Sequence[int] = (100, 500, 1000, 2000)) -> GraphScalingResult:
        options = {k: v for k, v in self.graph_options.items() if k != "num_nodes"}
        result = run_graph_scaling(self.model_factory, "num_nodes", list(num_nodes_list), **options)
        self.graph_results["num_nodes"] = result
        return result

    def run_layer_scaling(self, values: Sequence[int] = (2, 4, 6, 8, 12, 16)) -> GraphScalingResult | Sweep:  # type: ignore[override]
        """Depth scaling on a graph; with inputs given (``input_shape``/``example_inputs``), the sweep of
        :class:`graphprof.compat.scaling.ScalingExperiment` (any model, not only graph ones)."""
        if any(self.options.get(k) is not None for k in ("input_shape", "example_inputs", "example_kwargs")):
            return super().run_layer_scaling(values)
        result = run_graph_scaling(self.model_factory, "num_layers", list(values), **self.graph_options)
        self.graph_results["num_layers"] = result
        return result

    def print_summary(self) -> None:
        """Print every result so far: graph scalings (per component, fits, mean ± std), then other sweeps."""
        for graph_result in self.graph_results.values():
            _print_any(graph_result)
        for sweep_result in self.results.values():
            _print_any(sweep_result)
