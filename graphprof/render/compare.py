"""Models side by side: the model-selection use case of seed 002, as a Rich table, JSON or CSV.

A comparison is a sequence of entries, each a :class:`Profile` or a :class:`ModelFailure` (a model that
could not be profiled, with its one-line error). :func:`graphprof.compare.models.comparison_rows` reduces each
profile to one :class:`ComparisonRow` (classified against the same device); the renderers below are pure
functions of those rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.base.limits import format_bytes
from graphprof.compare.models import COMPARISON_COLUMNS, ComparisonRow
from graphprof.cost.bounds import DEFAULT_THRESHOLD
from graphprof.cost.result import SCHEMA_VERSION
from graphprof.devices.hardware import Hardware
from graphprof.render.files import csv_text
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import format_count, format_percent, format_seconds

__all__ = ["render_comparison", "comparison_dict", "render_comparison_csv"]


def _threshold_line(hardware: Hardware | None, rows: Sequence[ComparisonRow]) -> str:
    if hardware is None:
        return (
            f"compute-bound share: FLOPs in layers with AI > {DEFAULT_THRESHOLD:g} FLOPs/byte (graphprof's fixed threshold; "
            "no hardware given, so no time estimate: --hardware NAME)"
        )
    dtypes = sorted({row.dtype for row in rows if row.dtype})
    ridges = ", ".join(f"{hardware.ridge_point(d):.1f} FLOPs/byte at {hardware.peak_for(d)[1]}" for d in dtypes)
    return (
        f"on {hardware.label}: compute-bound share = FLOPs in layers above the ridge point ({ridges}); "
        "est. time = sum over layers of max(FLOPs / peak, bytes / bandwidth), an idealised lower bound, not a measurement"
    )


def render_comparison(rows: Sequence[ComparisonRow], hardware: Hardware | None = None, *, show_errors: bool = True) -> RenderableType:
    """The models side by side; a failed model's row says so and its one-line error follows the table
    (unless ``show_errors`` is False: the CLI writes those lines to stderr)."""
    title = "Model comparison" + (f" on {hardware.label}" if hardware is not None else "")
    table = ReportTable(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("Model", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("Params", justify="right", no_wrap=True)
    table.add_column("MACs", justify="right", no_wrap=True)
    table.add_column("FLOPs", justify="right", no_wrap=True)
    table.add_column("Memory", justify="right", no_wrap=True)
    table.add_column("AI", justify="right", no_wrap=True)
    table.add_column("Compute-bound", justify="right", no_wrap=True)
    table.add_column("Est. time", justify="right", no_wrap=True)
    for row in rows:
        if row.error is not None:
            table.add_row(row.model, Text("failed", style="red"), *["-"] * 6)
            continue
        assert row.params is not None and row.macs is not None and row.flops is not None and row.memory is not None
        table.add_row(
            row.model,
            format_count(row.params),
            format_count(row.macs),
            format_count(row.flops),
            format_bytes(row.memory),
            "-" if row.arithmetic_intensity is None else f"{row.arithmetic_intensity:.1f}",
            format_percent(row.compute_bound_share),
            format_seconds(row.estimated_time_s),
        )
    inputs = sorted({f"{row.model}: {row.input}" for row in rows if row.input})
    lines: list[RenderableType] = [table]
    if show_errors:
        lines += [Text(f"{row.model}: failed: {row.error}", style="red") for row in rows if row.error is not None]
    lines.append(Text(_threshold_line(hardware, rows), style="dim"))
    if inputs:
        lines.append(Text("inputs: " + "; ".join(inputs), style="dim"))
    return Group(*lines)


def comparison_dict(rows: Sequence[ComparisonRow], hardware: Hardware | None = None) -> dict[str, Any]:
    """A JSON-ready dictionary: ``schema_version``, ``kind: "compare"``, ``hardware`` and ``models``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "compare",
        "hardware": hardware.to_dict() if hardware is not None else None,
        "threshold_flops_per_byte": None if hardware is not None else DEFAULT_THRESHOLD,
        "models": [asdict(row) for row in rows],
    }


def render_comparison_csv(rows: Sequence[ComparisonRow]) -> str:
    """One row per model with :data:`COMPARISON_COLUMNS` (a failed model has only ``model`` and ``error``)."""
    return csv_text(COMPARISON_COLUMNS, [asdict(row) for row in rows])
