"""Renderers for graph models: the seed's estimate beside graphprof's count per component, and a graph
scaling (per-component FLOPs at each point, growth fits, measured mean ± std). Pure functions of results."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.gnn.compare import EstimateComparison
from graphprof.gnn.scaling import GraphScalingResult
from graphprof.measure.timing import NOISY_CV, RuntimeStats
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import add_columns, format_count, format_percent

__all__ = ["render_comparison", "render_graph_scaling", "growth_word"]


def growth_word(exponent: float) -> str:
    """``1.0`` -> ``"linear"``, ``2.0`` -> ``"quadratic"``, else ``"x^1.50"``."""
    for target, word in ((0.0, "constant"), (1.0, "linear"), (2.0, "quadratic"), (3.0, "cubic")):
        if abs(exponent - target) < 0.05:
            return word
    return f"x^{exponent:.2f}"


def _polynomial(linear: float, quadratic: float, constant: float) -> str:
    """``linear·x + quadratic·x² + constant`` with each sign written once (``−``, never ``+ -``) and a term
    that rounds to zero left out.

    >>> _polynomial(68984.0, -0.0, 1e-9), _polynomial(12.0, -0.5, -3.2)
    ('68,984·x', '12·x − 0.5·x² − 3')
    """
    terms = [(f"{abs(linear):,.0f}", "·x"), (f"{abs(quadratic):,.1f}", "·x²"), (f"{abs(constant):,.0f}", "")]
    signs = [linear, quadratic, constant]
    text = ""
    for (digits, unit), sign in zip(terms, signs, strict=True):
        if digits.strip("0.,") == "":
            continue
        minus = sign < 0
        text += (("−" if minus else "") if not text else (" − " if minus else " + ")) + digits + unit
    return text or "0"


def render_comparison(comparison: EstimateComparison) -> RenderableType:
    """Per component: the seed's estimate (labelled so), graphprof's count, their ratio and why they differ."""
    title = f"{comparison.model}: seed estimate vs graphprof count ({comparison.num_nodes:,} nodes, {comparison.num_edges:,} edges), FLOPs"
    table = ReportTable(title=Text(title), title_justify="left")  # Text: pyg:gps is no emoji code
    names = ("Component", "Seed estimate", "graphprof count", "count/est.", "Why they differ")
    add_columns(table, names, left=("Component", "Why they differ"))
    for row in comparison.rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        table.add_row(row.component, format_count(row.estimated_flops), format_count(row.counted_flops), ratio, row.reason)
    total_ratio = comparison.counted_total / comparison.estimated_total if comparison.estimated_total else None
    table.add_row(
        "total",
        format_count(comparison.estimated_total),
        format_count(comparison.counted_total),
        "-" if total_ratio is None else f"{total_ratio:.2f}",
        "",
    )
    return table


def render_graph_scaling(result: GraphScalingResult) -> RenderableType:
    """A row per point: nodes, edges, FLOPs per component and total, measured forward (mean ± std ms); then the fits.

    Every column folds rather than cuts a cell to ``…`` (a pipe or a narrow terminal is 80 columns); a
    forward whose spread is over :data:`~graphprof.measure.timing.NOISY_CV` of its mean is starred, as
    the main command flags a noisy run."""
    return Group(_scaling_table(result), *_scaling_notes(result))


def _scaling_table(result: GraphScalingResult) -> Table:
    """Every count whole: a number never parts from its unit (``911.36K``) nor a header word from itself
    (``attention``); at 80 columns only the forward's ``mean ± std`` wraps, at its spaces."""
    components = result.components
    by_nodes = result.parameter_name == "num_nodes"  # the first column is then the node count
    title = Text(f"{result.model}: {result.parameter_name} scaling (forward FLOPs, graphprof count)")
    # no side rules, and the box's space the only gap between columns: room for the cells
    table = ReportTable(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=0)
    headers = [result.parameter_name.replace("_", " "), *([] if by_nodes else ["Nodes"]), "Edges", *components, "Total"]
    rows: list[list[str | Text]] = []
    for p in result.points:
        cells: list[str | Text] = [str(p.value), *([] if by_nodes else [f"{p.num_nodes:,}"]), f"{p.num_edges:,}"]
        rows.append([*cells, *(format_count(p.costs.flops(c)) for c in components), format_count(p.costs.total.flops)])
    for i, name in enumerate(headers):
        words = max(len(w) for w in name.split())  # a header of two words may wrap between them, never inside one
        widest = max([words, *(len(str(row[i])) for row in rows)])
        table.add_column(name, justify="right", overflow="fold", no_wrap=" " not in name, min_width=widest)
    if any(p.runtime is not None for p in result.points):
        table.add_column("Forward (ms)", justify="right", overflow="fold", min_width=len("Forward"))
        for row, p in zip(rows, result.points, strict=True):
            row.append(_forward(p.runtime))
    for row in rows:
        table.add_row(*row)
    return table


def _forward(runtime: RuntimeStats | None) -> str | Text:
    if runtime is None:
        return "-"
    cell = f"{runtime.mean:.2f} ± {runtime.std:.2f}"
    return Text(cell + " *", style="yellow") if runtime.noisy else cell


def _scaling_notes(result: GraphScalingResult) -> list[Text]:
    """The growth fits, the quadratic split of attention over nodes, the noisy runs, the result's notes."""
    lines = [Text(f"growth in {result.parameter_name} (log-log fit of FLOPs):", style="bold")]
    for name, fit in result.fits().items():
        lines.append(
            Text(
                f"  {name}: exponent {abs(fit.exponent) if abs(fit.exponent) < 0.005 else fit.exponent:.2f} ({growth_word(fit.exponent)}), R² {fit.r2:.4f}"
            )
        )
    if result.parameter_name == "num_nodes" and "attention" in result.components and len(result.series("attention")[0]) >= 3:
        q = result.fit_quadratic("attention")
        largest = result.series("attention")[0][-1]
        lines.append(
            Text(
                f"  attention = {_polynomial(q.linear, q.quadratic, q.constant)}  (R² {q.r2:.4f}); "
                f"the x² term (scores over all node pairs) is {format_percent(q.quadratic_share(largest))} of attention at x = {largest:,.0f}"
            )
        )
    noisy = [p.runtime.cv for p in result.points if p.runtime is not None and p.runtime.noisy]
    if noisy:
        lines.append(
            Text(
                f"* noisy: the forward's spread is over {NOISY_CV:.0%} of its mean at {len(noisy)} point(s) (up to "
                f"{max(noisy):.0%}); quiet the machine, raise num_runs, pin the threads (OMP_NUM_THREADS=N)",
                style="bold yellow",
            )
        )
    lines.extend(Text(note, style="dim") for note in result.notes)
    return lines
