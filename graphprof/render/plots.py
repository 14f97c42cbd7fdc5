"""Charts of a :class:`Profile`: the roofline and a per-layer FLOPs/bytes bar chart.

matplotlib is optional (``pip install graphprof[plot]``): it is imported here only, when a chart is
drawn, and its absence is a :class:`~graphprof.errors.MissingDependencyError`. Figures are drawn on a
``matplotlib.figure.Figure`` with the Agg canvas directly, never through ``pyplot``, so no global
backend or figure state is touched.
"""

from __future__ import annotations

import importlib.util
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphprof.errors import MissingDependencyError, OutputError
from graphprof.render.files import write_atomic
from graphprof.result import Profile
from graphprof.roofline import Bound, Roofline, classify

__all__ = [
    "PLOT_KINDS",
    "PLOT_FORMATS",
    "parse_plot_spec",
    "require_matplotlib",
    "render_roofline_plot",
    "render_layers_plot",
    "write_plot",
]

#: What ``--plot`` can draw.
PLOT_KINDS = ("roofline", "layers")
#: File formats the Agg canvas writes, by suffix.
PLOT_FORMATS = ("png", "svg", "pdf")
#: Layers drawn by the bar chart unless told otherwise.
DEFAULT_PLOT_LAYERS = 20

_COLORS = {Bound.COMPUTE: "#1f77b4", Bound.MEMORY: "#d62728", Bound.NONE: "#7f7f7f"}


def parse_plot_spec(spec: str) -> tuple[str, Path]:
    """``"roofline=out/a.png"`` -> ``("roofline", Path("out/a.png"))``; ``"layers.png"`` -> ``("layers", ...)``.

    Without ``KIND=``, the kind is read from the file's name: it must contain ``roofline`` or ``layers``.
    The suffix must be one of :data:`PLOT_FORMATS`.
    """
    kind, sep, rest = spec.partition("=")
    if sep and kind in PLOT_KINDS:
        path = Path(rest)
    else:
        path = Path(spec)
        found = [k for k in PLOT_KINDS if k in path.stem.lower()]
        if len(found) != 1:
            raise OutputError(
                f"cannot tell which chart {spec!r} is: name the file roofline*.png or layers*.png, "
                f"or write KIND=PATH with KIND one of {', '.join(PLOT_KINDS)}"
            )
        kind = found[0]
    if path.suffix.lstrip(".").lower() not in PLOT_FORMATS:
        raise OutputError(
            f"cannot draw {str(path)!r}: a chart's file must end in {', '.join('.' + f for f in PLOT_FORMATS)}"
        )
    return kind, path


