"""Bottleneck analysis: compute- vs memory-bound against a device's ridge point or the fixed threshold,
then seed 002's four fixed arithmetic-intensity bands (graphprof/cost/roofline.py).

Pure functions of a :class:`Profile` (the verdicts from the roofline it carries): each returns a Rich
renderable and prints nothing.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.cost.bounds import Bound
from graphprof.cost.result import Profile
from graphprof.cost.roofline import INTENSITY_BANDS, intensity_band
from graphprof.render.common import profile_roofline
from graphprof.render.fit import Phrases
from graphprof.render.formatting import count_cell, format_percent, format_seconds, seconds_cell, section_table

__all__ = ["describe_threshold", "render_bottlenecks", "render_intensity_bands"]


def describe_threshold(profile: Profile) -> str:
    """One line saying which threshold separates compute- from memory-bound, and where it comes from."""
    roofline = profile_roofline(profile)
    if roofline.hardware is None or roofline.peak_flops is None or roofline.bandwidth is None:
        return (
            f"threshold: fixed {roofline.threshold:g} FLOPs/byte (graphprof's default with no hardware given: "
            "--hardware NAME or --peak-tflops/--bandwidth-gbs give a device's ridge point and time estimates)"
        )
    return (
        f"threshold: ridge point of {roofline.hardware.label} at {roofline.precision} = "
        f"{roofline.peak_flops / 1e12:g} TFLOP/s / {roofline.bandwidth / 1e9:,.0f} GB/s = {roofline.threshold:.1f} FLOPs/byte"
    )


def render_bottlenecks(profile: Profile) -> RenderableType:
    """How many layers, and what share of FLOPs (and estimated time), are compute- or memory-bound."""
    roofline = profile_roofline(profile)
    timed = roofline.hardware is not None
    table = section_table("Bottleneck analysis", optional=("Time share", "Layers", "FLOPs"))
    table.add_column("Verdict")
    table.add_column("Rule")
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
            count_cell(sum(layer.flops for layer in layers)),
            format_percent(roofline.flops_share(bound)),
        ]
        if timed:
            cells += [seconds_cell(sum(layer.seconds or 0.0 for layer in layers)), format_percent(roofline.time_share(bound))]
        table.add_row(*cells)
    lines: list[RenderableType] = [table, Phrases(Text(describe_threshold(profile), style="dim"))]
    if timed:
        lines.append(
            Phrases(
                Text(
                    f"Roofline time (estimate): {format_seconds(roofline.seconds)} = sum over layers of "
                    "max(FLOPs / peak, bytes / bandwidth); an idealised lower bound, not a measurement",
                    style="dim",
                )
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
    table = section_table("Arithmetic intensity bands (seed 002's interpretation, independent of the device)")
    for column in ("Band", "Rule", "Layers", "FLOPs", "FLOPs share", "Means"):
        table.add_column(column, justify="right" if column in ("Layers", "FLOPs", "FLOPs share") else "left", overflow="fold")
    for band in INTENSITY_BANDS:
        share = format_percent(flops[band.name] / total if total else 0.0)
        table.add_row(band.name, band.rule, str(layers[band.name]), count_cell(flops[band.name]), share, band.meaning)
    ai = profile.arithmetic_intensity
    whole = intensity_band(ai, flops=total)
    if whole is None:
        return table
    shown = "no bytes moved" if ai is None else f"{ai:.1f} FLOPs/byte"
    return Group(table, Phrases(Text(f"the model as a whole: {shown}, {whole.name.lower()} ({whole.meaning})", style="dim")))
