"""Rich renderables for the terminal: the sections of the seeds' report.

1. Hierarchical graph profile: the module tree (folded to a depth), params, shapes, MACs, FLOPs, memory.
2. Per-layer details (``verbose``): every graph node, and the aten-op breakdown.
3. Model summary: totals, the memory split, subgraphs, arithmetic intensity, capture method, run kind.
4. Operation breakdown: FLOPs share and count by layer type (seed 002).
5. Bottleneck analysis: compute- vs memory-bound against a device's ridge point or the fixed threshold,
   then seed 002's four fixed arithmetic-intensity bands (graphprof/cost/roofline.py).
6. Top-N layers by FLOPs (seed 002).
7. Footer: unsupported ops by name and count, and the notes.

Every function is a pure function of a :class:`Profile` (and its :class:`Roofline`); it returns a Rich
renderable and prints nothing. Counts use decimal K/M/G/T suffixes, bytes decimal kB/MB/GB (so that
FLOPs/byte reads straight off the columns), times s/ms/us.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from graphprof.base.choices import Execution, Lowering, Mode, OpStatus
from graphprof.base.inputs import format_inputs
from graphprof.base.limits import format_bytes
from graphprof.base.names import abbreviate
from graphprof.capture.methods import NOT_TRIED
from graphprof.cost.aggregate import ancestors
from graphprof.cost.result import ModuleRow, Profile
from graphprof.cost.roofline import INTENSITY_BANDS, Bound, Roofline, intensity_band
from graphprof.devices.hardware import Hardware, hardware_aliases
from graphprof.render.common import profile_roofline

__all__ = [
    "DEFAULT_TOP",
    "DEFAULT_TREE_ROWS",
    "format_count",
    "format_seconds",
    "format_percent",
    "auto_depth",
    "render_tree",
    "render_layers",
    "render_summary",
    "render_op_breakdown",
    "render_aten_breakdown",
    "render_bottlenecks",
    "describe_threshold",
    "render_top_layers",
    "render_footer",
    "render_intensity_bands",
    "render_report",
    "render_hardware",
]

#: Layers listed by ``render_top_layers`` unless told otherwise (seed 002 lists ten).
DEFAULT_TOP = 10
#: Rows the folded module tree aims to fit in; the deepest level that fits is shown.
DEFAULT_TREE_ROWS = 40
#: Layer types listed by the operation breakdown before the rest are summed into one row.
BREAKDOWN_ROWS = 10

_NAME_WIDTH = 36
_TYPE_WIDTH = 18


# ---- formatting ---------------------------------------------------------------------------------
def format_count(value: int | float, unit: str = "") -> str:
    """``11_689_512`` -> ``"11.69M"``; K/M/G/T with two decimals."""
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.2f}{suffix}{unit}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}{unit}"
    return f"{int(value)}{unit}"


def format_seconds(value: float | None) -> str:
    """``0.00123`` -> ``"1.23 ms"``, ``1.3e-5`` -> ``"13.0 us"``; three significant digits, ``"-"`` for ``None``."""
    if value is None:
        return "-"
    if value == 0:
        return "0 s"
    for factor, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if value >= factor or suffix == "ns":
            scaled = value / factor
            digits = 0 if scaled >= 100 else 1 if scaled >= 10 else 2
            return f"{scaled:.{digits}f} {suffix}"
    raise AssertionError("unreachable")


def format_percent(share: float | None) -> str:
    """``0.1234`` -> ``"12.3%"``; a share that rounds to zero is ``"0.0%"``, never ``"-0.0%"``."""
    return "-" if share is None else f"{round(share * 100, 1) + 0.0:.1f}%"


def _num(value: int) -> str:
    return "-" if value == 0 else format_count(value)


def _mem(value: int) -> str:
    return "-" if value == 0 else format_bytes(value)


def _time(value: float | None) -> str:
    return "-" if not value else format_seconds(value)


def _ai(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _shape(shapes: Sequence[tuple[int, ...]]) -> str:
    if not shapes:
        return "-"
    text = ", ".join("x".join(str(s) for s in shape) or "scalar" for shape in shapes[:2])
    return text + (f" (+{len(shapes) - 2})" if len(shapes) > 2 else "")


def short_names(names: Sequence[str], width: int | None) -> list[str]:
    """Each name abbreviated to ``width`` (:func:`graphprof.base.names.abbreviate`), unless that would make two
    rows shown together read the same: those keep their full names (folded over lines, never cut).
    ``width=None`` keeps every name in full.

    >>> short_names(["model.layers.0.post_attention_layernorm", "model.layers.1.post_attention_layernorm"], 24)
    ['model.layers.0.post_attention_layernorm', 'model.layers.1.post_attention_layernorm']
    """
    if width is None:
        return list(names)
    short = [abbreviate(n, width) for n in names]
    sources: dict[str, set[str]] = {}
    for name, s in zip(names, short, strict=True):
        sources.setdefault(s, set()).add(name)
    return [s if len(sources[s]) == 1 else abbreviate(n, 10**6) for n, s in zip(names, short, strict=True)]


class FullNamesIfTheyFit:
    """A table drawn with its names in full when it fits the width it is drawn at (a wide terminal, a
    file), else with the names shortened by :func:`short_names` (still unique among the rows shown).

    ``build(width)`` makes the table: ``width`` is ``None`` for full names, else the name column's width.
    """

    def __init__(self, build: Callable[[int | None], Table]) -> None:
        self.build = build

    def _table(self, console: Console, options: ConsoleOptions) -> Table:
        full = self.build(None)
        natural = Measurement.get(console, options.update(max_width=10**6), full).maximum  # unclamped
        return full if natural <= options.max_width else self.build(_NAME_WIDTH)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Table]:
        yield self._table(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._table(console, options))


def _table(title: str, *, caption: str | None = None, header: bool = True) -> Table:
    return Table(
        title=title,
        caption=caption,
        title_justify="left",
        caption_justify="left",
        title_style="bold",
        caption_style="dim",
        box=box.SIMPLE_HEAD,
        show_header=header,
        show_edge=False,
        pad_edge=False,
    )


def _roofline(profile: Profile, roofline: Roofline | None) -> Roofline:
    return roofline if roofline is not None else profile_roofline(profile)


# ---- 1. hierarchical graph profile -------------------------------------------------------------
def auto_depth(modules: Sequence[ModuleRow], max_rows: int = DEFAULT_TREE_ROWS) -> int:
    """The deepest tree level whose rows (that level and above) number at most ``max_rows``; at least 1."""
    if not modules:
        return 0
    deepest = max(m.depth for m in modules)
    best = 1
    for depth in range(1, deepest + 1):
        if sum(1 for m in modules if m.depth <= depth) <= max_rows:
            best = depth
    return best


def _module_shapes(profile: Profile) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Each module's output shape: its own output where the module is a layer itself (every module in the
    eager capture, a leaf's call in a graph), else that of its last child called as a module (YOLO's
    ``model`` Sequential, whose children its parent calls one by one), else the output of the last graph
    node inside it."""
    shapes: dict[str, tuple[tuple[int, ...], ...]] = {}
    child: dict[str, tuple[tuple[int, ...], ...]] = {}
    own: dict[str, tuple[tuple[int, ...], ...]] = {}
    for row in profile.layers:
        if row.output_shapes:
            for path in ancestors(row.module):
                shapes[path] = row.output_shapes
            if row.name == (row.module or "(model)"):
                own[row.module or ""] = row.output_shapes
                if row.module:
                    child[row.module.rpartition(".")[0]] = row.output_shapes
    return {**shapes, **child, **own}


