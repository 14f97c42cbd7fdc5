"""A sharded training step's time as a small table: the step with its interval, tokens/s per GPU, MFU and HFU,
and where the time goes. A pure function of :class:`graphprof.sharding.StepTime`."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.render.fit import ReportTable
from graphprof.sharding.step_result import StepTime

__all__ = ["render_step"]

_PARTS = (("compute", "compute_s"), ("recompute", "recompute_s"), ("exposed communication", "communication_s"),
          ("optimizer (AdamW)", "optimizer_s"), ("host (launches)", "host_s"),
          ("attention backward below forward rate (estimate)", "attention_backward_s"),
          ("comm SM contention (estimate)", "sm_contention_s"), ("sustained clock (estimate)", "sustained_clock_s"))  # fmt: skip


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def render_step(step: StepTime) -> RenderableType:
    """The step's time and throughput, then the breakdown whose rows sum to the step."""
    head = (
        f"step time {_ms(step.time_s)} (80% interval {_ms(step.low_s)} - {_ms(step.high_s)}) on {step.device}, "
        f"{step.regime}, checkpoint {step.checkpoint}, {step.grad_accum} micro-batch(es): "
    )
    if step.tokens_per_s_per_gpu is not None and step.mfu is not None and step.mfu_full_square is not None:
        head += (f"{step.tokens_per_s_per_gpu:,.0f} tokens/s per GPU; MFU {step.mfu:.1%} (causal; {step.mfu_full_square:.1%} "
                 f"attention full square), HFU {step.hfu:.1%}")  # fmt: skip
    else:
        head += f"HFU {step.hfu:.1%} (no token inputs: no tokens/s or MFU)"
    table = ReportTable(box=box.SIMPLE_HEAD)
    table.add_column("where the step goes")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    for label, key in _PARTS:
        value = getattr(step.breakdown, key)
        table.add_row(label, _ms(value), f"{value / step.time_s:.1%}" if step.time_s > 0 else "-")
    table.add_row("step", _ms(step.time_s), "100.0%")
    hidden = max(0.0, step.communication_total_s - step.breakdown.communication_s)
    tail = Text(f"collectives {_ms(step.communication_total_s)} in all, {_ms(hidden)} of it hidden under compute", style="dim")
    return Group(Text(head, style="bold"), table, tail, *(Text(note, style="dim") for note in step.notes))
