"""Measured beside estimated: a Rich report of a :class:`Profile` that carries a measurement.

Per layer (module path): the estimate is the roofline time of the graph nodes whose innermost module is
that layer (so a block's own additions sit on the block, as its measured self time does), the measure
is the layer's self time, and the ratio measured / estimated is its own column.
"""

from __future__ import annotations

from collections import defaultdict

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphprof.result import Profile
from graphprof.roofline import Roofline

__all__ = ["estimated_layer_seconds", "render_measured"]


def estimated_layer_seconds(profile: Profile, roofline: Roofline | None) -> dict[str, float]:
    """Roofline seconds per module path (``"(model)"`` for nodes at top level); empty without a device."""
    if roofline is None or roofline.seconds is None:
        return {}
    out: dict[str, float] = defaultdict(float)
    for row, bound in zip(profile.layers, roofline.layers, strict=True):
        if bound.seconds is not None:
            out[row.module or "(model)"] += bound.seconds
    return dict(out)


def _ms(stats: object) -> str:
    s = stats  # RuntimeStats
    first = ", ".join(f"{t:.2f}" for t in s.first) or "-"  # type: ignore[attr-defined]
    return (
        f"{s.mean:.3f} ± {s.std:.3f} ms  median {s.median:.3f}  min {s.min:.3f}  p20 {s.p20:.3f}  p80 {s.p80:.3f}"  # type: ignore[attr-defined]
        f"  n={s.num_runs}{' (stopped early)' if s.stopped_early else ''}  first: {first}"  # type: ignore[attr-defined]
    )


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f} MiB"


def _estimated_text(profile: Profile) -> str:
    e = profile.estimated_memory()
    text = f"estimated params {_mib(e['param_bytes'])} + buffers {_mib(e['buffer_bytes'])} + peak activations {_mib(e['peak_activation_bytes'])}"
    if "gradient_bytes" in e and profile.measurement is not None:
        text += f" + gradients {_mib(e['gradient_bytes'])} + optimizer state {_mib(e['optimizer_state_bytes'])} ({profile.measurement.optimizer})"
    return text


def render_measured(profile: Profile, roofline: Roofline | None = None) -> Group:
    """The measurement's summary, memory (measured beside estimated) and the per-layer table."""
    m = profile.measurement
    if m is None:
        return Group(Text("no measurement"))
    lines = [
        Text(f"Measured on {m.device} ({m.host.gpu or m.host.cpu}, {m.host.cores} cores, torch {m.host.torch}), {m.dtype}, {m.mode}, inputs {m.inputs}", style="bold"),
        Text(f"forward        {_ms(m.forward)}"),
    ]
    if m.backward is not None:
        lines.append(Text(f"backward       {_ms(m.backward)}"))
    if m.training_step is not None:
        lines.append(Text(f"training step  {_ms(m.training_step)}  ({m.optimizer})"))
    busy = f", kernel busy {m.kernel_busy_us / 1e3:.3f} ms" if m.kernel_busy_us is not None else ""
    lines.append(
        Text(
            f"per layer ({m.layer_runs} profiled forwards): sum {m.layer_sum_us / 1e3:.3f} ms, profiled forward "
            f"{m.instrumented_forward.mean:.3f} ms{busy}; overhead of per-layer measurement {m.overhead * 100:+.1f}%"
        )
    )
    mem = m.memory
    lines.append(
        Text(
            f"memory: measured peak {_mib(mem.peak_bytes)} (resident {_mib(mem.resident_bytes)} + run {_mib(mem.run_peak_bytes)}"
            f"{', reserved ' + _mib(mem.reserved_bytes) if mem.reserved_bytes is not None else ''}; {mem.source}); "
            + _estimated_text(profile)
        )
    )
    if mem.breakdown is not None:
        b = mem.breakdown
        parts = ", ".join(f"{c.replace('_', ' ')} {_mib(getattr(b, c))}" for c in ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries"))
        lines.append(Text(f"breakdown at peak (MemTracker): {parts}"))
    for note in m.notes:
        lines.append(Text(f"note: {note}", style="dim"))

    estimates = estimated_layer_seconds(profile, roofline)
    where = roofline.hardware.name if roofline is not None and roofline.hardware is not None else None
    table = Table(title=f"Per layer: estimated{f' ({where} roofline)' if where else ''} vs measured (self time)", title_justify="left")
    for col, justify in (("Layer", "left"), ("Type", "left"), ("Calls", "right"), ("Estimated", "right"), ("Measured", "right"), ("Ratio", "right"), ("Share", "right")):
        table.add_column(col, justify=justify, no_wrap=col == "Layer")  # type: ignore[arg-type]
    total = m.layer_sum_us or 1.0
    for layer in m.layers:
        est = estimates.get(layer.name)
        est_us = est * 1e6 if est is not None else None
        ratio = f"{layer.time_us / est_us:.1f}x" if est_us else "-"
        table.add_row(
            layer.name,
            layer.type,
            str(layer.calls),
            f"{est_us:,.1f} us" if est_us is not None else "-",
            f"{layer.time_us:,.1f} us",
            ratio,
            f"{layer.time_us / total * 100:.1f}%",
        )
    est_total = sum(estimates.values()) * 1e6
    table.add_row("TOTAL", "", "", f"{est_total:,.1f} us" if estimates else "-", f"{m.layer_sum_us:,.1f} us", f"{m.layer_sum_us / est_total:.1f}x" if est_total else "-", "100.0%", style="bold")
    return Group(*lines, table)