def render_tree(
    profile: Profile,
    *,
    depth: int | None = None,
    show_shapes: bool = False,
    max_rows: int = DEFAULT_TREE_ROWS,
) -> RenderableType:
    """The module tree with each module's summed cost, folded at ``depth`` (default: what fits ``max_rows``).

    A module's row is the exact sum of the graph nodes inside it, so the first row (the model) is the
    total. With ``depth=None`` the deepest level that fits ``max_rows`` rows is shown, and if even the
    first level does not fit, its first ``max_rows`` rows are.
    """
    modules = profile.modules
    deepest = max((m.depth for m in modules), default=0)
    shown = auto_depth(modules, max_rows) if depth is None else max(0, depth)
    rows = [m for m in modules if m.depth <= shown]
    hidden = 0
    if depth is None and len(rows) > max_rows:
        hidden = len(rows) - max_rows
        rows = rows[:max_rows]
    folded = sum(1 for m in modules if m.depth > shown)
    if shown >= deepest:
        caption = f"full tree, {len(modules)} modules"
    else:
        caption = f"folded at depth {shown} of {deepest} ({folded} deeper modules summed into their parents); --depth N to unfold"
    if hidden:
        caption += f"; {hidden} more rows at this depth not shown (--depth or --verbose)"
    return FullNamesIfTheyFit(lambda width: _tree_table(profile, rows, caption, show_shapes, width))


