"""Seed 004's ``src/profiling/flops.py`` (FLOPs estimation): ``from graphprof.seed004.flops import ...``.

The names are :mod:`graphprof.compat.seed004`'s (also importable from :mod:`graphprof.seed004`); this
module only lays them out as the seed's package does.
"""

from __future__ import annotations

from graphprof.compat.seed004 import (
    FLOPsEstimate,
    FLOPsEstimator,
    estimate_attention_flops,
    estimate_ffn_flops,
    estimate_linear_flops,
    estimate_model_flops,
    estimate_mpnn_flops,
    estimate_pe_flops,
)

__all__ = ["FLOPsEstimator", "FLOPsEstimate", "estimate_model_flops", "estimate_linear_flops", "estimate_attention_flops", "estimate_mpnn_flops", "estimate_ffn_flops", "estimate_pe_flops"]
