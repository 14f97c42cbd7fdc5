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
import textwrap
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphprof.base.atomic import check_path, write_atomic
from graphprof.cost.bounds import Bound
from graphprof.cost.result import Profile
from graphprof.errors import MissingDependencyError, OutputError
from graphprof.render.common import profile_roofline
from graphprof.render.measured import estimated_layer_seconds, predicted_layer_seconds

__all__ = [
    "PLOT_KINDS",
    "PLOT_FORMATS",
    "check_plot",
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
_KIND_COLORS = {"lower bound": "#1f77b4", "predicted": "#ff7f0e", "measured": "#2ca02c"}


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
        raise OutputError(f"cannot draw {str(path)!r}: a chart's file must end in {', '.join('.' + f for f in PLOT_FORMATS)}")
    return kind, path


def require_matplotlib() -> None:
    """Raise :class:`MissingDependencyError` unless matplotlib can be imported (checked without importing it)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingDependencyError("charts need matplotlib: pip install 'graphprof[plot]' (or pip install matplotlib)")


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError("charts need matplotlib: pip install 'graphprof[plot]' (or pip install matplotlib)") from exc
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Any, fmt: str) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt)
    return buffer.getvalue()


#: The kinds of point a roofline chart can hold per layer, in drawing order, with their marker.
POINT_KINDS = {"lower bound": "o", "predicted": "s", "measured": "^"}


def roofline_points(profile: Profile) -> dict[str, list[tuple[str, float, float, int]]]:
    """Per layer (module path) and kind: ``(name, FLOPs/byte, achieved FLOP/s, FLOPs)``.

    ``lower bound``: FLOPs over the roofline time, on the roof by construction; ``predicted``: over the
    predicted time (a calibrated device); ``measured``: over the layer's measured self time (with a
    measurement). Layers without FLOPs or bytes cannot sit on log axes and are left out. The times are
    those of the roofline ``profile`` carries.
    """
    roofline = profile_roofline(profile)
    flops: dict[str, int] = defaultdict(int)
    nbytes: dict[str, int] = defaultdict(int)
    for row, bound in zip(profile.layers, roofline.layers, strict=True):
        flops[row.module or "(model)"] += bound.flops
        nbytes[row.module or "(model)"] += bound.bytes
    seconds = {
        "lower bound": estimated_layer_seconds(profile),
        "predicted": predicted_layer_seconds(profile),
        "measured": {t.name: t.time_us / 1e6 for t in profile.measurement.layers} if profile.measurement is not None else {},
    }
    points: dict[str, list[tuple[str, float, float, int]]] = {kind: [] for kind in POINT_KINDS}
    for kind, by_name in seconds.items():
        for name, f in flops.items():
            t = by_name.get(name)
            if f > 0 and nbytes[name] > 0 and t:
                points[kind].append((name, f / nbytes[name], f / t, f))
    return points


def render_roofline_plot(profile: Profile, *, fmt: str = "png") -> bytes:
    """A roofline chart: every layer a point at its arithmetic intensity, under the device's roof.

    With a device, up to three points per layer (:func:`roofline_points`): the lower bound (on the roof
    by construction), the predicted time's and the measured time's achieved FLOP/s, so a layer running
    below the roof shows how far below; the caption says when only the bound is drawn. Marker area
    follows the layer's FLOPs. Without a device, the y axis is the layer's FLOPs and the fixed threshold
    is drawn instead of a roof.
    """
    roofline = profile_roofline(profile)
    figure = _figure(8.0, 5.5)
    axes = figure.add_subplot()
    device = roofline.hardware is not None and roofline.peak_flops is not None and roofline.bandwidth is not None
    xs = _draw_device_points(axes, profile) if device else _draw_threshold_points(axes, profile)
    lo, hi = min(xs + [roofline.threshold]) / 4, max(xs + [roofline.threshold]) * 4
    title, note = _draw_roof(axes, profile, lo, hi) if device else _draw_threshold(axes, profile)
    skipped = sum(1 for layer in roofline.layers if not (layer.flops > 0 and layer.bytes > 0))
    if skipped:
        note += f"; {skipped} layers without FLOPs or bytes not shown"
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOPs / byte)")
    axes.set_xlim(lo, hi)
    figure.suptitle(title, fontsize=11)
    axes.set_title(textwrap.fill(note, 110), fontsize=8, color="dimgray")
    axes.grid(True, which="both", linewidth=0.3, alpha=0.5)
    axes.legend(loc="lower right", fontsize=8)
    return _save(figure, fmt)


def _draw_device_points(axes: Any, profile: Profile) -> list[float]:
    roofline = profile_roofline(profile)
    points = roofline_points(profile)
    total = max(1, roofline.total_flops)
    xs: list[float] = []
    for kind, marker in POINT_KINDS.items():
        if points[kind]:
            _, x, y, f = zip(*points[kind], strict=True)
            xs += list(x)
            sizes = [12 + 400 * v / total for v in f]
            axes.scatter(x, [v / 1e12 for v in y], s=sizes, marker=marker, c=_KIND_COLORS[kind], alpha=0.6,
                         edgecolors="black", linewidths=0.4, label=f"{kind} ({len(x)})")  # fmt: skip
    return xs or [roofline.threshold]


def _draw_threshold_points(axes: Any, profile: Profile) -> list[float]:
    roofline = profile_roofline(profile)
    total = max(1, roofline.total_flops)
    xs: list[float] = []
    for bound in (Bound.COMPUTE, Bound.MEMORY):
        points = [layer for layer in roofline.layers if layer.bound is bound and layer.flops > 0 and layer.bytes > 0]
        if points:
            x = [layer.flops / layer.bytes for layer in points]
            xs += x
            axes.scatter(x, [float(layer.flops) for layer in points], s=[12 + 400 * layer.flops / total for layer in points],
                         c=_COLORS[bound], alpha=0.6, edgecolors="black", linewidths=0.4, label=f"{bound.value} ({len(points)})")  # fmt: skip
    return xs or [roofline.threshold]


def _draw_roof(axes: Any, profile: Profile, lo: float, hi: float) -> tuple[str, str]:
    roofline = profile_roofline(profile)
    assert roofline.hardware is not None and roofline.peak_flops is not None and roofline.bandwidth is not None
    peak, bandwidth = roofline.peak_flops / 1e12, roofline.bandwidth / 1e12
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    axes.plot(grid, [min(peak, x * bandwidth) for x in grid], color="black", linewidth=1.5, label="roof")
    axes.axvline(roofline.threshold, color="gray", linestyle="--", linewidth=1, label=f"ridge point {roofline.threshold:.1f}")
    axes.set_ylabel(f"achieved TFLOP/s ({roofline.precision})")
    points = roofline_points(profile)
    if not points["predicted"] and not points["measured"]:
        note = "only the lower bound is drawn (no calibration, no measurement): its points sit on the roof by construction"
    else:
        note = "lower bound on the roof; predicted and measured show how far below it each layer runs"
    return f"Roofline of {profile.model_name} on {roofline.hardware.label}", note + "; area ~ FLOPs"


def _draw_threshold(axes: Any, profile: Profile) -> tuple[str, str]:
    roofline = profile_roofline(profile)
    axes.axvline(roofline.threshold, color="gray", linestyle="--", linewidth=1, label=f"fixed threshold {roofline.threshold:g}")
    axes.set_ylabel("layer FLOPs")
    title = f"Arithmetic intensity of {profile.model_name}'s layers (no hardware given)"
    return title, "no device: graphprof's default threshold, no roof; area ~ FLOPs"


def render_layers_plot(profile: Profile, *, top: int = DEFAULT_PLOT_LAYERS, fmt: str = "png") -> bytes:
    """Horizontal bars of the ``top`` layers by FLOPs: FLOPs on the left, bytes moved on the right, coloured by verdict."""
    roofline = profile_roofline(profile)
    ranked = sorted((i for i, row in enumerate(profile.layers) if row.cost.flops > 0), key=lambda i: -profile.layers[i].cost.flops)[
        : max(1, top)
    ]
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
        handles=[Patch(color=_COLORS[bound], label=bound.value) for bound in (Bound.COMPUTE, Bound.MEMORY)], loc="lower right", fontsize=8
    )
    figure.suptitle(f"Top {len(ranked)} layers of {profile.model_name} by FLOPs", fontsize=11)
    return _save(figure, fmt)


_RENDERERS: dict[str, Callable[..., bytes]] = {"roofline": render_roofline_plot, "layers": render_layers_plot}


def check_plot(spec: str | os.PathLike[str]) -> Path:
    """Before any work: the chart ``spec`` names (:func:`parse_plot_spec`) can be written
    (:func:`graphprof.base.atomic.check_path`); its path."""
    path = parse_plot_spec(os.fspath(spec))[1]
    check_path(path)
    return path


def write_plot(profile: Profile, spec: str | os.PathLike[str]) -> Path:
    """Draw the chart ``spec`` names (see :func:`parse_plot_spec`) of ``profile`` with the roofline it carries,
    and write it atomically; returns its path."""
    kind, path = parse_plot_spec(os.fspath(spec))
    data = _RENDERERS[kind](profile, fmt=path.suffix.lstrip(".").lower())
    write_atomic(path, data)
    return path