def _tree_table(profile: Profile, rows: list[ModuleRow], caption: str, show_shapes: bool, width: int | None) -> Table:
    table = _table("Hierarchical graph profile", caption=caption)
    indent_room = 2 * max((m.depth for m in rows), default=0)
    table.add_column("Module", overflow="fold", max_width=None if width is None else width + indent_room)
    table.add_column("Type", overflow="fold", max_width=_TYPE_WIDTH)
    table.add_column("Params", justify="right", overflow="fold")
    if show_shapes:
        table.add_column("Output shape", overflow="fold", max_width=20)
    table.add_column("MACs", justify="right", overflow="fold")
    table.add_column("FLOPs", justify="right", overflow="fold")
    table.add_column("Memory", justify="right", overflow="fold")
    table.add_column("AI", justify="right", overflow="fold")
    shapes = _module_shapes(profile) if show_shapes else {}
    labels = short_names([m.path for m in rows], width)  # indented by depth, within the column's room
    for module, short in zip(rows, labels, strict=True):
        indent = "  " * module.depth
        label = profile.model_name if module.path == "" else short
        cost = module.cost
        cells = [escape(indent + label), module.type, _num(module.params)]  # a name is text, never markup
        if show_shapes:
            cells.append(_shape(shapes.get(module.path, ())))
        cells += [_num(cost.macs), _num(cost.flops), _mem(cost.bytes_moved), _ai(cost.arithmetic_intensity)]
        table.add_row(*cells, style="bold" if module.depth == 0 else None)
    return table


# ---- 2. per-layer details ------------------------------------------------------------------------
def render_layers(profile: Profile, roofline: Roofline | None = None, *, show_shapes: bool = False) -> RenderableType:
    """Every graph node in execution order with its cost, arithmetic intensity, verdict and time estimate."""
    checked = _roofline(profile, roofline)
    return FullNamesIfTheyFit(lambda width: _layers_table(profile, checked, show_shapes, width))


