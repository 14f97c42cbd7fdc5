"""Where the prediction goes: the predicted time by op kind and by layer, with the measured forward by kind beside
it when one ran (the record: :class:`graphprof.cost.breakdown.PredictionBreakdown`, on the roofline a profile
carries). Pure functions of the profile; nothing is predicted or grouped again here.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.cost.breakdown import TAXONOMIES, MeasuredByKind, PredictionBreakdown
from graphprof.cost.result import Profile
from graphprof.render.formatting import format_percent, format_seconds, seconds_cell, section_table
from graphprof.render.layers import DEFAULT_TOP

__all__ = ["render_prediction_breakdown"]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _kind_title(b: PredictionBreakdown) -> str:
    group = "op kind" if b.taxonomy == "kind" else "op class"
    return f"Predicted time by {group} (an estimate, {b.passes}; {format_seconds(b.total_s)} in all)"


def _kind_caption(b: PredictionBreakdown) -> str:
    caption = f"grouped by {TAXONOMIES[b.taxonomy]}" + ("" if b.faults is None else f"; {b.faults.label}")
    m = b.measured
    if m is None:
        return caption
    fwd = "" if not b.train else "; 'Pred. fwd' is the forward's own prediction, like for like"
    between = "; '(between calls)': Python, module calls and wrappers outside every call, predicted inside the calls' own times"
    unmatched = f"; {format_seconds(m.unmatched_s)} of calls the dry run did not record in their layer" if m.unmatched_s else ""
    return f"{caption}. {m.label}{fwd}{between}{unmatched}"


def _kind_table(b: PredictionBreakdown) -> Table:
    """One row per kind: calls, predicted seconds and share; with a measurement, the forward's measured
    seconds beside the forward's predicted ones and their ratio, then the time between calls and a total."""
    m = b.measured
    train = b.train
    table = section_table(_kind_title(b), caption=_kind_caption(b), optional=("Calls", "Pred. fwd", "Share"))
    table.add_column("Kind", no_wrap=True, overflow="ellipsis")
    for name in ("Calls", "Predicted", "Share") + (("Pred. fwd",) if m is not None and train else ()):
        table.add_column(name, justify="right", no_wrap=True)
    if m is not None:
        table.add_column("Measured fwd", justify="right", no_wrap=True)
        table.add_column("Meas./pred.", justify="right", no_wrap=True)
    measured = {k.kind: k for k in m.kinds} if m is not None else {}
    for k in b.kinds:
        cells = [k.name, str(k.calls), seconds_cell(k.predicted_s), format_percent(k.share)]
        got = measured.get(k.name)
        if m is not None:
            cells += _measured_cells(got.predicted_s if got else 0.0, got.measured_s if got else 0.0, train)
        table.add_row(*cells)
    for extra in (k for k in m.kinds if k.kind not in {kt.name for kt in b.kinds}) if m is not None else ():
        table.add_row(extra.kind, "-", "-", "-", *_measured_cells(extra.predicted_s, extra.measured_s, train))
    if m is not None:
        _measured_tail(table, b, m, train)
    return table


def _measured_cells(predicted_s: float, measured_s: float, train: bool) -> list[str]:
    cells = [seconds_cell(predicted_s)] if train else []
    return [*cells, seconds_cell(measured_s), _ratio(measured_s / predicted_s if predicted_s > 0 else None)]


def _measured_tail(table: Table, b: PredictionBreakdown, m: MeasuredByKind, train: bool) -> None:
    """The measured time between calls (nothing predicted apart for it) and the totals."""
    table.add_row("(between calls)", "-", "-", "-", *(["-"] if train else []), seconds_cell(m.between_s), "-", style="dim")
    total = [seconds_cell(m.predicted_s)] if train else []
    ratio = _ratio(m.measured_s / m.predicted_s if m.predicted_s > 0 else None)
    calls = str(sum(k.calls for k in b.kinds))
    table.add_row("TOTAL", calls, seconds_cell(b.total_s), "100.0%", *total, seconds_cell(m.measured_s), ratio, style="bold")


def _layer_table(b: PredictionBreakdown, top: int) -> Table:
    shown = b.layers[: max(0, top)]
    title = f"Top {len(shown)} of {b.layer_count} layers by predicted time (an estimate, {b.passes})"
    table = section_table(title, optional=("Type",))
    table.add_column("#", justify="right")
    table.add_column("Layer", no_wrap=True, overflow="ellipsis")
    table.add_column("Type", no_wrap=True, overflow="ellipsis")
    table.add_column("Predicted", justify="right", no_wrap=True)
    table.add_column("Share", justify="right", no_wrap=True)
    for rank, layer in enumerate(shown, 1):
        table.add_row(str(rank), layer.name, layer.type, seconds_cell(layer.predicted_s), format_percent(layer.share))
    return table


def render_prediction_breakdown(profile: Profile, *, top: int = DEFAULT_TOP) -> RenderableType | None:
    """The predicted time by kind (with the measured forward beside it) and the ``top`` layers by predicted
    time; ``None`` when the roofline ``profile`` carries has no prediction (no calibrated device)."""
    b = profile.roofline.breakdown if profile.roofline is not None else None
    if b is None:
        return None
    parts: list[RenderableType] = [_kind_table(b)]
    if top > 0 and b.layers:
        parts += [Text(), _layer_table(b, top)]
    return Group(*parts)
