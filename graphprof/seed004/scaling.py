"""Seed 004's ``src/profiling/scaling.py`` (Scaling experiments): ``from graphprof.seed004.scaling import ...``.

The names are :mod:`graphprof.compat.seed004`'s (also importable from :mod:`graphprof.seed004`); this
module only lays them out as the seed's package does.
"""

from __future__ import annotations

from graphprof.compat.seed004 import (
    GraphScalingResult,
    ScalingExperiment,
    generate_scaling_graphs,
    run_layer_scaling,
    run_node_scaling,
    run_pe_scaling,
)

__all__ = ["ScalingExperiment", "GraphScalingResult", "run_node_scaling", "run_layer_scaling", "run_pe_scaling", "generate_scaling_graphs"]
