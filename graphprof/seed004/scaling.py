"""Seed 004's ``src/profiling/scaling.py`` (Scaling experiments), as the seed lays it out; the names are :mod:`graphprof.compat.seed004`'s."""

from graphprof.compat.seed004 import *  # noqa: F403 - this module's names (below) among the seed's whole API

__all__ = ["ScalingExperiment", "GraphScalingResult", "run_node_scaling", "run_layer_scaling", "run_pe_scaling", "generate_scaling_graphs"]