def _layers_table(profile: Profile, roofline: Roofline, show_shapes: bool, width: int | None) -> Table:
    timed = roofline.hardware is not None
    total = profile.total
    table = _table(f"Per-layer details ({len(profile.layers)} graph nodes)")
    table.show_footer = True
    table.add_column("Layer", footer="Total", overflow="fold", max_width=width)
    table.add_column("Type", overflow="fold", max_width=_TYPE_WIDTH)
    table.add_column("Params", justify="right", overflow="fold", footer=_num(profile.graph_params))
    if show_shapes:
        table.add_column("Output shape", overflow="fold", max_width=20)
    table.add_column("MACs", justify="right", overflow="fold", footer=_num(total.macs))
    table.add_column("FLOPs", justify="right", overflow="fold", footer=_num(total.flops))
    table.add_column("Memory", justify="right", overflow="fold", footer=_mem(total.bytes_moved))
    table.add_column("AI", justify="right", overflow="fold", footer=_ai(total.arithmetic_intensity))
    table.add_column("Bound", overflow="fold")
    saved = profile.mode is Mode.TRAIN
    if saved:  # bytes kept for backward: the activation memory of a training step, layer by layer
        table.add_column("Saved", justify="right", overflow="fold", footer=_mem(profile.saved_activation_bytes))
    if timed:
        table.add_column("Est. time", justify="right", overflow="fold", footer=format_seconds(roofline.seconds))
    names = short_names([row.name for row in profile.layers], width)
    for row, verdict, name in zip(profile.layers, roofline.layers, names, strict=True):
        cost = row.cost
        cells = [name, row.type, _num(row.params)]
        if show_shapes:
            cells.append(_shape(row.output_shapes))
        cells += [
            _num(cost.macs),
            _num(cost.flops),
            _mem(cost.bytes_moved),
            _ai(cost.arithmetic_intensity),
            verdict.bound.short,
        ]
        if saved:
            cells.append(_mem(row.saved_bytes))
        if timed:
            cells.append(_time(verdict.seconds))
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
    table = _table("Aten op breakdown")
    table.add_column("Aten op", overflow="fold", max_width=40)
    table.add_column("Status", overflow="fold")
    table.add_column("Calls", justify="right")
    table.add_column("FLOPs", justify="right")
    table.add_column("Share", justify="right")
    table.add_column("Memory", justify="right")
    for key in sorted(calls, key=lambda k: (-flops[k], -moved[k], k)):
        share = flops[key] / total if total else 0.0
        table.add_row(
            key[0], key[1].replace("_", "-"), str(calls[key]), _num(flops[key]), format_percent(share), _mem(moved[key])
        )
    return table


# ---- 3. model summary -----------------------------------------------------------------------------
def _flop_rows(profile: Profile) -> list[tuple[str, str]]:
    """The summary's FLOPs beyond the total: executed and useful, per token, forward and backward."""
    total = profile.total
    rows: list[tuple[str, str]] = []
    if profile.useful_flops != total.flops or profile.executed_flops != total.flops:
        rows.append((
            "FLOPs executed / useful",
            f"{format_count(profile.executed_flops)} / {format_count(profile.useful_flops)} (causal attention: "
            "counted over the full score square; a tiled kernel skips the masked tiles; useful = unmasked scores)",
        ))  # fmt: skip
    per_token = profile.per_token
    if per_token is not None:
        rows.append((
            "Model FLOPs per token",
            f"{format_count(round(per_token.model_forward))} forward, {format_count(round(per_token.model_train))} "
            f"forward + backward (weight and token-mixing products, attention unmasked only, train = 3 x forward); "
            f"executed {format_count(round(per_token.executed))}, counted {format_count(round(per_token.counted))} "
            f"per token over {per_token.tokens:,} tokens",
        ))  # fmt: skip
    if profile.mode is Mode.TRAIN:
        rows.append(
            (
                "FLOPs forward / backward",
                f"{format_count(profile.forward.flops)} / {format_count(profile.backward.flops)}",
            )
        )
    return rows


