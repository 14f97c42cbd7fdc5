"""A planned training step as Rich tables: each phase's peak by what holds it, the verdict against the
device, and the checkpoint plan. Pure functions of :class:`graphprof.training.MemoryPlan` and
:class:`graphprof.training.RanksPlan`."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.base.limits import format_bytes
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import add_columns, format_count
from graphprof.training.result import CheckpointPlan, MemoryPlan, RanksPlan, StepBreakdown

__all__ = ["render_memory_plan", "render_checkpoint_plan", "render_ranks_plan", "render_plan_plot"]

_ROWS = (
    ("parameters (and buffers)", "parameters"),
    ("gradients", "gradients"),
    ("optimizer state", "optimizer_state"),
    ("activations saved for backward", "activations"),
    ("inputs", "inputs"),
    ("transients", "transients"),
)


def _breakdown_table(plan: MemoryPlan, title: str) -> Table:
    table = ReportTable(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("held at each phase's peak")
    peak = plan.peak.phase
    for p in plan.phases:
        table.add_column(
            f"{p.phase.value}{' (peak)' if p.phase is peak else ''}", justify="right", style="bold" if p.phase is peak else None
        )
    for label, key in _ROWS:
        table.add_row(label, *(format_bytes(getattr(p.breakdown, key)) for p in plan.phases))
    table.add_section()
    table.add_row("total", *(format_bytes(p.breakdown.total) for p in plan.phases))
    table.add_row("where", *(f"{p.module or '-'} ({p.op or '-'})" for p in plan.phases))
    return table


def _verdict(plan: MemoryPlan) -> Text:
    peak = plan.peak
    text = f"estimated peak{' per rank' if plan.shard else ''}: {format_bytes(plan.peak_bytes)} in the {peak.phase.value} at {peak.module or '-'} ({peak.op or '-'})"
    if plan.device is not None and plan.device_memory_bytes is not None:
        room = plan.device_memory_bytes - plan.peak_bytes
        text += f"; {plan.device} has {format_bytes(plan.device_memory_bytes)}: " + (
            f"fits, {format_bytes(room)} to spare" if plan.fits else f"does NOT fit, {format_bytes(-room)} short"
        )
    return Text(text, style="bold" if plan.fits is not False else "bold red")


def render_memory_plan(plan: MemoryPlan) -> RenderableType:
    """The step's memory by phase, the verdict, the checkpoint plan (when asked for) and the notes."""
    where = f", {plan.shard} per rank" if plan.shard else ""
    title = f"{plan.model_name}, {plan.inputs}, {plan.dtype}, {plan.optimizer}{where}: one training step (estimate)"
    parts: list[RenderableType] = [_breakdown_table(plan, title), _verdict(plan)]
    parts.append(Text(f"saved for backward in the forward: {format_bytes(plan.saved_activation_bytes)}; "
                      f"largest transient: {format_bytes(plan.largest_transient_bytes)}"))  # fmt: skip
    if plan.checkpoint is not None:
        parts.append(render_checkpoint_plan(plan.checkpoint, plan.peak.breakdown))
    parts += [Text(note, style="dim") for note in plan.notes]
    return Group(*parts)


