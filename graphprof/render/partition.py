"""A partition plan (and a measured run of it) as a Rich report, JSON, and a picture of the stages.

Pure functions of :class:`graphprof.partition.Plan` and :class:`graphprof.partition.run.PipelineRun`;
they never change them. The picture uses matplotlib (imported only when drawn, see
:mod:`graphprof.render.plots`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.base.choices import Objective
from graphprof.base.limits import format_bytes
from graphprof.partition.plan import Plan, Stage
from graphprof.partition.run import PipelineRun
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import add_columns, format_count, format_seconds
from graphprof.render.plots import _figure, _save

__all__ = ["render_plan", "render_runs", "plan_dict", "render_plan_plot"]


def _units(stage: Stage) -> str:
    return stage.first if stage.first == stage.last else f"{stage.first} .. {stage.last}"


def _stage_table(plan: Plan) -> Table:
    table = ReportTable(
        title=f"{plan.model_name}: {len(plan.stages)} stage(s), objective {plan.objective}",
        box=box.SIMPLE_HEAD,
        optional=("units", "receive", "sent", "params", "#"),
    )
    names = ("#", "device", "layers", "units", "params", "compute", "receive", "memory / capacity", "sent")
    add_columns(table, names, left=("device", "layers"))
    for s in plan.stages:
        memory = f"{format_bytes(s.memory_bytes)} / {format_bytes(s.capacity_bytes)}"
        table.add_row(
            str(s.index), s.device, _units(s), str(s.end - s.start), format_count(s.params), format_seconds(s.compute_s),
            format_seconds(s.receive_s), memory, format_bytes(s.sent_bytes),
        )  # fmt: skip
    return table


def _baseline_table(plan: Plan) -> Table:
    table = ReportTable(
        title="against the splits users make today (same cost table)",
        box=box.SIMPLE_HEAD,
        optional=("stages", "fits", "slowest stage", "throughput"),
    )
    add_columns(table, ("split", "stages", "latency", "slowest stage", "throughput", "fits", "plan is"), left=("split", "fits"))

    def row(name: str, stages: Sequence[Stage], fits: bool, base: float | None) -> None:
        latency = sum(s.seconds for s in stages)
        slowest = max(s.seconds for s in stages)
        mine = plan.latency_s if plan.objective is Objective.LATENCY else plan.bottleneck_s
        theirs = latency if plan.objective is Objective.LATENCY else slowest
        gain = "-" if base is None or mine <= 0 else _gain(theirs / mine)
        if not fits and base is not None:
            gain = "(does not fit)"
        table.add_row(name, str(len(stages)), format_seconds(latency), format_seconds(slowest),
                      f"{plan.micro_batch / slowest:,.1f}/s" if slowest > 0 else "-", "yes" if fits else "NO", gain)  # fmt: skip

    row("graphprof plan", plan.stages, all(s.fits for s in plan.stages), None)
    for b in plan.baselines:
        row(b.name, b.stages, b.fits, 1.0)
    return table


def _gain(ratio: float) -> str:
    """How much faster the plan is than a split taking ``ratio`` times its time: ``"same"`` when the two
    read the same to two decimals (an identical split), never ``"1.00x faster"``.

    >>> _gain(4.6428), _gain(1.0001), _gain(0.5)
    ('4.64x faster', 'same', '2.00x slower')
    """
    if f"{ratio:.2f}" == "1.00":
        return "same"
    return f"{ratio:.2f}x faster" if ratio > 1 else f"{1 / ratio:.2f}x slower"


def render_plan(plan: Plan) -> RenderableType:
    """The stage table, the predicted figures, the baselines and the notes."""
    summary = Text.assemble(
        ("predicted ", "bold"), f"latency {format_seconds(plan.latency_s)} per micro-batch of {plan.micro_batch}; ",
        f"slowest stage {format_seconds(plan.bottleneck_s)}, so pipelined throughput {plan.throughput:,.1f} samples/s ",
        ("(estimates from the cost table, not a run)", "dim"),
    )  # fmt: skip
    splits = Text(f"split points (SplitPoint.BEGINNING): {', '.join(plan.split_points) or 'none, one stage'}")
    notes = [Text(f"note: {n}", style="dim") for n in (*plan.notes, f"planned in {format_seconds(plan.solve_seconds)}")]
    return Group(_stage_table(plan), summary, splits, Text(""), _baseline_table(plan), *notes)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_runs(runs: Sequence[tuple[str, PipelineRun]]) -> RenderableType:
    """Measured runs (the plan's, a baseline's), per stage beside the prediction, then end to end."""
    parts: list[RenderableType] = []
    for label, run in runs:
        table = ReportTable(title=f"{label}: measured on local gloo processes ({run.threads} thread(s) each)", box=box.SIMPLE_HEAD)
        names = ("stage", "from", "predicted", "measured alone", "alone / predicted", "measured pipelined", "pipelined / predicted")
        add_columns(table, names, left=("from",))
        for s in run.stages:
            table.add_row(
                str(s.index), s.first, format_seconds(s.predicted_s), format_seconds(s.alone_s), _ratio(s.alone_ratio),
                format_seconds(s.measured_s), _ratio(s.ratio),
            )  # fmt: skip
        predicted = format_seconds(run.predicted_step_s)
        parts.append(table)
        parts.append(Text(
            f"step of {run.batch} in {run.micro_batches} micro-batches: predicted {predicted}, measured "
            f"{format_seconds(run.step_s)} (min {format_seconds(run.step_spread_s[0])}, max {format_seconds(run.step_spread_s[1])}, "
            f"{run.iters} steps); throughput {run.throughput:,.2f} samples/s; output "
            f"{'matches' if run.matches else 'DIFFERS FROM'} the unsplit model (max |diff| {run.max_abs_error:.2e}); "
            f"load {run.load[0]:.2f}"
        ))  # fmt: skip
    return Group(*parts)


def plan_dict(plan: Plan, runs: Sequence[tuple[str, PipelineRun]] = ()) -> dict[str, Any]:
    """The plan (and any runs) as a JSON-ready dict."""
    data: dict[str, Any] = plan.to_dict()
    data["runs"] = {label: run.to_dict() for label, run in runs}
    return data


def _strip(axis: Any, y: float, stages: Sequence[Stage], colors: dict[str, Any], label: str) -> None:
    for s in stages:
        axis.barh(y, s.end - s.start, left=s.start - 0.5, height=0.6, color=colors[s.kind], edgecolor="black")
        axis.text((s.start + s.end - 1) / 2, y, f"{s.device}\n{format_seconds(s.seconds)}", ha="center", va="center", fontsize=7)
    axis.text(-0.7, y, label, ha="right", va="center", fontsize=8)


def render_plan_plot(plan: Plan, *, fmt: str = "png") -> bytes:
    """The stages along the model: per-unit time on its stage's device, the bytes at each cut, and the
    plan's stages beside the baselines' (one strip each)."""
    units = plan.table.units
    figure = _figure(max(8.0, 0.18 * len(units) + 3), 6.0)
    top, bottom = figure.subplots(2, 1, height_ratios=(3, 2), sharex=True)
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
    colors = {k: palette[i % len(palette)] for i, k in enumerate(dict.fromkeys(d.kind for d in plan.devices))}
    for s in plan.stages:
        xs = list(range(s.start, s.end))
        ys = [plan.table.seconds[s.kind][u] * 1e3 for u in xs]
        top.bar(xs, ys, color=colors[s.kind], label=s.kind)
    cuts = top.twinx()
    cuts.plot(range(1, len(units)), [b / 1e6 for b in plan.table.cut_bytes[1:-1]], color="black", lw=1, marker=".", ms=3)
    cuts.set_ylabel("MB crossing the cut before the unit (line)")
    cuts.set_ylim(0, max(plan.table.cut_bytes, default=0) / 1e6 * 1.25 or 1.0)
    for s in plan.stages[1:]:
        top.axvline(s.start - 0.5, color="black", ls="--", lw=1)
    handles, labels = top.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    top.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left")
    top.set_ylabel("ms per micro-batch on its device")
    top.set_title(f"{plan.model_name}: {plan.objective} plan over {len(plan.devices)} device(s) (estimates)")
    strips: list[tuple[str, Sequence[Stage]]] = [("graphprof", plan.stages), *((b.name, b.stages) for b in plan.baselines)]
    for y, (label, stages) in enumerate(reversed(strips)):
        _strip(bottom, y, stages, colors, label)
    bottom.set_yticks([])
    bottom.set_xlabel("units in execution order")
    step = max(1, len(units) // 30)
    bottom.set_xticks(range(0, len(units), step), [units[i].name for i in range(0, len(units), step)], rotation=90, fontsize=6)
    return bytes(_save(figure, fmt))
