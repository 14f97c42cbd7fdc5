"""Renderers of a :class:`graphprof.scaling.result.Sweep`: a Rich table, the growth fits, CSV, a log-log chart
(its JSON file is :meth:`Sweep.to_dict`, written by :func:`graphprof.render.sink.write_result`).

Pure functions of the sweep: nothing here runs a model. matplotlib is imported only when a chart is
drawn (:func:`graphprof.render.plots.require_matplotlib`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.base.atomic import check_path, write_atomic
from graphprof.base.choices import SweepAxis
from graphprof.base.limits import format_bytes
from graphprof.errors import OutputError
from graphprof.render.files import csv_text
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import format_count, format_seconds
from graphprof.render.plots import PLOT_FORMATS, _figure, _save, require_matplotlib
from graphprof.scaling.result import METRICS, Sweep

__all__ = ["check_sweep_plot", "render_sweep", "render_sweep_csv", "render_sweep_plot", "write_sweep_plot"]

#: Column titles of the metrics, and how each value is shown.
_TITLES = {
    "params": "Params",
    "macs": "MACs",
    "flops": "FLOPs",
    "bytes": "Bytes moved",
    "peak_activation_bytes": "Peak act.",
    "estimated_seconds": "Lower bound",  # the roofline's: max(FLOPs / peak, bytes / bandwidth) per layer
    "measured_seconds": "Measured",
    "measured_peak_bytes": "Meas. peak",
}


def _show(metric: str, value: Any) -> str:
    if value is None:
        return "-"
    if metric in ("bytes", "peak_activation_bytes", "measured_peak_bytes"):
        return format_bytes(int(value))
    if metric.endswith("seconds"):
        return format_seconds(value)
    return format_count(value)


def _metrics(sweep: Sweep) -> list[str]:
    """The metrics with a value in at least one row (no empty estimate or measurement columns)."""
    return [m for m in METRICS if any(row.metric(m) is not None for row in sweep.rows)]


def _value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def render_sweep(sweep: Sweep) -> RenderableType:
    """The sweep table, then one line per metric's growth fit (and, for sequence length, the
    linear and quadratic terms of MACs with the quadratic share at the largest point)."""
    metrics = _metrics(sweep)
    title = f"{sweep.model}: {sweep.label} sweep" + (f" (times: roofline lower bounds on {sweep.hardware})" if sweep.hardware else "")
    # Text: a name like hf:llama is no emoji code. No side rules, and cells fold rather than cut to "…":
    # a pipe or a narrow terminal is 80 columns, and every figure must survive it.
    table = ReportTable(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column(sweep.label, justify="right", overflow="fold")
    table.add_column("Inputs", overflow="fold")
    for metric in metrics:
        table.add_column(_TITLES[metric], justify="right", overflow="fold")
    for row in sweep.rows:
        table.add_row(
            _value(row.value), row.inputs.replace(" float32", "").replace(" int64", ""), *(_show(m, row.metric(m)) for m in metrics)
        )
    if sweep.stopped_at is not None:
        table.add_row(_value(sweep.stopped_at), "out of memory", *("-" for _ in metrics))
    parts: list[RenderableType] = [table]

    fits = ReportTable(title="Growth: metric ∝ value^exponent", title_justify="left")
    fits.add_column("Metric")
    fits.add_column("Exponent", justify="right")
    fits.add_column("R²", justify="right")
    for metric, fit in sweep.fits().items():
        fits.add_row(_TITLES[metric], f"{fit.exponent + 0.0:.3f}".replace("-0.000", "0.000"), f"{fit.r2:.3f}")
    if fits.row_count:
        parts.append(fits)
    if sweep.axis is SweepAxis.SEQ_LEN and len(sweep.rows) >= 3:
        quad = sweep.fit_quadratic("macs")
        largest = sweep.rows[-1].value
        sign = "-" if round(quad.constant) < 0 else "+"
        parts.append(
            f"MACs = {quad.linear:,.0f}·S + {quad.quadratic:,.0f}·S² {sign} {abs(round(quad.constant)):,}  (R² {quad.r2:.3f}); "
            f"the S² term (attention) is {quad.quadratic_share(largest):.1%} of MACs at S = {_value(largest)}"
        )
    knee = sweep.knee()
    if sweep.measured:
        if knee is not None:
            parts.append(
                f"knee at {sweep.label} {_value(knee.value)}: launch-bound below it, time grows as {sweep.label}^{knee.slope:.2f} above it"
            )
        else:
            parts.append("no knee: measured time is launch-bound throughout, or never was, over this range")
    if sweep.stopped_at is not None:
        parts.append(f"out of device memory at {_value(sweep.stopped_at)}: the last size that fit is {_value(sweep.last_fit or 0)}")
    parts.extend(f"note: {note}" for note in sweep.notes if "out of device memory" not in note)
    return Group(*parts)


def render_sweep_csv(sweep: Sweep) -> str:
    """One row per point: ``value``, ``inputs`` and every metric (empty where not measured/estimated)."""
    columns = ["value", "inputs", *METRICS]
    return csv_text(columns, (row.to_dict() for row in sweep.rows))


#: Metrics drawn on the chart (the estimate and measurement go on a second panel, in seconds).
_COUNT_METRICS = ("macs", "flops", "bytes", "peak_activation_bytes", "params")


def render_sweep_plot(sweep: Sweep, fmt: str = "png") -> bytes:
    """Counts against the axis on log-log axes, each labelled with its fitted exponent; a second panel
    shows estimated and measured time when the sweep has them (with the knee marked)."""
    from matplotlib.ticker import NullLocator

    times = [m for m in ("estimated_seconds", "measured_seconds") if sweep.series(m)[0]]
    figure = _figure(11 if times else 7, 5)
    axes = figure.subplots(1, 2 if times else 1, squeeze=False)[0]
    fits = sweep.fits()
    xs_all = [row.value for row in sweep.rows]
    for metric in _COUNT_METRICS:
        xs, ys = sweep.series(metric)
        if not xs or not all(y > 0 for y in ys):
            continue
        fit = fits.get(metric)
        label = _TITLES[metric] + (f"  (∝ x^{abs(fit.exponent) if abs(fit.exponent) < 5e-3 else fit.exponent:.2f})" if fit else "")
        axes[0].plot(xs, ys, marker="o", label=label)
    axes[0].set_title(f"{sweep.model}: counts vs {sweep.label}")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(sweep.label)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xticks(xs_all)
        ax.set_xticklabels([_value(x) for x in xs_all], rotation=45 if len(xs_all) > 6 else 0)
        ax.xaxis.set_minor_locator(NullLocator())
    axes[0].set_ylabel("count (MACs, FLOPs) / bytes")
    axes[0].legend(fontsize=8, loc="best")
    if times:
        for metric in times:
            xs, ys = sweep.series(metric)
            axes[1].plot(xs, ys, marker="s", label=_TITLES[metric])
        knee = sweep.knee()
        if knee is not None:
            axes[1].axvline(knee.value, color="grey", linestyle="--", label=f"knee ({_value(knee.value)})")
        axes[1].set_title("time per pass" + (f" ({sweep.hardware})" if sweep.hardware else ""))
        axes[1].set_ylabel("seconds")
        axes[1].legend(fontsize=8)
    return _save(figure, fmt)


def check_sweep_plot(path: str | os.PathLike[str]) -> str:
    """Before the sweep: the chart's format from ``path``'s suffix (``.png``, ``.svg`` or ``.pdf``), matplotlib
    installed, the folder writable; else a one-line :class:`OutputError` (or :class:`MissingDependencyError`)."""
    target = Path(path)
    fmt = target.suffix.lstrip(".").lower()
    if fmt not in PLOT_FORMATS:
        raise OutputError(f"cannot draw {str(target)!r}: use a .png, .svg or .pdf file")
    require_matplotlib()
    check_path(target)
    return fmt


def write_sweep_plot(sweep: Sweep, path: str | os.PathLike[str]) -> Path:
    """Draw the chart into ``path`` (``.png``, ``.svg`` or ``.pdf``)."""
    target = Path(path)
    fmt = check_sweep_plot(target)
    write_atomic(target, render_sweep_plot(sweep, fmt))
    return target