def render_checkpoint_plan(cp: CheckpointPlan, before: StepBreakdown) -> RenderableType:
    """Each candidate module: memory freed, recompute FLOPs and time, chosen or not; then the new peak."""
    table = ReportTable(
        title=f"activation checkpointing under {format_bytes(cp.budget_bytes)} ({cp.solver}; times from {cp.timing})",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    add_columns(table, ("module", "freed", "recompute FLOPs", "recompute time (est.)", "chosen"), left=("module",), center=("chosen",))
    for c in cp.choices:
        table.add_row(
            c.module,
            format_bytes(c.freed_bytes),
            format_count(c.recompute_flops),
            f"{c.recompute_s * 1e3:.3g} ms",
            "yes" if c.chosen else "",
        )
    lines: list[RenderableType] = [table]
    if not cp.feasible:
        lines.append(
            Text(
                f"no choice of modules brings the step under {format_bytes(cp.budget_bytes)}"
                f"{' on a real step' if cp.measured_peak_bytes is not None else ''}: the plan below is the closest found",
                style="bold red",
            )
        )
    if cp.planned is not None:
        after = cp.planned.peak
        step = f"; step {cp.step_s * 1e3:.3g} ms -> {(cp.step_s + cp.recompute_s) * 1e3:.3g} ms (est.)" if cp.step_s is not None else ""
        if cp.measured_peak_bytes is not None:
            peak = (
                f"{format_bytes(cp.measured_peak_bytes)} measured on a real step with the plan applied on this CPU "
                f"(simulated: {format_bytes(after.breakdown.total)} in the {after.phase.value})"
            )
        else:
            peak = f"{format_bytes(after.breakdown.total)} in the {after.phase.value} (simulated with the plan applied)"
        lines.append(Text(
            f"peak {format_bytes(before.total)} -> {peak}; recompute {format_count(cp.recompute_flops)} FLOPs, "
            f"{cp.recompute_s * 1e3:.3g} ms{step}", style="bold"))  # fmt: skip
    return Group(*lines)


def render_ranks_plan(plan: RanksPlan) -> RenderableType:
    """The world sizes tried and the smallest that fits, with and without checkpointing."""
    table = ReportTable(
        title=f"{plan.model_name} on {plan.device} ({format_bytes(plan.device_memory_bytes)}): peak per rank",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("ranks", justify="right")
    table.add_column("peak per rank", justify="right")
    table.add_column("with checkpointing", justify="right")
    with_cp = dict(plan.tried_with_checkpoint)
    for world, peak in plan.tried:
        table.add_row(str(world), format_bytes(peak), format_bytes(with_cp[world]) if world in with_cp else "-")
    verdict = (f"smallest FSDP world that fits: {plan.world or 'none tried'}; "
               f"with every block checkpointed: {plan.world_with_checkpoint or 'none tried'}")  # fmt: skip
    ranked = [
        Text(f"  {i}. fsdp:{world}, checkpoint {checkpoint}: {rate:,.0f} tokens/s per GPU, step {seconds * 1e3:,.1f} ms")
        for i, (world, checkpoint, rate, seconds) in enumerate(plan.ranked, 1)
    ]
    if ranked:
        ranked.insert(0, Text("fastest first (tokens/s per GPU, the step priced on the device):", style="bold"))
    return Group(table, Text(verdict, style="bold"), *ranked, *(Text(n, style="dim") for n in plan.notes))


_COLOURS = {
    "parameters": "#4c72b0", "gradients": "#55a868", "optimizer_state": "#8172b2",
    "activations": "#c44e52", "inputs": "#937860", "transients": "#ccb974",
}  # fmt: skip


def render_plan_plot(plan: MemoryPlan, *, fmt: str = "png") -> bytes:
    """Each phase's peak, stacked by what holds it, before and (with a checkpoint plan) after the plan,
    with the budget and the device's memory as lines. A pure function of ``plan``; needs matplotlib."""
    from graphprof.render.plots import _figure, _save

    columns: list[tuple[str, StepBreakdown]] = [(f"{p.phase.value}\n(as is)", p.breakdown) for p in plan.phases]
    cp = plan.checkpoint
    if cp is not None and cp.planned is not None:
        columns += [(f"{p.phase.value}\n(planned)", p.breakdown) for p in cp.planned.phases]
    figure = _figure(1.3 * len(columns) + 3, 4.5)
    ax = figure.add_subplot()
    x = range(len(columns))
    bottom = [0.0] * len(columns)
    for label, key in _ROWS:
        heights = [getattr(b, key) / 1e9 for _, b in columns]
        ax.bar(x, heights, bottom=bottom, label=label, color=_COLOURS[key], width=0.7)
        bottom = [a + h for a, h in zip(bottom, heights, strict=True)]
    if cp is not None:
        ax.axhline(cp.budget_bytes / 1e9, color="black", linestyle="--", linewidth=1, label=f"budget {format_bytes(cp.budget_bytes)}")
        ax.axvline(len(plan.phases) - 0.5, color="grey", linewidth=0.8)
    if plan.device_memory_bytes is not None:
        ax.axhline(plan.device_memory_bytes / 1e9, color="red", linewidth=1, label=f"{plan.device}")
    ax.set_xticks(list(x), [name for name, _ in columns], fontsize=8)
    ax.set_ylabel("GB held (estimate)")
    chosen = f"; {len(cp.chosen)} of {len(cp.choices)} blocks recomputed" if cp is not None else ""
    name, _, overrides = plan.model_name.partition("?")  # an hf: spec's config overrides make a long title
    ax.set_title(f"{name}{' (custom config)' if overrides else ''}, {plan.inputs}: one training step{chosen}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(figure, fmt)
