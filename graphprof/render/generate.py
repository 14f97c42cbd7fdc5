"""A Rich report of a :class:`~graphprof.generate.GenerationProfile`: a pure function of it.

Four parts: the summary (KV cache, time to first token, time per output token, tokens/s, decode eager and
compiled where a GPU device prices both, will it fit),
the phases (prefill, the first and last decode steps, every decode step together), the blocks (each
decoder layer and what is around them, prefill beside decode; consecutive identical layers folded into
one row that says how many it stands for, each row showing one layer) and, with a real run, measured
beside estimated with the ratio between them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from graphprof.base.limits import format_bytes
from graphprof.generate.result import BlockCost, GenerationMeasurement, GenerationProfile, Latency
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import format_count, format_seconds

__all__ = ["render_generation"]

_PHASE_NAMES = {
    "prefill": "prefill",
    "decode_first": "decode, first step",
    "decode_last": "decode, last step",
    "decode_total": "decode, all steps",
}


def _table(title: str, caption: str | None = None) -> Table:
    return ReportTable(
        title=Text(title), caption=Text(caption) if caption is not None else None, title_justify="left", caption_justify="left", title_style="bold",
        caption_style="dim", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
    )  # fmt: skip


def _num(value: int) -> str:
    return "-" if value == 0 else format_count(value)


def _mem(value: int) -> str:
    return "-" if value == 0 else format_bytes(value)


def _ai(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _dtype_line(g: GenerationProfile) -> str:
    device = f" on {g.hardware.label}" if g.hardware is not None else ""
    return (
        f"{g.model_name}: batch {g.batch}, prompt {g.prompt_len:,} + {g.new_tokens:,} new tokens, "
        f"{g.dtype} (KV cache {g.kv_dtype}, {g.cache}){device}"
    )


def _latency_rows(table: Table, label: str, lat: Latency | None, unit: str) -> None:
    if lat is None:
        return
    rate = "-" if lat.tokens_per_s is None else f"{lat.tokens_per_s:,.0f} tokens/s"
    table.add_row(
        f"{label} ({unit})",
        f"TTFT {format_seconds(lat.ttft_s)}, TPOT {format_seconds(lat.tpot_s)}, {rate}, total {format_seconds(lat.total_s)}",
    )


def _regime_rows(table: Table, g: GenerationProfile) -> None:
    """Decode eager and compiled (:attr:`GenerationProfile.regimes`), the one ``predicted`` reports marked."""
    r = g.regimes
    if r is None:
        return
    for name, regime, how in (("eager", r.eager, "a host launch per kernel"), ("compiled", r.compiled, "fused, CUDA graphs")):
        chosen = " = predicted" if name == r.regime else ""
        if regime.tpot_s is None:
            detail = f"TTFT {format_seconds(regime.ttft_s)}; no decode step"
        else:
            detail = (f"TPOT {format_seconds(regime.tpot_s)}, {g.batch / regime.tpot_s:,.0f} tokens/s, {regime.kernels_per_step:,} "
                      f"kernels a step; TTFT {format_seconds(regime.ttft_s)}")  # fmt: skip
        table.add_row(f"decode {name} ({how}){chosen}", detail)


def _summary(g: GenerationProfile) -> Table:
    table = _table(_dtype_line(g))
    table.add_column("", no_wrap=True)
    table.add_column("")
    kv = g.kv
    table.add_row(
        "KV cache per token",
        f"{g.kv_bytes_per_token:,} B = 2 x {kv.layers} layers x {kv.kv_heads} KV heads x {kv.head_dim} x {g.kv_bytes_per_token // kv.elements_per_token} B",
    )
    table.add_row("KV cache at the end", f"{format_bytes(g.kv_cache_bytes)} ({g.final_context:,} tokens x batch {g.batch})")
    if g.per_token is not None:
        t = g.per_token
        table.add_row(
            "FLOPs per token",
            f"model {format_count(round(t.model_forward))} forward, {format_count(round(t.model_train))} forward+backward; "
            f"executed {format_count(round(t.executed))}, counted {format_count(round(t.counted))} (the prefill's "
            f"{t.tokens:,} tokens; model FLOPs: weight and token-mixing products, attention unmasked, train = 3 x forward)",
        )
    _latency_rows(table, "time", g.lower_bound, "lower bound")
    _latency_rows(table, "time", g.predicted, "predicted")
    _regime_rows(table, g)
    if g.fit is not None:
        f = g.fit
        verdict = "fits" if f.fits else "does NOT fit"
        table.add_row(
            "will it fit",
            f"{verdict}: weights {format_bytes(f.weight_bytes)} + KV {format_bytes(f.kv_cache_bytes)} + activations "
            f"{format_bytes(f.activation_bytes)} = {format_bytes(f.needed_bytes)} of {format_bytes(f.device_memory_bytes)}; "
            f"largest context at batch {g.batch}: {f.max_context:,}"
            + (" (the model's positions)" if f.max_positions is not None and f.max_context == f.max_positions else "")
            + f"; largest batch at {g.final_context:,} tokens: {f.max_batch:,}",
        )
    return table


def _phases(g: GenerationProfile) -> Table:
    table = _table("Phases (estimates)", caption="KV read: cached tokens attention reads; KV written: tokens the step adds")
    for name, justify in (("Phase", "left"), ("Context", "right"), ("Forwards", "right"), ("MACs", "right"), ("Bytes", "right"),
                          ("KV read", "right"), ("KV written", "right"), ("FLOP/B", "right"), ("Bound", "left"),
                          ("Lower bound", "right"), ("Predicted", "right")):  # fmt: skip
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for phase in (g.prefill, g.decode_first, g.decode_last, g.decode_total):
        if phase is None:
            continue
        t = phase.total
        table.add_row(
            _PHASE_NAMES.get(phase.name, phase.name), f"{phase.context:,}", f"{phase.forwards:,}", _num(t.cost.macs),
            _mem(t.cost.bytes_moved), _mem(t.kv_bytes_read), _mem(t.kv_bytes_written), _ai(t.arithmetic_intensity),
            t.bound.short, format_seconds(t.lower_bound_s), format_seconds(t.predicted_s),
        )  # fmt: skip
    return table


def _folded(prefill: Sequence[BlockCost], decode: Sequence[BlockCost] | None) -> list[tuple[str, int, int]]:
    """``(label, first index, count)``: runs of consecutive blocks alike in both phases, folded."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(prefill):
        j = i + 1
        while j < len(prefill) and _alike(prefill, decode, i, j):
            j += 1
        name = prefill[i].name
        if j - i > 1:
            stem, _, first = name.rpartition(".")
            last = prefill[j - 1].name.rpartition(".")[2]
            name = f"{stem}.{first}-{last} (x{j - i}, each)"
        out.append((name, i, j - i))
        i = j
    return out


