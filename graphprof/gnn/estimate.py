"""The seed-004 FLOPs estimators: formulas from hyperparameters, with the seed's stated assumptions.

These are *estimates* (labelled so wherever they are shown); graphprof's count of the real graph is
:func:`graphprof.gnn.components.component_costs`, and :func:`graphprof.gnn.compare.compare_estimate`
puts the two side by side. The assumptions, as the seed states them:

* a product A (m x k) @ B (k x n) is ``2 m k n`` FLOPs (biases are not counted);
* an element-wise op is 1 FLOP per element; GELU 4 per element;
* softmax ``5 N`` FLOPs per row of N scores; LayerNorm ``5 N`` per row of N features.

Per component (N nodes, E edges, d hidden, h heads, f FFN width, r the sparse attention ratio)::

    attention  QKV 6 N d^2 + scores 2 N^2 d r + softmax 5 N^2 h r + weighted sum 2 N^2 d r + output 2 N d^2
    ffn        two products 4 N d f + GELU 4 N f
    mpnn gin   sum over edges E d_in + MLP 2 N d_in d_out + 2 N d_out^2
         gcn   transform 2 N d_in d_out + normalise-and-add 2 E d_out
         gat   transform 2 N d_in d_out + node logits 4 N d_out + per edge (softmax 5 + weighted add 2 d_out)
    pe   lap   a dense symmetric eigensolver's tridiagonal reduction, 4/3 N^3 (the precompute, not the model)
         rwse  pe_dim dense random-walk powers, 2 N^3 each
    norm       two LayerNorms per layer, 2 x 5 N d

>>> estimate_attention_flops(500, 256, 8)   # 8*500*256**2 + 4*500**2*256 + 5*500**2*8 = 528,144,000
528144000
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from graphprof.errors import InvalidInputError

__all__ = [
    "FLOPsEstimate",
    "FLOPsEstimator",
    "check_sparse_ratio",
    "estimate_linear_flops",
    "estimate_attention_flops",
    "estimate_mpnn_flops",
    "estimate_ffn_flops",
    "estimate_pe_flops",
    "estimate_model_flops",
    "MPNN_TYPES",
    "PE_TYPES",
]

MPNN_TYPES = ("gin", "gcn", "gat", "none")
PE_TYPES = ("lap", "rwse", "none")


@dataclass(frozen=True)
class FLOPsEstimate:
    """The seed's estimate: ``total`` FLOPs and ``breakdown`` per component (attention, ffn, mpnn, pe, norm)."""

    total: int
    breakdown: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "breakdown": dict(self.breakdown)}


def estimate_linear_flops(in_features: int, out_features: int, batch_size: int = 1, seq_len: int = 1) -> int:
    """``2 x rows x in x out`` with ``rows = batch_size x seq_len`` (the bias is not counted)."""
    return 2 * batch_size * seq_len * in_features * out_features


def check_sparse_ratio(sparse_ratio: object) -> float:
    """``sparse_ratio``, a share of the N² node pairs: a number in (0, 1]; else :class:`InvalidInputError`."""
    ok = isinstance(sparse_ratio, (int, float)) and not isinstance(sparse_ratio, bool) and 0 < sparse_ratio <= 1
    if not ok:  # NaN fails 0 < x too
        raise InvalidInputError(
            f"sparse_ratio is the share of node pairs the attention scores: a number above 0 and at most 1, not {sparse_ratio!r}"
        )
    return float(sparse_ratio)  # type: ignore[arg-type]


def estimate_attention_flops(num_nodes: int, hidden_dim: int, num_heads: int, sparse_ratio: float = 1.0) -> int:
    """Global multi-head attention over ``num_nodes`` nodes; ``sparse_ratio`` is the share of the N² pairs scored."""
    sparse_ratio = check_sparse_ratio(sparse_ratio)
    n, d = num_nodes, hidden_dim
    projections = 4 * estimate_linear_flops(d, d, n)  # Q, K, V and the output projection
    pairs = n * n * sparse_ratio
    return int(projections + 2 * pairs * d + 5 * pairs * num_heads + 2 * pairs * d)


def estimate_ffn_flops(hidden_dim: int, ffn_dim: int, num_nodes: int) -> int:
    """``Linear(d, f) -> GELU -> Linear(f, d)`` over ``num_nodes`` rows."""
    return (
        estimate_linear_flops(hidden_dim, ffn_dim, num_nodes)
        + estimate_linear_flops(ffn_dim, hidden_dim, num_nodes)
        + 4 * num_nodes * ffn_dim
    )


def estimate_mpnn_flops(num_nodes: int, num_edges: int, in_features: int, out_features: int, mpnn_type: str = "gin") -> int:
    """One message-passing layer (see the module docstring for each type; ``"none"`` is 0)."""
    n, e, a, b = num_nodes, num_edges, in_features, out_features
    kind = mpnn_type.lower()
    if kind == "gin":
        return e * a + estimate_linear_flops(a, b, n) + estimate_linear_flops(b, b, n)
    if kind == "gcn":
        return estimate_linear_flops(a, b, n) + 2 * e * b
    if kind == "gat":
        return estimate_linear_flops(a, b, n) + 4 * n * b + e * (5 + 2 * b)
    if kind == "none":
        return 0
    raise InvalidInputError(f"unknown mpnn_type {mpnn_type!r}: choose one of {', '.join(MPNN_TYPES)}")


