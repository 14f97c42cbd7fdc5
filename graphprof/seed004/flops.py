"""Seed 004's ``src/profiling/flops.py`` (FLOPs estimation), as the seed lays it out; the names are :mod:`graphprof.compat.seed004`'s."""

from graphprof.compat.seed004 import *  # noqa: F403 - this module's names (below) among the seed's whole API

__all__ = [
    "FLOPsEstimator",
    "FLOPsEstimate",
    "estimate_model_flops",
    "estimate_linear_flops",
    "estimate_attention_flops",
    "estimate_mpnn_flops",
    "estimate_ffn_flops",
    "estimate_pe_flops",
]