def _alike(prefill: Sequence[BlockCost], decode: Sequence[BlockCost] | None, i: int, j: int) -> bool:
    def same(a: BlockCost, b: BlockCost) -> bool:
        return (a.cost, a.kv_bytes_read, a.kv_bytes_written, a.bound) == (b.cost, b.kv_bytes_read, b.kv_bytes_written, b.bound)

    if prefill[i].name.rpartition(".")[0] != prefill[j].name.rpartition(".")[0] or not prefill[j].name.rpartition(".")[2].isdigit():
        return False
    return same(prefill[i], prefill[j]) and (decode is None or same(decode[i], decode[j]))


def _blocks(g: GenerationProfile) -> Table:
    table = _table(
        "Per block: prefill | one decode step (the first) | every decode step",
        caption="Time: the roofline lower bound on the device; x N, each: N consecutive layers alike, one shown",
    )
    for name in (
        "Block",
        "MACs",
        "Bytes",
        "FLOP/B",
        "Bound",
        "Time",
        "|",
        "MACs ",
        "Bytes ",
        "KV read",
        "FLOP/B ",
        "Bound ",
        "Time ",
        "| ",
        "Time  ",
    ):
        justify = "left" if name.startswith(("Block", "Bound", "|")) else "right"
        table.add_column(name.strip() if name.strip() != "|" else "", justify=justify, overflow="fold")  # type: ignore[arg-type]
    first = g.decode_first.blocks if g.decode_first is not None else None
    total = g.decode_total.blocks if g.decode_total is not None else None
    for label, i, _count in _folded(g.prefill.blocks, first):
        p = g.prefill.blocks[i]
        if p.cost.bytes_moved == 0 and p.cost.flops == 0 and (first is None or first[i].cost.bytes_moved == 0):
            continue
        cells = [label, _num(p.cost.macs), _mem(p.cost.bytes_moved), _ai(p.arithmetic_intensity), p.bound.short]
        cells += [format_seconds(p.lower_bound_s), "|"]
        if first is not None and total is not None:
            d = first[i]
            cells += [_num(d.cost.macs), _mem(d.cost.bytes_moved), _mem(d.kv_bytes_read), _ai(d.arithmetic_intensity)]
            cells += [d.bound.short, format_seconds(d.lower_bound_s), "|", format_seconds(total[i].lower_bound_s)]
        else:
            cells += ["-"] * 6 + ["|", "-"]
        table.add_row(*cells)
    return table


def _ratio(measured: float, estimate: float | None) -> str:
    return "-" if not estimate else f"{measured / estimate:.2f}x"


def _measured(g: GenerationProfile, m: GenerationMeasurement) -> Table:
    caption = f"{m.runs} runs of generate() on {m.device} ({m.host}); load {m.load}: a shared machine's timings are noisy"
    table = _table("Measured beside estimated", caption=caption)
    for name in ("", "Measured", "Lower bound", "Measured / bound", "Predicted", "Measured / predicted"):
        table.add_column(name, justify="left" if not name else "right", no_wrap=True)
    (pm, ps), (dm, ds) = m.prefill, m.decode_step
    lb, pr = g.lower_bound, g.predicted
    rows = (
        ("prefill (TTFT)", pm, ps, lb.ttft_s if lb else None, pr.ttft_s if pr else None),
        ("decode step (TPOT)", dm, ds, lb.tpot_s if lb else None, pr.tpot_s if pr else None),
    )
    for label, mean, std, bound, predicted in rows:
        table.add_row(label, f"{format_seconds(mean)} ± {format_seconds(std)}", format_seconds(bound), _ratio(mean, bound),
                      format_seconds(predicted), _ratio(mean, predicted))  # fmt: skip
    if m.peak_memory_bytes is not None and g.fit is not None:
        table.add_row(f"peak memory ({m.memory_method})", format_bytes(m.peak_memory_bytes), format_bytes(g.fit.needed_bytes),
                      _ratio(m.peak_memory_bytes, g.fit.needed_bytes), "-", "-")  # fmt: skip
    elif m.peak_memory_bytes is not None:
        table.add_row(f"peak memory ({m.memory_method})", format_bytes(m.peak_memory_bytes), "-", "-", "-", "-")
    return table


def render_generation(g: GenerationProfile) -> RenderableType:
    """The whole report (see the module docstring)."""
    parts: list[RenderableType] = [_summary(g), Text(""), _phases(g), Text(""), _blocks(g)]
    if g.measurement is not None:
        parts += [Text(""), _measured(g, g.measurement)]
    parts += [Text(""), Text("\n".join(f"note: {n}" for n in g.notes), style="dim")]
    return Group(*parts)
