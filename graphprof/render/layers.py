"""The report's tables of layers and ops: every graph node (``--verbose``), the aten-op breakdown, the
operation breakdown by layer type (seed 002) and the top-N layers by FLOPs (seed 002).

Pure functions of a :class:`Profile` (the verdicts and times from the roofline it carries): each returns
a Rich renderable and prints nothing.
"""

from __future__ import annotations

from collections import defaultdict

from rich.console import RenderableType
from rich.table import Table

from graphprof.base.choices import Mode, OpStatus
from graphprof.cost.result import Profile
from graphprof.render.common import profile_roofline
from graphprof.render.formatting import (
    OPTIONAL_COLUMNS,
    TYPE_WIDTH,
    FullNamesIfTheyFit,
    ai_cell,
    bytes_cell,
    cost_cells,
    count_cell,
    format_percent,
    format_seconds,
    seconds_cell,
    section_table,
    shape_cell,
    short_names,
)

__all__ = ["BREAKDOWN_ROWS", "DEFAULT_TOP", "render_aten_breakdown", "render_layers", "render_op_breakdown", "render_top_layers"]

#: Layers listed by ``render_top_layers`` unless told otherwise (seed 002 lists ten).
DEFAULT_TOP = 10
#: Layer types listed by the operation breakdown before the rest are summed into one row.
BREAKDOWN_ROWS = 10


# ---- per-layer details ---------------------------------------------------------------------------
def render_layers(profile: Profile, *, show_shapes: bool = False) -> RenderableType:
    """Every graph node in execution order with its cost, arithmetic intensity, verdict and time estimate."""
    profile_roofline(profile)  # a profile without its roofline is refused here, not when the table is drawn
    return FullNamesIfTheyFit(lambda width: _layers_table(profile, show_shapes, width))


def _layers_table(profile: Profile, show_shapes: bool, width: int | None) -> Table:
    roofline = profile_roofline(profile)
    timed = roofline.hardware is not None
    total = profile.total
    table = section_table(f"Per-layer details ({len(profile.layers)} graph nodes)", optional=OPTIONAL_COLUMNS)
    table.show_footer = True
    table.add_column("Layer", footer="Total", no_wrap=True, overflow="ellipsis", max_width=width)
    table.add_column("Type", no_wrap=True, overflow="ellipsis", max_width=TYPE_WIDTH)
    table.add_column("Params", justify="right", overflow="fold", footer=count_cell(profile.graph_params))
    if show_shapes:
        table.add_column("Output shape", max_width=20)
    table.add_column("MACs", justify="right", overflow="fold", footer=count_cell(total.macs))
    table.add_column("FLOPs", justify="right", overflow="fold", footer=count_cell(total.flops))
    table.add_column("Memory", justify="right", overflow="fold", footer=bytes_cell(total.bytes_moved))
    table.add_column("AI", justify="right", overflow="fold", footer=ai_cell(total.arithmetic_intensity))
    table.add_column("Bound", overflow="fold")
    saved = profile.mode is Mode.TRAIN
    if saved:  # bytes kept for backward: the activation memory of a training step, layer by layer
        table.add_column("Saved", justify="right", overflow="fold", footer=bytes_cell(profile.saved_activation_bytes))
    if timed:
        table.add_column("Est. time", justify="right", overflow="fold", footer=format_seconds(roofline.seconds))
    names = short_names([row.name for row in profile.layers], width)
    for row, verdict, name in zip(profile.layers, roofline.layers, names, strict=True):
        cells = [name, row.type, count_cell(row.params)]
        if show_shapes:
            cells.append(shape_cell(row.output_shapes))
        cells += [*cost_cells(row.cost), verdict.bound.short]
        if saved:
            cells.append(bytes_cell(row.saved_bytes))
        if timed:
            cells.append(seconds_cell(verdict.seconds))
        table.add_row(*cells)
    return table


def render_aten_breakdown(profile: Profile) -> RenderableType:
    """FLOPs and calls per aten op (overload packet), and whether each was counted, free or unsupported."""
    calls: dict[tuple[str, OpStatus], int] = defaultdict(int)
    flops: dict[tuple[str, OpStatus], int] = defaultdict(int)
    moved: dict[tuple[str, OpStatus], int] = defaultdict(int)
    for _, op in profile.iter_ops():
        key = (op.op, op.status)
        calls[key] += 1
        flops[key] += op.cost.flops
        moved[key] += op.cost.bytes_moved
    total = profile.total_flops
    table = section_table("Aten op breakdown", optional=("Status", "Share"))
    table.add_column("Aten op", no_wrap=True, overflow="ellipsis", max_width=40)
    table.add_column("Status", overflow="fold")
    table.add_column("Calls", justify="right")
    table.add_column("FLOPs", justify="right")
    table.add_column("Share", justify="right")
    table.add_column("Memory", justify="right")
    for key in sorted(calls, key=lambda k: (-flops[k], -moved[k], k)):
        share = flops[key] / total if total else 0.0
        table.add_row(
            key[0], key[1].replace("_", "-"), str(calls[key]), count_cell(flops[key]), format_percent(share), bytes_cell(moved[key])
        )
    return table


