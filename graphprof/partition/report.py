"""``partition_report``: plan a split and, on request, run it (and the equal-layer split) for real.

What ``graphprof partition`` shows: one :class:`PartitionReport`, a plan and the measured runs beside it.
Running needs the weights, so a named model is then built on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from graphprof.base.limits import require_count
from graphprof.partition.devices import LOCAL_CPU, Device
from graphprof.partition.plan import Plan, Stage
from graphprof.partition.planner import prepare_and_plan
from graphprof.partition.run import PipelineRun, check_run_options, run_split

__all__ = ["PartitionReport", "partition_report"]


@dataclass(frozen=True)
class PartitionReport:
    """A plan and its measured runs, as ``(label, run)``: ``"plan"`` and ``"equal-layers"``."""

    plan: Plan
    runs: tuple[tuple[str, PipelineRun], ...] = ()


def _predicted(stages: Sequence[Stage]) -> list[float] | None:
    """Per-stage compute the run can be held against: only for stages on this machine's CPU."""
    return [s.compute_s for s in stages] if all(s.kind == LOCAL_CPU for s in stages) else None


def partition_report(
    model_or_name: nn.Module | str,
    devices: str | Sequence[Device],
    *,
    run: bool = False,
    micro_batches: int = 4,
    run_iters: int = 5,
    compare: bool = True,
    **options: Any,
) -> PartitionReport:
    """:func:`graphprof.partition.partition` (``options`` are its keywords), then with ``run``
    :func:`~graphprof.partition.run.run_split` of the plan (and with ``compare`` of the equal-layer split
    too) on ``micro_batches`` micro-batches."""
    threads = options.get("threads", 1)
    check_run_options(micro_batches=micro_batches, iters=run_iters, threads=threads)  # before any work
    if options.get("kv_len") is not None:
        require_count(options["kv_len"], "the KV cache length (--kv-len)", low=0, high=10**9)
    prepared, plan = prepare_and_plan(model_or_name, devices, weights=run, **options)
    if not run:
        return PartitionReport(plan)
    timing = {"micro_batches": micro_batches, "iters": run_iters, "threads": threads}
    runs = [("plan", run_split(prepared, plan.split_points, predicted=_predicted(plan.stages), **timing))]
    if compare:
        equal = next(b for b in plan.baselines if b.name == "equal-layers")
        runs.append(("equal-layers", run_split(prepared, equal.split_points, predicted=_predicted(equal.stages), **timing)))
    return PartitionReport(plan, tuple(runs))
