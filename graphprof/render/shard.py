"""A sharded training step, per rank, as a Rich table: what the rank holds, computes and sends, beside
the analytic figure and their difference. A pure function of :class:`graphprof.sharding.ShardedProfile`."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.base.limits import format_bytes
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import format_count
from graphprof.render.step import render_step
from graphprof.sharding.result import ShardedProfile

__all__ = ["render_sharded"]

_ROWS = (
    ("FLOPs (forward + backward)", "flops", format_count),
    ("parameters (shard)", "param_bytes", format_bytes),
    ("gradients (shard)", "grad_bytes", format_bytes),
    ("optimizer state (AdamW, shard)", "optimizer_bytes", format_bytes),
    ("activations saved for backward", "activation_bytes", format_bytes),
    ("two gathered units (current + prefetched)", "unsharded_bytes", format_bytes),
    ("all-gather per step (gathered)", "all_gather_bytes", format_bytes),
    ("reduce-scatter per step (gradients)", "reduce_scatter_bytes", format_bytes),
    ("all-gather calls", "all_gather_calls", str),
    ("reduce-scatter calls", "reduce_scatter_calls", str),
    ("all-reduce per step (tensor parallelism)", "all_reduce_bytes", format_bytes),
    ("all-reduce calls", "all_reduce_calls", str),
)

#: Rows that only FSDP fills (tensor parallelism alone gathers and scatters nothing).
_FSDP_ONLY = frozenset({"unsharded_bytes", "all_gather_bytes", "reduce_scatter_bytes", "all_gather_calls", "reduce_scatter_calls"})


def render_sharded(p: ShardedProfile) -> RenderableType:
    """The per-rank table and the verdict on memory (when a device is known)."""
    table = ReportTable(title=f"{p.model_name}, {p.shard or p.strategy}, {p.dtype}, per-rank batch {p.inputs}: one rank of a training step",
                  box=box.SIMPLE_HEAD, title_justify="left")  # fmt: skip
    for name, justify in (("per rank", "left"), ("counted", "right"), ("reference", "right"), ("difference", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    differences = p.differences()
    for label, key, fmt in _ROWS:
        if "tp" not in p.strategy and key.startswith("all_reduce") or "fsdp" not in p.strategy and key in _FSDP_ONLY:
            continue
        table.add_row(label, fmt(getattr(p.rank, key)), fmt(getattr(p.analytic, key)), f"{differences[key]:+.2%}")
    peak = f"estimated peak per rank: {format_bytes(p.rank.memory_bytes)}"
    if p.device is not None and p.device_memory_bytes is not None:
        verdict = "fits" if p.fits else "does NOT fit"
        peak += f" on {p.device} ({format_bytes(p.device_memory_bytes)}): {verdict}"
    lines: list[RenderableType] = [Text(peak, style="bold" if p.fits is not False else "bold red")]
    master = p.master_memory_bytes
    if master is not None and p.step is not None:
        verdict = "" if p.device_memory_bytes is None else f": {'fits' if master <= p.device_memory_bytes else 'does NOT fit'}"
        lines.append(Text(f"with the shards in {p.step.master_dtype} as the step time prices them (parameters, gradients, AdamW's "
                          f"moments): {format_bytes(master)} (estimate){verdict}"))  # fmt: skip
    if p.step is not None:
        lines.append(render_step(p.step))
    lines += [Text(note, style="dim") for note in p.notes]
    return Group(table, *lines)
