"""The plan: stages with their device, time, memory and bytes sent; the baselines beside it.

A :class:`Plan` is a pure record (built by :func:`graphprof.partition.partition`, rendered by
:mod:`graphprof.render.partition`). Times are seconds for one micro-batch, bytes integers. Its figures
are estimates from the cost table (predicted or measured per unit, see :mod:`graphprof.partition.costs`),
never a measurement of the split model; :class:`graphprof.partition.run.PipelineRun` is that.

Baselines, placed on the devices in the order given, as users split models today:

* ``equal-layers``: the same number of units per stage (torchgpipe's and PiPPy's even split);
* ``equal-params``: contiguous stages whose largest parameter count is the least possible (DeepSpeed's
  ``PipelineModule(partition_method="parameters")``, its default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graphprof.base.choices import Objective
from graphprof.base.display import NotebookDisplay
from graphprof.partition.costs import CostTable
from graphprof.partition.devices import Device, Links
from graphprof.partition.solver import Problem, Solution, evaluate, holds_copy
from graphprof.schemas import SCHEMA_VERSIONS

__all__ = ["PLAN_SCHEMA_VERSION", "Stage", "Baseline", "Plan", "make_stages", "equal_layers", "equal_params"]

PLAN_SCHEMA_VERSION = SCHEMA_VERSIONS["partition"]


@dataclass(frozen=True)
class Stage:
    """One stage: units ``[start, end)`` (``first`` .. ``last`` by name) on ``device``; its ``params`` and
    ``weight_bytes`` include its own copy of each tied weight an earlier stage holds too (as
    ``torch.distributed.pipelining`` builds the stages)."""

    index: int
    device: str
    kind: str
    start: int
    end: int
    first: str
    last: str
    params: int
    weight_bytes: int
    kv_bytes: int
    memory_bytes: int
    capacity_bytes: int
    compute_s: float
    receive_s: float
    received_bytes: int
    sent_bytes: int

    @property
    def seconds(self) -> float:
        """What the stage takes per micro-batch: receiving its input, then computing."""
        return self.compute_s + self.receive_s

    @property
    def fits(self) -> bool:
        return self.memory_bytes <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "device": self.device, "kind": self.kind, "units": [self.start, self.end],
            "first": self.first, "last": self.last, "params": self.params, "weight_bytes": self.weight_bytes,
            "kv_bytes": self.kv_bytes, "memory_bytes": self.memory_bytes, "capacity_bytes": self.capacity_bytes,
            "fits": self.fits, "compute_s": self.compute_s, "receive_s": self.receive_s, "seconds": self.seconds,
            "received_bytes": self.received_bytes, "sent_bytes": self.sent_bytes,
        }  # fmt: skip


class _Split:
    """The figures of a split, read from its stages: shared by the plan and its baselines."""

    stages: tuple[Stage, ...]

    @property
    def latency_s(self) -> float:
        """Predicted time of one micro-batch through every stage (the sum of stage times)."""
        return sum(s.seconds for s in self.stages)

    @property
    def bottleneck_s(self) -> float:
        """Predicted time of the slowest stage: pipelined, one micro-batch leaves every this often."""
        return max(s.seconds for s in self.stages)

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.stages)

    @property
    def split_points(self) -> tuple[str, ...]:
        """The units stages 1, 2, ... begin at: ``torch.distributed.pipelining``'s ``SplitPoint.BEGINNING``."""
        return tuple(s.first for s in self.stages[1:])

    def _figures(self, micro_batch: int) -> dict[str, Any]:
        bottleneck = self.bottleneck_s
        return {
            "latency_s": self.latency_s,
            "bottleneck_s": bottleneck,
            "throughput_per_s": micro_batch / bottleneck if bottleneck > 0 else None,
            "fits": self.fits,
            "split_points": list(self.split_points),
            "stages": [s.to_dict() for s in self.stages],
        }


@dataclass(frozen=True)
class Baseline(_Split):
    """A split users make today, costed like the plan (it may not fit: ``fits`` says so)."""

    name: str
    stages: tuple[Stage, ...]

    def to_dict(self, micro_batch: int) -> dict[str, Any]:
        return {"name": self.name, **self._figures(micro_batch)}


