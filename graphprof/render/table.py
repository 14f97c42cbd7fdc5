"""Rich renderables for the terminal: the model summary and the per-layer table.

Each function returns a Rich renderable built from a :class:`Profile`; printing is the caller's job.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.names import abbreviate
from graphprof.result import LayerRow, Profile

__all__ = ["format_count", "format_bytes", "render_summary", "render_layers", "render_report"]


def format_count(value: int | float, unit: str = "") -> str:
    """``11_689_512`` -> ``"11.69M"``; K/M/G/T with three significant decimals at most."""
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.2f}{suffix}{unit}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}{unit}"
    return f"{int(value)}{unit}"


def format_bytes(value: int) -> str:
    """Bytes in binary units: ``1536`` -> ``"1.50 KiB"``."""
    size = float(value)
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or suffix == "TiB":
            return f"{size:.0f} {suffix}" if suffix == "B" else f"{size:.2f} {suffix}"
        size /= 1024
    raise AssertionError("unreachable")


def _shape(shapes: tuple[tuple[int, ...], ...]) -> str:
    if not shapes:
        return "-"
    text = ", ".join("x".join(str(s) for s in shape) or "scalar" for shape in shapes[:2])
    return text + (f" (+{len(shapes) - 2})" if len(shapes) > 2 else "")


def render_summary(profile: Profile) -> RenderableType:
    """The model summary: totals, memory split, capture method and how the run was made."""
    table = Table(title=f"Model summary: {profile.model_name}", show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    total = profile.total
    rows: list[tuple[str, str]] = [
        ("Family", profile.family),
        ("Input", "; ".join(profile.input_shapes) or "-"),
        ("Mode / dtype", f"{profile.mode} / {profile.dtype}"),
        ("Parameters", f"{format_count(profile.total_params)} ({profile.total_params:,})"),
        ("MACs", f"{format_count(total.macs)} ({total.macs:,})"),
        ("FLOPs", f"{format_count(total.flops)} ({total.flops:,})"),
    ]
    if profile.mode == "train":
        rows.append(
            ("Forward / backward FLOPs", f"{format_count(profile.forward.flops)} / {format_count(profile.backward.flops)}")
        )
    ai = total.arithmetic_intensity
    rows += [
        ("Memory moved", f"{format_bytes(total.bytes_moved)} (read {format_bytes(total.bytes_read)}, written {format_bytes(total.bytes_written)})"),
        ("Weights / inputs / outputs", f"{format_bytes(profile.param_bytes)} / {format_bytes(profile.input_bytes)} / {format_bytes(profile.output_bytes)}"),
        ("Peak live activations", format_bytes(profile.peak_activation_bytes)),
        ("Arithmetic intensity", f"{ai:.1f} FLOPs/byte" if ai is not None else "-"),
        ("Graph", f"{len(profile.layers)} nodes, {profile.num_subgraphs} subgraph(s), captured by {profile.capture_method}"),
        ("Run", f"{profile.execution}: {profile.execution_note}"),
    ]
    for method, error in profile.capture_attempts:
        rows.append((f"{method} failed", error))
    for key, value in rows:
        table.add_row(key, value)
    return table


def render_layers(profile: Profile, *, show_shapes: bool = False, show_all: bool = False, max_name: int = 40) -> RenderableType:
    """The per-layer table: one row per graph node with cost (zero-cost glue nodes hidden unless ``show_all``)."""
    table = Table(title="Per-layer profile", title_justify="left", show_footer=True)
    total = profile.total
    table.add_column("Layer", footer="Total", no_wrap=True, overflow="ellipsis", max_width=max_name)
    table.add_column("Type", no_wrap=True, overflow="ellipsis", max_width=18)
    table.add_column("Params", justify="right", footer=format_count(profile.graph_params))
    if show_shapes:
        table.add_column("Output shape", overflow="fold", max_width=24)
    table.add_column("MACs", justify="right", footer=format_count(total.macs))
    table.add_column("FLOPs", justify="right", footer=format_count(total.flops))
    table.add_column("Memory", justify="right", footer=format_count(total.bytes_moved, "B"))
    table.add_column("AI", justify="right", footer=_ai(total.arithmetic_intensity))
    for row in profile.layers:
        if not show_all and not _visible(row):
            continue
        cells = [abbreviate(row.name, max_name), row.type, format_count(row.params) if row.params else "-"]
        if show_shapes:
            cells.append(_shape(row.output_shapes))
        cost = row.cost
        cells += [format_count(cost.macs), format_count(cost.flops), format_count(cost.bytes_moved, "B"), _ai(cost.arithmetic_intensity)]
        table.add_row(*cells)
    return table


def _visible(row: LayerRow) -> bool:
    cost = row.cost
    return bool(row.params or cost.flops or cost.bytes_moved or any(op.status == "unsupported" for op in row.ops))


def _ai(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_unsupported(profile: Profile) -> RenderableType | None:
    if not profile.unsupported:
        return None
    text = Text("Unsupported ops (counted as zero, listed so nothing is silently zero): ", style="yellow")
    text.append(", ".join(f"{u.op} x{u.count}" for u in profile.unsupported))
    return text


def render_report(profile: Profile, *, show_shapes: bool = False, verbose: bool = False) -> RenderableType:
    """Summary, per-layer table and the unsupported-op footer, in that order."""
    parts: list[RenderableType] = [render_layers(profile, show_shapes=show_shapes, show_all=verbose), render_summary(profile)]
    footer = render_unsupported(profile)
    if footer is not None:
        parts.append(footer)
    for note in profile.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)