def render_summary(profile: Profile, roofline: Roofline | None = None) -> RenderableType:
    """Totals, the memory split (inputs, outputs, weights), graph and capture facts, and the kind of run."""
    roofline = _roofline(profile, roofline)
    table = _table(f"Model summary: {escape(profile.model_name)}", header=False)  # MODEL_REGISTRY[key] is not a style
    table.add_column("key", style="bold", overflow="fold")
    table.add_column("value", overflow="fold")
    total = profile.total
    params = f"{format_count(profile.total_params)} ({profile.total_params:,})"
    if profile.trainable_params != profile.total_params:
        params += f", {profile.trainable_params:,} trainable"
    rows: list[tuple[str, str]] = [
        ("Model", f"{escape(profile.model_name)} ({profile.family})"),
        ("Input", format_inputs(profile.inputs) or "-"),
        ("Mode / dtype", f"{profile.mode} / {profile.dtype}"),
        ("Parameters", params),
        ("MACs", f"{format_count(total.macs)} ({total.macs:,})"),
        ("FLOPs", f"{format_count(total.flops)} ({total.flops:,})"),
    ]
    rows += _flop_rows(profile)
    weights = format_bytes(profile.param_bytes)
    if profile.buffer_bytes:
        weights += f" (+ {format_bytes(profile.buffer_bytes)} buffers)"
    ai = total.arithmetic_intensity
    rows += [
        ("Memory: inputs", format_bytes(profile.input_bytes)),
        ("Memory: outputs", format_bytes(profile.output_bytes)),
        ("Memory: weights", weights),
        (
            "Memory: peak activations",
            format_bytes(profile.peak_activation_bytes)
            + (f" (at {profile.peak_activation_layer})" if profile.peak_activation_layer else ""),
        ),
        *(
            [
                (
                    "Memory: saved for backward",
                    f"{format_bytes(profile.saved_activation_bytes)} (the Saved column: activations a training step holds until its backward)",
                )
            ]
            if profile.mode is Mode.TRAIN
            else []
        ),
        (
            "Memory moved",
            f"{format_bytes(total.bytes_moved)} (read {format_bytes(total.bytes_read)}, written {format_bytes(total.bytes_written)})",
        ),
        ("Arithmetic intensity", "-" if ai is None else f"{ai:.1f} FLOPs/byte (total FLOPs / bytes moved)"),
        ("Graph", f"{len(profile.layers)} nodes in {profile.num_subgraphs} captured subgraph(s)"),
        ("Capture", profile.capture_method),
    ]
    rows += [_attempt_row(method, error) for method, error in profile.capture_attempts]
    rows.append(
        ("Run", f"{'dry run' if profile.execution is Execution.DRY_RUN else 'real run'}: {profile.execution_note}")
    )
    if profile.lowering is not Lowering.CPU:
        rows.append(("Lowering", f"{profile.lowering}: attention costed as the fused kernels a GPU runs"))
    if roofline.hardware is not None:
        rows.append(("Hardware", f"{roofline.hardware.label} ({roofline.precision})"))
        rows.append(("Roofline time (lower bound)", format_seconds(roofline.seconds)))
        if roofline.predicted_seconds is not None:
            rows.append(
                (
                    "Predicted time",
                    _predicted_text(roofline) + " (of a plain forward, as --measure's 'forward' times it)",
                )
            )
    for key, value in rows:
        table.add_row(key, value)
    return table


def _predicted_text(roofline: Roofline) -> str:
    """``"22.1 ms (80%: 19.8–24.9 ms)"``, and where the calibration's records came from."""
    text = format_seconds(roofline.predicted_seconds)
    interval = roofline.predicted_interval
    if interval is not None:
        low, high = format_seconds(interval.low), format_seconds(interval.high)
        if low.split(" ")[-1] == high.split(" ")[-1]:
            low = low.split(" ")[0]  # "19.8–24.9 ms"
        text += f" (80%: {low}–{high})"
    records = roofline.calibration.summary().get("records") if roofline.calibration is not None else None
    if records:
        text += f"; {records['calibration']:,} calibration records, {records['own_runs']:,} from your runs"
    return text


def _attempt_row(method: str, outcome: str) -> tuple[str, str]:
    """A capture method before the one used: ``failed`` with its error, or ``not tried`` and why (``auto``
    skips Dynamo export for the families whose record says it costs too long, YOLO's among them)."""
    if outcome.startswith(NOT_TRIED):
        return f"  {method} not tried", outcome.removeprefix(NOT_TRIED).lstrip(": ") or "-"
    return f"  {method} failed", outcome