def require_matplotlib() -> None:
    """Raise :class:`MissingDependencyError` unless matplotlib can be imported (checked without importing it)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingDependencyError(
            "charts need matplotlib: pip install 'graphprof[plot]' (or pip install matplotlib)"
        )


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError(
            "charts need matplotlib: pip install 'graphprof[plot]' (or pip install matplotlib)"
        ) from exc
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Any, fmt: str) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt)
    return buffer.getvalue()


def render_roofline_plot(profile: Profile, roofline: Roofline | None = None, *, fmt: str = "png") -> bytes:
    """A roofline chart: every layer a point at its arithmetic intensity, the device's roof drawn.

    With a device, a layer sits at the performance its roofline estimate implies (FLOPs / estimated
    time), which lies on the roof by construction; marker area follows the layer's FLOPs. Without one,
    the y axis is the layer's FLOPs and the fixed threshold is drawn instead of a roof. Layers that move
    no bytes or do no FLOPs cannot be placed on the log axes and are counted in the caption.
    """
    roofline = roofline if roofline is not None else classify(profile)
    figure = _figure(8.0, 5.5)
    axes = figure.add_subplot()
    placed = [layer for layer in roofline.layers if layer.flops > 0 and layer.bytes > 0]
    skipped = len(roofline.layers) - len(placed)
    total = max(1, roofline.total_flops)
    device = roofline.hardware is not None and roofline.peak_flops is not None and roofline.bandwidth is not None
    for bound in (Bound.COMPUTE, Bound.MEMORY):
        points = [layer for layer in placed if layer.bound is bound]
        if not points:
            continue
        xs = [layer.flops / layer.bytes for layer in points]
        if device:
            ys = [layer.flops / (layer.seconds or 1.0) / 1e12 for layer in points]
        else:
            ys = [float(layer.flops) for layer in points]
        sizes = [12 + 400 * layer.flops / total for layer in points]
        axes.scatter(
            xs,
            ys,
            s=sizes,
            c=_COLORS[bound],
            alpha=0.6,
            edgecolors="black",
            linewidths=0.4,
            label=f"{bound.value} ({len(points)})",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOPs / byte)")
    xs_all = [layer.flops / layer.bytes for layer in placed] or [roofline.threshold]
    lo, hi = min(xs_all + [roofline.threshold]) / 4, max(xs_all + [roofline.threshold]) * 4
    if device:
        assert roofline.hardware is not None and roofline.peak_flops is not None and roofline.bandwidth is not None
        peak, bandwidth = roofline.peak_flops / 1e12, roofline.bandwidth / 1e12
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        axes.plot(grid, [min(peak, x * bandwidth) for x in grid], color="black", linewidth=1.5, label="roof")
        axes.axvline(
            roofline.threshold, color="gray", linestyle="--", linewidth=1, label=f"ridge point {roofline.threshold:.1f}"
        )
        axes.set_ylabel(f"attainable TFLOP/s ({roofline.precision})")
        title = f"Roofline of {profile.model_name} on {roofline.hardware.label}"
        note = "points: roofline estimates (on the roof by construction), area ~ FLOPs"
    else:
        axes.axvline(
            roofline.threshold,
            color="gray",
            linestyle="--",
            linewidth=1,
            label=f"fixed threshold {roofline.threshold:g}",
        )
        axes.set_ylabel("layer FLOPs")
        title = f"Arithmetic intensity of {profile.model_name}'s layers (no hardware given)"
        note = "no device: graphprof's default threshold, no roof; area ~ FLOPs"
    if skipped:
        note += f"; {skipped} layers without FLOPs or bytes not shown"
    axes.set_xlim(lo, hi)
    figure.suptitle(title, fontsize=11)
    axes.set_title(note, fontsize=8, color="dimgray")
    axes.grid(True, which="both", linewidth=0.3, alpha=0.5)
    axes.legend(loc="lower right", fontsize=8)
    return _save(figure, fmt)


def render_layers_plot(
    profile: Profile, roofline: Roofline | None = None, *, top: int = DEFAULT_PLOT_LAYERS, fmt: str = "png"
) -> bytes:
    """Horizontal bars of the ``top`` layers by FLOPs: FLOPs on the left, bytes moved on the right, coloured by verdict."""
    roofline = roofline if roofline is not None else classify(profile)
    ranked = sorted(
        (i for i, row in enumerate(profile.layers) if row.cost.flops > 0), key=lambda i: -profile.layers[i].cost.flops
    )[: max(1, top)]
    figure = _figure(10.0, max(3.0, 0.32 * len(ranked) + 1.5))
    left, right = figure.subplots(1, 2, sharey=True)
    names = [profile.layers[i].name for i in ranked]
    colors = [_COLORS[roofline.layers[i].bound] for i in ranked]
    positions = list(range(len(ranked)))
    left.barh(positions, [profile.layers[i].cost.flops / 1e6 for i in ranked], color=colors)
    right.barh(positions, [profile.layers[i].cost.bytes_moved / 1e6 for i in ranked], color=colors)
    left.set_yticks(positions, names, fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("MFLOPs")
    right.set_xlabel("MB moved")
    from matplotlib.patches import Patch  # matplotlib is importable: _figure succeeded

    right.legend(
        handles=[Patch(color=_COLORS[bound], label=bound.value) for bound in (Bound.COMPUTE, Bound.MEMORY)],
        loc="lower right",
        fontsize=8,
    )
    figure.suptitle(f"Top {len(ranked)} layers of {profile.model_name} by FLOPs", fontsize=11)
    return _save(figure, fmt)


_RENDERERS: dict[str, Callable[..., bytes]] = {"roofline": render_roofline_plot, "layers": render_layers_plot}


def write_plot(profile: Profile, spec: str | os.PathLike[str], roofline: Roofline | None = None) -> Path:
    """Draw the chart ``spec`` names (see :func:`parse_plot_spec`) and write it atomically; returns its path."""
    kind, path = parse_plot_spec(os.fspath(spec))
    data = _RENDERERS[kind](profile, roofline, fmt=path.suffix.lstrip(".").lower())
    write_atomic(path, data)
    return path
