"""``partition_report``: plan a split and, on request, run it (and the equal-layer split) for real.

What ``graphprof partition`` shows: one :class:`PartitionReport`, a plan and the measured runs beside it.
Running needs the weights, so a named model is then built on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Objective
from graphprof.base.limits import require_count
from graphprof.partition.devices import LOCAL_CPU, Device, Links, as_devices
from graphprof.partition.plan import Plan, Stage
from graphprof.partition.planner import as_links, plan_prepared, prepare_for
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
    objective: Objective | str = Objective.LATENCY,
    links: Links | str | Sequence[str] | None = None,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    kv_len: int | None = None,
    threads: int = 1,
    iters: int = 10,
    run: bool = False,
    micro_batches: int = 4,
    run_iters: int = 5,
    compare: bool = True,
    **prepare_options: Any,
) -> PartitionReport:
    """:func:`graphprof.partition.partition`, then with ``run`` :func:`~graphprof.partition.run.run_split`
    of the plan (and with ``compare`` of the equal-layer split too) on ``micro_batches`` micro-batches."""
    check_run_options(micro_batches=micro_batches, iters=run_iters, threads=threads)  # before any work
    if kv_len is not None:
        require_count(kv_len, "the KV cache length (--kv-len)", low=0, high=10**9)
    devs = as_devices(devices)
    prepared = prepare_for(model_or_name, devs, weights=run, batch_size=batch_size, dtype=dtype, **prepare_options)
    plan = plan_prepared(prepared, devs, objective=objective, links=as_links(links, devs), kv_len=kv_len, threads=threads, iters=iters)
    if not run:
        return PartitionReport(plan)
    options = {"micro_batches": micro_batches, "iters": run_iters, "threads": threads}
    runs = [("plan", run_split(prepared, plan.split_points, predicted=_predicted(plan.stages), **options))]
    if compare:
        equal = next(b for b in plan.baselines if b.name == "equal-layers")
        runs.append(("equal-layers", run_split(prepared, equal.split_points, predicted=_predicted(equal.stages), **options)))
    return PartitionReport(plan, tuple(runs))