# ---- operation breakdown -------------------------------------------------------------------------
def render_op_breakdown(profile: Profile, *, limit: int = BREAKDOWN_ROWS) -> RenderableType:
    """Share of FLOPs, count and memory by layer type (``Conv2d``, ``Linear``, ``add``...), largest first."""
    count: dict[str, int] = defaultdict(int)
    flops: dict[str, int] = defaultdict(int)
    moved: dict[str, int] = defaultdict(int)
    for row in profile.layers:
        cost = row.cost
        if not (cost.flops or cost.bytes_moved):
            continue
        count[row.type] += 1
        flops[row.type] += cost.flops
        moved[row.type] += cost.bytes_moved
    order = sorted(count, key=lambda t: (-flops[t], -moved[t], t))
    shown, rest = order[:limit], order[limit:]
    total_flops, total_bytes = profile.total_flops, profile.total_bytes
    table = section_table("Operation breakdown (by layer type)", optional=("Memory share", "Layers"))
    table.show_footer = True
    table.add_column("Type", footer="Total", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("Layers", justify="right", footer=str(sum(count.values())))
    table.add_column("FLOPs", justify="right", footer=count_cell(total_flops))
    table.add_column("FLOPs share", justify="right", footer=format_percent(1.0 if total_flops else 0.0))
    table.add_column("Memory", justify="right", footer=bytes_cell(total_bytes))
    table.add_column("Memory share", justify="right", footer=format_percent(1.0 if total_bytes else 0.0))

    def share(part: int, whole: int) -> str:
        return format_percent(part / whole if whole else 0.0)

    for kind in shown:
        table.add_row(
            kind,
            str(count[kind]),
            count_cell(flops[kind]),
            share(flops[kind], total_flops),
            bytes_cell(moved[kind]),
            share(moved[kind], total_bytes),
        )
    if rest:
        f, m = sum(flops[k] for k in rest), sum(moved[k] for k in rest)
        table.add_row(
            f"other ({len(rest)} types)",
            str(sum(count[k] for k in rest)),
            count_cell(f),
            share(f, total_flops),
            bytes_cell(m),
            share(m, total_bytes),
        )
    return table


# ---- top layers ----------------------------------------------------------------------------------
def render_top_layers(profile: Profile, *, top: int = DEFAULT_TOP) -> RenderableType:
    """The ``top`` layers by FLOPs with share, memory, arithmetic intensity, verdict and time estimate."""
    profile_roofline(profile)  # a profile without its roofline is refused here, not when the table is drawn
    ranked = sorted((i for i, row in enumerate(profile.layers) if row.cost.flops > 0), key=lambda i: -profile.layers[i].cost.flops)[
        : max(0, top)
    ]
    return FullNamesIfTheyFit(lambda width: _top_table(profile, ranked, width))


def _top_table(profile: Profile, ranked: list[int], width: int | None) -> Table:
    roofline = profile_roofline(profile)
    timed = roofline.hardware is not None
    total = profile.total_flops
    table = section_table(f"Top {len(ranked)} layers by FLOPs", optional=OPTIONAL_COLUMNS)
    table.add_column("#", justify="right")
    table.add_column("Layer", no_wrap=True, overflow="ellipsis", max_width=width)
    table.add_column("Type", no_wrap=True, overflow="ellipsis", max_width=TYPE_WIDTH)
    table.add_column("FLOPs", justify="right", overflow="fold")
    table.add_column("Share", justify="right", overflow="fold")
    table.add_column("Memory", justify="right", overflow="fold")
    table.add_column("AI", justify="right", overflow="fold")
    table.add_column("Bound", overflow="fold")
    if timed:
        table.add_column("Est. time", justify="right", overflow="fold")
    names = short_names([profile.layers[i].name for i in ranked], width)
    for rank, (i, name) in enumerate(zip(ranked, names, strict=True), 1):
        row, verdict = profile.layers[i], roofline.layers[i]
        cost = row.cost
        cells = [
            str(rank), name, row.type, count_cell(cost.flops), format_percent(cost.flops / total if total else 0.0),
            bytes_cell(cost.bytes_moved), ai_cell(cost.arithmetic_intensity), verdict.bound.short,
        ]  # fmt: skip
        if timed:
            cells.append(seconds_cell(verdict.seconds))
        table.add_row(*cells)
    return table