def estimate_pe_flops(num_nodes: int, pe_dim: int, pe_type: str = "lap") -> int:
    """The positional encoding's precompute (not the model's forward): see the module docstring."""
    kind = pe_type.lower()
    if kind == "lap":
        return 4 * num_nodes**3 // 3
    if kind == "rwse":
        return pe_dim * 2 * num_nodes**3
    if kind == "none":
        return 0
    raise InvalidInputError(f"unknown pe_type {pe_type!r}: choose one of {', '.join(PE_TYPES)}")


def estimate_model_flops(
    num_nodes: int,
    num_edges: int,
    hidden_dim: int,
    num_layers: int,
    num_heads: int,
    ffn_dim: int,
    *,
    mpnn_type: str = "gin",
    pe_dim: int = 0,
    pe_type: str = "none",
    sparse_ratio: float = 1.0,
) -> FLOPsEstimate:
    """A graph transformer of ``num_layers`` layers, each attention + FFN + MPNN + two LayerNorms, plus PE.

    >>> e = estimate_model_flops(num_nodes=500, num_edges=2500, hidden_dim=256, num_layers=6, num_heads=8, ffn_dim=512)
    >>> e.total, e.breakdown["attention"]
    (5545824000, 3168864000)

    Per layer: attention 528,144,000; ffn 4*500*256*512 + 4*500*512 = 263,168,000; mpnn (gin)
    2500*256 + 2*500*256*256*2 = 131,712,000; norm 10*500*256 = 1,280,000; sum 924,304,000, x 6 layers.
    """
    n, d = num_nodes, hidden_dim
    breakdown = {
        "attention": num_layers * estimate_attention_flops(n, d, num_heads, sparse_ratio),
        "ffn": num_layers * estimate_ffn_flops(d, ffn_dim, n),
        "mpnn": num_layers * estimate_mpnn_flops(n, num_edges, d, d, mpnn_type),
        "norm": num_layers * 2 * 5 * n * d,
        "pe": estimate_pe_flops(n, pe_dim, pe_type),
    }
    return FLOPsEstimate(total=sum(breakdown.values()), breakdown=breakdown)


#: The seed's MPNN type and sparse-attention default per ``pyg:`` architecture.
_ARCH_MPNN = {"gps": "gin", "graph_transformer": "gin", "gin": "gin", "gat": "gat", "gcn": "gcn"}


class FLOPsEstimator:
    """The seed's estimator "from a model": hyperparameters read from the model, then :func:`estimate_model_flops`.

    A ``pyg:`` :class:`~graphprof.models.pyg.GraphModel` gives its config; another model gives what its
    modules show (``hidden_dim`` from the first ``nn.Linear``'s output, ``num_heads`` from an
    ``nn.MultiheadAttention``, 1 otherwise); keywords override either.
    """

    def __init__(self, model: nn.Module, **hyperparameters: Any) -> None:
        if not isinstance(model, nn.Module):
            from graphprof.models.base import a_type

            raise InvalidInputError(f"FLOPsEstimator needs an nn.Module (a pyg: graph model or your own), not {a_type(model)}")
        self.model = model
        self.hyperparameters = {**_read_hyperparameters(model), **hyperparameters}

    def estimate(self, num_nodes: int, num_edges: int, **overrides: Any) -> FLOPsEstimate:
        from graphprof.base.limits import require_count

        num_nodes = require_count(num_nodes, "num_nodes", high=2**53)  # a negative size would be negative FLOPs
        num_edges = require_count(num_edges, "num_edges", low=0, high=2**53)
        options = {**self.hyperparameters, **overrides}
        return estimate_model_flops(num_nodes, num_edges, **options)

    def count_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad or not trainable_only)


def _read_hyperparameters(model: nn.Module) -> dict[str, Any]:
    config = getattr(model, "config", None)
    arch = getattr(model, "arch", None)
    if arch in _ARCH_MPNN and config is not None:
        return {
            "hidden_dim": config.hidden_dim, "num_layers": config.num_layers, "num_heads": config.num_heads,
            "ffn_dim": config.ffn_width, "mpnn_type": _ARCH_MPNN[arch], "pe_dim": config.pe_dim,
            "pe_type": "lap" if config.pe_dim else "none",
        }  # fmt: skip
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    attentions = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
    hidden = linears[0].out_features if linears else 1
    return {
        "hidden_dim": hidden, "num_layers": max(len(attentions), 1), "num_heads": attentions[0].num_heads if attentions else 1,
        "ffn_dim": 2 * hidden,
    }  # fmt: skip