@dataclass(frozen=True)
class Plan(_Split, NotebookDisplay):
    """The best split of one model over the devices for one objective, with the table it came from."""

    model_name: str
    objective: Objective
    dtype: str
    inputs: str
    micro_batch: int
    devices: tuple[Device, ...]
    links: Links
    table: CostTable
    stages: tuple[Stage, ...]
    baselines: tuple[Baseline, ...]
    solve_seconds: float
    notes: tuple[str, ...] = ()

    @property
    def throughput(self) -> float:
        """Predicted samples per second when pipelined: micro-batch size over the bottleneck."""
        return self.micro_batch / self.bottleneck_s if self.bottleneck_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": PLAN_SCHEMA_VERSION,
            "model": self.model_name,
            "objective": self.objective,
            "dtype": self.dtype,
            "inputs": self.inputs,
            "micro_batch": self.micro_batch,
            "estimate": "per-stage times are predicted (presets) or from measured per-layer times (cpu); not a run of the split model",
            "devices": [d.to_dict() for d in self.devices],
            "links": self.links.to_dict(),
            **self._figures(self.micro_batch),
            "baselines": [b.to_dict(self.micro_batch) for b in self.baselines],
            "cost_table": self.table.to_dict(),
            "solve_seconds": self.solve_seconds,
            "notes": list(self.notes),
        }


def make_stages(
    problem: Problem, table: CostTable, devices: Sequence[Device], solution: Solution, kinds: Sequence[str]
) -> tuple[Stage, ...]:
    """Stages of a solution, each on the next unused device of its kind (in the order given)."""
    free = {k: [d for d in devices if d.kind == k] for k in kinds}
    stages, previous = [], -1
    for index, (i, j, k) in enumerate(solution.stages):
        device = free[kinds[k]].pop(0)
        units = table.units[i:j]
        copies = [w for w in table.shared if holds_copy(w.units, i, j)]  # tied weights this stage keeps its own copy of
        stages.append(
            Stage(
                index=index, device=device.name, kind=device.kind, start=i, end=j, first=units[0].name, last=units[-1].name,
                params=sum(u.params for u in units) + sum(w.params for w in copies),
                weight_bytes=sum(u.weight_bytes for u in units) + sum(w.weight_bytes for w in copies),
                kv_bytes=sum(u.kv_bytes for u in units), memory_bytes=problem.stage_memory(i, j),
                capacity_bytes=device.memory_bytes, compute_s=sum(problem.seconds[k][i:j]),
                receive_s=problem.link_seconds(previous, k, i), received_bytes=table.cut_bytes[i], sent_bytes=table.cut_bytes[j],
            )
        )  # fmt: skip
        previous = k
    return tuple(stages)


def _bounds_equal_layers(units: int, parts: int) -> list[int]:
    """``parts`` runs of units as equal as possible, the longer ones first: 10 units in 3 -> 4, 3, 3."""
    size, extra = divmod(units, parts)
    bounds = [0]
    for p in range(parts):
        bounds.append(bounds[-1] + size + (1 if p < extra else 0))
    return bounds


def _bounds_equal_params(params: Sequence[int], parts: int) -> list[int]:
    """Contiguous runs whose largest parameter sum is the least possible (the first such split)."""
    n = len(params)
    prefix = [0]
    for p in params:
        prefix.append(prefix[-1] + p)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    back = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0
    for p in range(1, parts + 1):
        for j in range(p, n + 1):
            for i in range(p - 1, j):
                value = max(best[p - 1][i], prefix[j] - prefix[i])
                if value < best[p][j]:
                    best[p][j], back[p][j] = value, i
    bounds, j = [n], n
    for p in range(parts, 0, -1):
        j = back[p][j]
        bounds.append(j)
    return bounds[::-1]


def _baseline(
    name: str, bounds: Sequence[int], problem: Problem, table: CostTable, devices: Sequence[Device], kinds: Sequence[str]
) -> Baseline:
    index = {k: n for n, k in enumerate(kinds)}
    stages = [(i, j, index[d.kind]) for (i, j), d in zip(zip(bounds, bounds[1:], strict=False), devices, strict=False)]
    return Baseline(name, make_stages(problem, table, devices, evaluate(problem, stages), kinds))


def equal_layers(problem: Problem, table: CostTable, devices: Sequence[Device], kinds: Sequence[str]) -> Baseline:
    """Equal unit counts on the first ``min(devices, units)`` devices, in the order given."""
    parts = min(len(devices), len(table.units))
    return _baseline("equal-layers", _bounds_equal_layers(len(table.units), parts), problem, table, devices, kinds)


def equal_params(problem: Problem, table: CostTable, devices: Sequence[Device], kinds: Sequence[str]) -> Baseline:
    """Balanced parameter counts (DeepSpeed's default) on the first ``min(devices, units)`` devices."""
    parts = min(len(devices), len(table.units))
    return _baseline("equal-params", _bounds_equal_params([u.params for u in table.units], parts), problem, table, devices, kinds)
