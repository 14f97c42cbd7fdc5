"""The device presets as a table: dense peak TFLOP/s per dtype, bandwidth and ridge points, and their sources.

A pure function of the presets: it returns a Rich renderable and prints nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.devices.hardware import Hardware, hardware_aliases
from graphprof.render.fit import Phrases
from graphprof.render.formatting import section_table

__all__ = ["render_hardware"]


def render_hardware(presets: Sequence[Hardware], *, detail: bool = False) -> RenderableType:
    """The device presets: dense peak TFLOP/s per dtype, bandwidth and ridge points; their sources below.

    With ``detail`` (one device, usually), every listed precision gets its own ridge point.
    """
    table = section_table("Hardware presets (dense peaks, no sparsity)")
    table.add_column("Name")
    table.add_column("Device", max_width=28)
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
        best = "bfloat16" if "bfloat16" in device.peak_tflops else "float16" if "float16" in device.peak_tflops else "float32"
        ridge = f"{device.ridge_point('float32'):.0f} / {device.ridge_point(best):.0f}"
        aliases = hardware_aliases(device.name)  # accepted too (partition's orin-agx): listed, never a surprise
        name = device.name + (f" (or {', '.join(aliases)})" if aliases else "")
        table.add_row(name, device.label, *peaks, f"{device.bandwidth_gbs:,.0f}", ridge)
    lines: list[RenderableType] = [
        table,
        Phrases(Text("TFLOP/s; Ridge = FLOPs/byte at FP32 / at BF16 (FP16 or FP32 where that is all the device lists)", style="dim")),
    ]
    if detail:
        for device in presets:
            lines.append(Phrases(Text(f"{device.name}: {device.label} ({device.kind})")))
            for precision, tflops in device.peak_tflops.items():
                lines.append(
                    Phrases(Text(f"  {precision:>8}: {tflops:g} TFLOP/s, ridge point {device.ridge_point(precision):.1f} FLOPs/byte"))
                )
            if device.sms is not None:
                lines.append(Phrases(Text(f"  {device.sms} SMs (the architecture whitepaper; shard prices NCCL's share of them)")))
            if device.sustained_clock is not None:
                lines.append(Phrases(Text(f"  tensor-core clock sustained at the power limit: {device.sustained_clock:.3f} of boost")))
            lines.append(Phrases(Text(f"  kernel model: {_kernel_model(device)}")))
    sources = Table.grid(padding=(0, 2))
    sources.add_column(no_wrap=True)
    sources.add_column(style="dim")
    for device in presets:
        sources.add_row(device.name, Phrases(device.source))  # a long URL: shortened in the middle, in full in hardware.py
    lines += [Text("Sources (details and URLs: graphprof/devices/hardware.py)", style="bold"), sources]
    linked = [device for device in presets if device.links is not None]
    if linked:
        lines += [Text("Links between GPUs, per GPU and direction (graphprof/devices/links.py)", style="bold"), _links(linked)]
    return Group(*lines)


def _kernel_model(device: Hardware) -> str:
    """What prices a kernel on ``device`` (:func:`~graphprof.devices.derived.kernel_table`): its own measured table
    with its fit's accuracy, a model derived from the datasheet, or the roofline alone."""
    from graphprof.devices.derived import kernel_table
    from graphprof.errors import InvalidInputError

    try:
        table, derived = kernel_table(device)
    except InvalidInputError:
        return "the roofline (no table measured on this device; `graphprof calibrate` measures this machine)"
    if derived is not None:
        return derived.removeprefix(f"kernel model of {device.name}: ")
    accuracy = table.accuracy or {}
    fit = f"; median |error| {accuracy['median_abs_error']:.1%} on its {accuracy['records']} kernels" if "records" in accuracy else ""
    return f"a table measured on the device ({table.source}){fit}"


def _links(presets: Sequence[Hardware]) -> RenderableType:
    """Each preset's link inside a node and between nodes, GB/s per direction, with its source."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    grid.add_column(style="dim")
    for device in presets:
        assert device.links is not None
        for where, link in (("in a node", device.links.intra), ("between nodes", device.links.inter)):
            if link is not None:
                grid.add_row(f"{device.name} {where}", f"{link.gbs:g} GB/s", Phrases(link.label), Phrases(link.source))
    return grid


def _tflops(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