# ---- 4. operation breakdown -------------------------------------------------------------------------
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
    table = _table("Operation breakdown (by layer type)")
    table.show_footer = True
    table.add_column("Type", footer="Total", overflow="fold", max_width=24)
    table.add_column("Layers", justify="right", footer=str(sum(count.values())))
    table.add_column("FLOPs", justify="right", footer=_num(total_flops))
    table.add_column("FLOPs share", justify="right", footer=format_percent(1.0 if total_flops else 0.0))
    table.add_column("Memory", justify="right", footer=_mem(total_bytes))
    table.add_column("Memory share", justify="right", footer=format_percent(1.0 if total_bytes else 0.0))

    def share(part: int, whole: int) -> str:
        return format_percent(part / whole if whole else 0.0)

    for kind in shown:
        table.add_row(
            kind,
            str(count[kind]),
            _num(flops[kind]),
            share(flops[kind], total_flops),
            _mem(moved[kind]),
            share(moved[kind], total_bytes),
        )
    if rest:
        f, m = sum(flops[k] for k in rest), sum(moved[k] for k in rest)
        table.add_row(
            f"other ({len(rest)} types)",
            str(sum(count[k] for k in rest)),
            _num(f),
            share(f, total_flops),
            _mem(m),
            share(m, total_bytes),
        )
    return table


# ---- 5. bottleneck analysis -------------------------------------------------------------------------
def describe_threshold(roofline: Roofline) -> str:
    """One line saying which threshold separates compute- from memory-bound, and where it comes from."""
    if roofline.hardware is None or roofline.peak_flops is None or roofline.bandwidth is None:
        return (
            f"threshold: fixed {roofline.threshold:g} FLOPs/byte (graphprof's default with no hardware given: "
            "--hardware NAME or --peak-tflops/--bandwidth-gbs give a device's ridge point and time estimates)"
        )
    return (
        f"threshold: ridge point of {roofline.hardware.label} at {roofline.precision} = "
        f"{roofline.peak_flops / 1e12:g} TFLOP/s / {roofline.bandwidth / 1e9:,.0f} GB/s = {roofline.threshold:.1f} FLOPs/byte"
    )


def render_bottlenecks(profile: Profile, roofline: Roofline | None = None) -> RenderableType:
    """How many layers, and what share of FLOPs (and estimated time), are compute- or memory-bound."""
    roofline = _roofline(profile, roofline)
    timed = roofline.hardware is not None
    table = _table("Bottleneck analysis")
    table.add_column("Verdict", overflow="fold")
    table.add_column("Rule", overflow="fold")
    table.add_column("Layers", justify="right")
    table.add_column("FLOPs", justify="right")
    table.add_column("FLOPs share", justify="right")
    if timed:
        table.add_column("Est. time", justify="right")
        table.add_column("Time share", justify="right")
    rules = {
        Bound.COMPUTE: f"AI > {roofline.threshold:.1f}",
        Bound.MEMORY: f"AI <= {roofline.threshold:.1f}",
        Bound.NONE: "no FLOPs, no bytes",
    }
    names = {Bound.COMPUTE: "Compute-bound", Bound.MEMORY: "Memory-bound", Bound.NONE: "No work"}
    for bound in Bound:
        layers = roofline.of(bound)
        if bound is Bound.NONE and not layers:
            continue
        cells = [
            names[bound],
            rules[bound],
            str(len(layers)),
            _num(sum(layer.flops for layer in layers)),
            format_percent(roofline.flops_share(bound)),
        ]
        if timed:
            cells += [_time(sum(layer.seconds or 0.0 for layer in layers)), format_percent(roofline.time_share(bound))]
        table.add_row(*cells)
    lines: list[RenderableType] = [table, Text(describe_threshold(roofline), style="dim")]
    if timed:
        lines.append(
            Text(
                f"Roofline time (estimate): {format_seconds(roofline.seconds)} = sum over layers of "
                "max(FLOPs / peak, bytes / bandwidth); an idealised lower bound, not a measurement",
                style="dim",
            )
        )
    return Group(*lines)


