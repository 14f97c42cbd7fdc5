"""The terminal report: the sections of the seeds' report, in order.

1. Hierarchical graph profile: the module tree (folded to a depth), params, shapes, MACs, FLOPs, memory
   (:mod:`graphprof.render.tree`).
2. Per-layer details (``verbose``): every graph node, and the aten-op breakdown (:mod:`graphprof.render.layers`).
3. Model summary: totals, the memory split, subgraphs, arithmetic intensity, capture method, run kind
   (:mod:`graphprof.render.summary`).
4. Operation breakdown: FLOPs share and count by layer type (seed 002, :mod:`graphprof.render.layers`).
5. Bottleneck analysis: compute- vs memory-bound against a device's ridge point or the fixed threshold,
   then seed 002's four fixed arithmetic-intensity bands (:mod:`graphprof.render.bottlenecks`).
6. Top-N layers by FLOPs (seed 002, :mod:`graphprof.render.layers`).
7. With a calibrated device: where the predicted time goes, by op kind (the measured forward beside it when
   the profile carries a measurement) and the top-N layers by predicted time (:mod:`graphprof.render.prediction`).
8. Footer: unsupported ops by name and count, and the notes.

Every function is a pure function of a :class:`Profile` (and the :class:`Roofline` it carries); it returns
a Rich renderable and prints nothing. Counts use decimal K/M/G/T suffixes, bytes decimal kB/MB/GB (so that
FLOPs/byte reads straight off the columns), times s/ms/us (:mod:`graphprof.render.formatting`).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.cost.result import Profile
from graphprof.render.bottlenecks import render_bottlenecks, render_intensity_bands
from graphprof.render.fit import Phrases
from graphprof.render.layers import DEFAULT_TOP, render_aten_breakdown, render_layers, render_op_breakdown, render_top_layers
from graphprof.render.prediction import render_prediction_breakdown
from graphprof.render.summary import render_summary
from graphprof.render.tree import render_tree

__all__ = ["render_footer", "render_report"]


def render_footer(profile: Profile) -> RenderableType | None:
    """Unsupported ops by name and count (with where they ran), then the notes of the profile and of its
    roofline; ``None`` when there is nothing."""
    lines: list[Text] = []
    if profile.unsupported:
        calls = sum(u.count for u in profile.unsupported)
        text = Text(f"Unsupported ops ({len(profile.unsupported)} ops, {calls} calls; no formula, counted as zero): ", style="yellow")
        parts = []
        for u in profile.unsupported:
            where = ", ".join(u.layers[:3]) + (f", +{len(u.layers) - 3} more" if len(u.layers) > 3 else "")
            parts.append(f"{u.op} x{u.count} (in {where})" if where else f"{u.op} x{u.count}")
        text.append("; ".join(parts))
        lines.append(text)
    notes = list(profile.notes) + (list(profile.roofline.notes) if profile.roofline is not None else [])
    lines += [Text(f"note: {note}", style="dim") for note in notes]
    return Group(*(Phrases(line) for line in lines)) if lines else None  # a long path: shortened in the middle


def render_report(
    profile: Profile, *, show_shapes: bool = False, verbose: bool = False, depth: int | None = None, top: int = DEFAULT_TOP
) -> RenderableType:
    """The whole terminal report, section by section (see the module docstring for the order).

    The verdicts and times are those of the roofline ``profile`` carries (:attr:`Profile.roofline`: the
    fixed threshold from :func:`graphprof.profile_model`, a device's from
    :func:`graphprof.cost.roofline.with_roofline`). ``verbose`` unfolds the tree completely and adds the
    per-layer and aten-op tables; ``depth`` folds the tree at that level; ``top`` is how many layers the
    top-N table lists (0: none).
    """
    if verbose and depth is None:
        depth = max((m.depth for m in profile.modules), default=0)
    parts: list[RenderableType] = [render_tree(profile, depth=depth, show_shapes=show_shapes)]
    if verbose:
        parts += [Text(), render_layers(profile, show_shapes=show_shapes), Text(), render_aten_breakdown(profile)]
    parts += [Text(), render_summary(profile), Text(), render_op_breakdown(profile), Text(), render_bottlenecks(profile)]
    parts += [Text(), render_intensity_bands(profile)]
    if top > 0:
        parts += [Text(), render_top_layers(profile, top=top)]
    prediction = render_prediction_breakdown(profile, top=top)
    if prediction is not None:
        parts += [Text(), prediction]
    footer = render_footer(profile)
    if footer is not None:
        parts += [Text(), footer]
    return Group(*parts)
