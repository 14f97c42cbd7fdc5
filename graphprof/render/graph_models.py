"""Renderers for graph models: the seed's estimate beside graphprof's count per component, and a graph
scaling (per-component FLOPs at each point, growth fits, measured mean ± std). Pure functions of results."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.gnn.compare import EstimateComparison
from graphprof.gnn.scaling import GraphScalingResult
from graphprof.render.table import format_count

__all__ = ["render_comparison", "render_graph_scaling", "growth_word"]


def growth_word(exponent: float) -> str:
    """``1.0`` -> ``"linear"``, ``2.0`` -> ``"quadratic"``, else ``"x^1.50"``."""
    for target, word in ((0.0, "constant"), (1.0, "linear"), (2.0, "quadratic"), (3.0, "cubic")):
        if abs(exponent - target) < 0.05:
            return word
    return f"x^{exponent:.2f}"


def _constant(value: float) -> str:
    rounded = round(value)
    return "" if rounded == 0 else f" {'-' if rounded < 0 else '+'} {abs(rounded):,}"


def render_comparison(comparison: EstimateComparison) -> RenderableType:
    """Per component: the seed's estimate (labelled so), graphprof's count, their ratio and why they differ."""
    title = f"{comparison.model}: seed estimate vs graphprof count ({comparison.num_nodes:,} nodes, {comparison.num_edges:,} edges), FLOPs"
    table = Table(title=Text(title), title_justify="left")  # Text: pyg:gps is no emoji code
    for name, justify in (("Component", "left"), ("Seed estimate", "right"), ("graphprof count", "right"), ("count/est.", "right"), ("Why they differ", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in comparison.rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        table.add_row(row.component, format_count(row.estimated_flops), format_count(row.counted_flops), ratio, row.reason)
    total_ratio = comparison.counted_total / comparison.estimated_total if comparison.estimated_total else None
    table.add_row("total", format_count(comparison.estimated_total), format_count(comparison.counted_total), "-" if total_ratio is None else f"{total_ratio:.2f}", "")
    return table


def render_graph_scaling(result: GraphScalingResult) -> RenderableType:
    """A row per point: nodes, edges, FLOPs per component and total, measured forward (mean ± std ms); then the fits."""
    components = result.components
    table = Table(title=Text(f"{result.model}: {result.parameter_name} scaling (forward FLOPs, graphprof count)"), title_justify="left")
    table.add_column(result.parameter_name, justify="right")
    table.add_column("Nodes", justify="right")
    table.add_column("Edges", justify="right")
    for name in components:
        table.add_column(name, justify="right")
    table.add_column("Total", justify="right")
    measured = any(p.runtime is not None for p in result.points)
    if measured:
        table.add_column("Forward (ms)", justify="right")
    for p in result.points:
        cells = [str(p.value), f"{p.num_nodes:,}", f"{p.num_edges:,}", *(format_count(p.costs.flops(c)) for c in components), format_count(p.costs.total.flops)]
        if measured:
            cells.append("-" if p.runtime is None else f"{p.runtime.mean:.2f} ± {p.runtime.std:.2f}")
        table.add_row(*cells)
    lines = [Text(f"growth in {result.parameter_name} (log-log fit of FLOPs):", style="bold")]
    for name, fit in result.fits().items():
        lines.append(Text(f"  {name}: exponent {abs(fit.exponent) if abs(fit.exponent) < 0.005 else fit.exponent:.2f} ({growth_word(fit.exponent)}), R² {fit.r2:.4f}"))
    if "attention" in components and len(result.series("attention")[0]) >= 3:
        q = result.fit_quadratic("attention")
        largest = result.series("attention")[0][-1]
        lines.append(
            Text(
                f"  attention = {q.linear:,.0f}·x + {q.quadratic:,.1f}·x²{_constant(q.constant)}  (R² {q.r2:.4f}); "
                f"the x² term (scores over all node pairs) is {q.quadratic_share(largest):.1%} of attention at x = {largest:,.0f}"
            )
        )
    lines.extend(Text(note, style="dim") for note in result.notes)
    return Group(table, *lines)