def render_intensity_bands(profile: Profile) -> RenderableType:
    """Layers and FLOPs in each of seed 002's four arithmetic-intensity bands (fixed, independent of the
    device, :data:`graphprof.cost.roofline.INTENSITY_BANDS`), and the band of the whole model's intensity."""
    layers = {band.name: 0 for band in INTENSITY_BANDS}
    flops = {band.name: 0 for band in INTENSITY_BANDS}
    for row in profile.layers:
        band = intensity_band(row.cost.arithmetic_intensity, flops=row.cost.flops)
        if band is not None:
            layers[band.name] += 1
            flops[band.name] += row.cost.flops
    total = profile.total_flops
    table = _table("Arithmetic intensity bands (seed 002's interpretation, independent of the device)")
    for column in ("Band", "Rule", "Layers", "FLOPs", "FLOPs share", "Means"):
        table.add_column(
            column, justify="right" if column in ("Layers", "FLOPs", "FLOPs share") else "left", overflow="fold"
        )
    for band in INTENSITY_BANDS:
        share = format_percent(flops[band.name] / total if total else 0.0)
        table.add_row(band.name, band.rule, str(layers[band.name]), _num(flops[band.name]), share, band.meaning)
    ai = profile.arithmetic_intensity
    whole = intensity_band(ai, flops=total)
    if whole is None:
        return table
    shown = "no bytes moved" if ai is None else f"{ai:.1f} FLOPs/byte"
    return Group(table, Text(f"the model as a whole: {shown}, {whole.name.lower()} ({whole.meaning})", style="dim"))


# ---- 6. top layers -----------------------------------------------------------------------------------
def render_top_layers(profile: Profile, roofline: Roofline | None = None, *, top: int = DEFAULT_TOP) -> RenderableType:
    """The ``top`` layers by FLOPs with share, memory, arithmetic intensity, verdict and time estimate."""
    checked = _roofline(profile, roofline)
    ranked = sorted(
        (i for i, row in enumerate(profile.layers) if row.cost.flops > 0),
        key=lambda i: -profile.layers[i].cost.flops,
    )[: max(0, top)]
    return FullNamesIfTheyFit(lambda width: _top_table(profile, checked, ranked, width))


def _top_table(profile: Profile, roofline: Roofline, ranked: list[int], width: int | None) -> Table:
    timed = roofline.hardware is not None
    total = profile.total_flops
    table = _table(f"Top {len(ranked)} layers by FLOPs")
    table.add_column("#", justify="right")
    table.add_column("Layer", overflow="fold", max_width=width)
    table.add_column("Type", overflow="fold", max_width=_TYPE_WIDTH)
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
            str(rank), name, row.type, _num(cost.flops), format_percent(cost.flops / total if total else 0.0),
            _mem(cost.bytes_moved), _ai(cost.arithmetic_intensity), verdict.bound.short,
        ]  # fmt: skip
        if timed:
            cells.append(_time(verdict.seconds))
        table.add_row(*cells)
    return table


# ---- 7. footer ------------------------------------------------------------------------------------------
def render_footer(profile: Profile, roofline: Roofline | None = None) -> RenderableType | None:
    """Unsupported ops by name and count (with where they ran), then the notes; ``None`` when there is nothing."""
    lines: list[Text] = []
    if profile.unsupported:
        calls = sum(u.count for u in profile.unsupported)
        text = Text(
            f"Unsupported ops ({len(profile.unsupported)} ops, {calls} calls; no formula, counted as zero): ",
            style="yellow",
        )
        parts = []
        for u in profile.unsupported:
            where = ", ".join(u.layers[:3]) + (f", +{len(u.layers) - 3} more" if len(u.layers) > 3 else "")
            parts.append(f"{u.op} x{u.count} (in {where})" if where else f"{u.op} x{u.count}")
        text.append("; ".join(parts))
        lines.append(text)
    notes = list(profile.notes) + (list(roofline.notes) if roofline is not None else [])
    lines += [Text(f"note: {note}", style="dim") for note in notes]
    return Group(*lines) if lines else None


