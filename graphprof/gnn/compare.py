"""The seed's estimate beside graphprof's count, per component, with the reason they differ.

>>> rows = compare_graph_model("pyg:graph_transformer?hidden_dim=256&num_layers=6&num_heads=8&ffn_dim=512"
...                            "&num_nodes=500&num_edges=2500")   # doctest: +SKIP
>>> [(r.component, r.estimated_flops, r.counted_flops) for r in rows.rows]   # doctest: +SKIP

The estimate (:func:`graphprof.gnn.estimate.estimate_model_flops`) is a formula from hyperparameters;
the count is graphprof's dry run of the real model on a real graph of the same size, summed per
component (:func:`graphprof.gnn.components.component_costs`). Where they differ, :func:`reasons` says
why in one line per component: a dense N² attention against one along E edges, the seed's softmax
"5N" against the ops the kernel runs, a PE precompute the forward does not contain, biases and
residual adds the seed leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphprof.cost.result import Profile
from graphprof.gnn.components import ComponentCosts, component_costs
from graphprof.gnn.estimate import FLOPsEstimate, FLOPsEstimator, check_sparse_ratio

__all__ = ["ComponentRow", "EstimateComparison", "compare_estimate", "compare_graph_model"]


@dataclass(frozen=True)
class ComponentRow:
    """One component: the seed's estimate and graphprof's count (FLOPs), and why they differ."""

    component: str
    estimated_flops: int
    counted_flops: int
    reason: str

    @property
    def ratio(self) -> float | None:
        """counted / estimated; ``None`` when the estimate is 0."""
        return self.counted_flops / self.estimated_flops if self.estimated_flops else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "estimated_flops": self.estimated_flops,
            "counted_flops": self.counted_flops,
            "ratio": self.ratio,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class EstimateComparison:
    """Every component of one model on one graph (``num_nodes``, ``num_edges``), estimate beside count."""

    model: str
    num_nodes: int
    num_edges: int
    rows: tuple[ComponentRow, ...]
    estimate: FLOPsEstimate
    counted: ComponentCosts

    @property
    def estimated_total(self) -> int:
        return self.estimate.total

    @property
    def counted_total(self) -> int:
        return self.counted.total.flops

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "num_nodes": self.num_nodes, "num_edges": self.num_edges,
            "estimated_total": self.estimated_total, "counted_total": self.counted_total,
            "rows": [r.to_dict() for r in self.rows],
        }  # fmt: skip


def reasons(arch: str | None, num_nodes: int, num_edges: int, pe_type: str) -> dict[str, str]:
    """One line per component on why the seed's formula and the count differ, for ``arch`` (a ``pyg:`` name)."""
    density = num_edges / (num_nodes * num_nodes) if num_nodes else 0.0
    dense_attention = (
        "both dense over N² pairs; the seed charges 5 FLOPs per score (softmax), graphprof 7 (the scale, "
        "softmax's 5 and the key-padding mask's add) and the projections' biases"
    )
    sparse_attention = (
        f"the seed is dense over N² = {num_nodes * num_nodes:,} pairs (sparse_ratio=1); TransformerConv scores only "
        f"the E = {num_edges:,} edges (ratio E/N² = {density:.2%}): pass sparse_ratio=E/N² to match"
    )
    rows = {
        "attention": sparse_attention
        if arch == "graph_transformer"
        else dense_attention
        if arch == "gps"
        else "no attention in this model",
        "ffn": "the seed counts the two products and a GELU at 4 per element; graphprof adds the biases (1 FLOP per output) and counts the model's own activation at its rate",
        "mpnn": (
            "the seed adds a separate GIN layer; this model's message passing is its attention along the edges"
            if arch == "graph_transformer"
            else "the seed counts E x d adds and the MLP; graphprof also counts (1 + eps) x and the biases"
        ),
        "norm": "the seed charges 5 per element for 2 LayerNorms a layer; graphprof counts each norm the model has, as its kernel computes it",
        "pe": (
            "the seed counts the PE precompute (an eigensolver, outside the model); graphprof counts the forward's PE encoder only: "
            "time the precompute with profile_pe_computation"
            if pe_type != "none"
            else "no PE in either"
        ),
        "io": "the input encoder and output head: not in the seed's formula",
        "other": "residual adds, masks and reshapes: not in the seed's formula",
    }
    return rows


def compare_estimate(profile: Profile, model: Any, estimate: FLOPsEstimate, num_nodes: int, num_edges: int) -> EstimateComparison:
    """``estimate`` beside ``profile``'s count (of ``model`` on a graph of ``num_nodes``, ``num_edges``)."""
    counted = component_costs(profile, model)
    arch = getattr(model, "arch", None)
    pe_type = "lap" if estimate.breakdown.get("pe") else "none"
    why = reasons(arch, num_nodes, num_edges, pe_type)
    names = [*estimate.breakdown, *(k for k in counted.forward if k not in estimate.breakdown)]
    rows = tuple(
        ComponentRow(name, int(estimate.breakdown.get(name, 0)), counted.flops(name) if name in counted.forward else 0, why.get(name, ""))
        for name in names
    )
    return EstimateComparison(profile.model_name, num_nodes, num_edges, rows, estimate, counted)


def compare_graph_model(spec: str, **estimate_overrides: Any) -> EstimateComparison:
    """Profile the ``pyg:`` model ``spec`` (a dry run) and compare it with the seed's estimate of the same sizes."""
    from graphprof.errors import InvalidInputError
    from graphprof.models.pyg import PREFIX
    from graphprof.prepared import prepare

    if not str(spec).strip().lower().startswith(PREFIX):
        raise InvalidInputError(f"graph-estimate compares a graph model (pyg:gps, pyg:gin...) with the seed's estimate, not {spec!r}")
    if "sparse_ratio" in estimate_overrides:
        check_sparse_ratio(estimate_overrides["sparse_ratio"])

    prepared = prepare(spec)
    profile = prepared.profile()
    args, _ = prepared.inputs()
    num_nodes, num_edges = int(args[0].shape[0]), int(args[1].shape[1])
    estimate = FLOPsEstimator(prepared.model).estimate(num_nodes, num_edges, **estimate_overrides)
    return compare_estimate(profile, prepared.model, estimate, num_nodes, num_edges)