def render_report(
    profile: Profile,
    roofline: Roofline | None = None,
    *,
    show_shapes: bool = False,
    verbose: bool = False,
    depth: int | None = None,
    top: int = DEFAULT_TOP,
) -> RenderableType:
    """The whole terminal report, section by section (see the module docstring for the order).

    ``roofline`` defaults to :func:`graphprof.cost.roofline.classify` with no device (the fixed threshold).
    ``verbose`` unfolds the tree completely and adds the per-layer and aten-op tables; ``depth`` folds
    the tree at that level; ``top`` is how many layers the top-N table lists (0: none).
    """
    roofline = _roofline(profile, roofline)
    if verbose and depth is None:
        depth = max((m.depth for m in profile.modules), default=0)
    parts: list[RenderableType] = [render_tree(profile, depth=depth, show_shapes=show_shapes)]
    if verbose:
        parts += [
            Text(),
            render_layers(profile, roofline, show_shapes=show_shapes),
            Text(),
            render_aten_breakdown(profile),
        ]
    parts += [
        Text(),
        render_summary(profile, roofline),
        Text(),
        render_op_breakdown(profile),
        Text(),
        render_bottlenecks(profile, roofline),
    ]
    parts += [Text(), render_intensity_bands(profile)]
    if top > 0:
        parts += [Text(), render_top_layers(profile, roofline, top=top)]
    footer = render_footer(profile, roofline)
    if footer is not None:
        parts += [Text(), footer]
    return Group(*parts)


# ---- device presets ---------------------------------------------------------------------------------------
def render_hardware(presets: Sequence[Hardware], *, detail: bool = False) -> RenderableType:
    """The device presets: dense peak TFLOP/s per dtype, bandwidth and ridge points; their sources below.

    With ``detail`` (one device, usually), every listed precision gets its own ridge point.
    """
    table = _table("Hardware presets (dense peaks, no sparsity)")
    table.add_column("Name", overflow="fold")
    table.add_column("Device", overflow="fold", max_width=28)
    for precision in ("float32", "tf32", "float16", "bfloat16", "float8"):
        table.add_column(
            {"float32": "FP32", "tf32": "TF32", "float16": "FP16", "bfloat16": "BF16", "float8": "FP8"}[precision],
            justify="right",
            no_wrap=True,
        )
    table.add_column("GB/s", justify="right", overflow="fold")
    table.add_column("Ridge", justify="right", overflow="fold")
    for device in presets:
        peaks = [_tflops(device.peak_tflops.get(p)) for p in ("float32", "tf32", "float16", "bfloat16", "float8")]
        best = (
            "bfloat16"
            if "bfloat16" in device.peak_tflops
            else "float16"
            if "float16" in device.peak_tflops
            else "float32"
        )
        ridge = f"{device.ridge_point('float32'):.0f} / {device.ridge_point(best):.0f}"
        aliases = hardware_aliases(device.name)  # accepted too (partition's orin-agx): listed, never a surprise
        name = device.name + (f" (or {', '.join(aliases)})" if aliases else "")
        table.add_row(name, device.label, *peaks, f"{device.bandwidth_gbs:,.0f}", ridge)
    lines: list[RenderableType] = [
        table,
        Text(
            "TFLOP/s; Ridge = FLOPs/byte at FP32 / at BF16 (FP16 or FP32 where that is all the device lists)",
            style="dim",
        ),
    ]
    if detail:
        for device in presets:
            lines.append(Text(f"{device.name}: {device.label} ({device.kind})"))
            for precision, tflops in device.peak_tflops.items():
                lines.append(
                    Text(
                        f"  {precision:>8}: {tflops:g} TFLOP/s, ridge point {device.ridge_point(precision):.1f} FLOPs/byte"
                    )
                )
    sources = Table.grid(padding=(0, 2))
    sources.add_column(no_wrap=True)
    sources.add_column(overflow="fold", style="dim")
    for device in presets:
        sources.add_row(device.name, device.source)
    lines += [Text("Sources (details and URLs: graphprof/devices/hardware.py)", style="bold"), sources]
    return Group(*lines)


def _tflops(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
