"""Op times where they run: plain forwards profiled, each dispatched aten call's time in execution order.

An op timed alone in a loop re-uses one freed block for its output, finds its inputs in cache and pays
no module call around it. In a model's plain forward none of that holds: each activation is freed as
the next is allocated (with glibc's malloc, large blocks go back to the kernel and come back as page
faults on first touch), the input was written by another op, and Python runs between ops. This pass
measures the ops *there*:

1. the model runs its plain forward (``model(*args)`` under ``torch.no_grad``, nothing holding the
   activations) ``warmup`` times, then ``timed`` times untimed by the profiler
   (:func:`graphprof.measure.timing.profile_forward`, the loop ``--measure``'s *forward* is timed by):
   the plain forward's median wall time;
2. ``runs`` more plain forwards under ``torch.profiler`` (CPU events, no shapes, no stacks): every
   aten call a dispatch mode would see (:func:`graphprof.measure.layers.dispatched`) in start order,
   with its inclusive time; the per-position median over the runs;
3. on the CPU, ``timed`` more plain forwards, each with the process's minor page faults counted around it
   (``getrusage``): the bytes a forward maps afresh, median over the runs. In a batch-8 forward of a
   torchvision model on this 2-core machine they were 70-460 MB, run after run, in outputs of 2 MiB and
   more that the allocator had handed back to the kernel (glibc trims its heap and unmaps large blocks).

With ``plain=False`` steps 1 and 3 are left out (``warmup`` untimed forwards come first all the same): for a
caller that has the plain forward's time and faults from elsewhere (the calibration's fresh processes,
:mod:`graphprof.calibrate.fresh_faults`); ``forward_s`` is then the profiled forwards' wall time and
``fault_bytes`` 0.

:class:`ContextTimes` keeps the two apart: the ops' sum under the profiler, the plain forward without
it, and what lies between (the host's time outside every dispatched call: module calls, Python,
composite ops' wrappers). :func:`graphprof.calibrate.samples.samples_from_context` pairs the calls with
a dry run's records.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from graphprof.errors import MeasurementError
from graphprof.measure.heap import settle_malloc
from graphprof.measure.kineto import quiet_kineto
from graphprof.measure.layers import dispatched
from graphprof.measure.run import cast_inputs, materialized, resolve_device
from graphprof.measure.timing import ProfilingContext, call_model, faulted_bytes, profile_forward

__all__ = ["ContextTimes", "context_times", "faulted_bytes"]


@dataclass(frozen=True)
class ContextTimes:
    """The dispatched calls of a plain forward in execution order, each ``(aten name, seconds)``, and
    the plain forward's own time without the profiler."""

    ops: tuple[tuple[str, float], ...]
    #: median wall seconds of a plain forward, not profiled
    forward_s: float
    #: median wall seconds of a plain forward under the profiler
    profiled_s: float
    runs: int
    #: median bytes of fresh pages a plain forward faulted in (minor faults x the page size; 0 off the CPU)
    fault_bytes: float = 0.0

    @property
    def ops_s(self) -> float:
        """The dispatched calls' inclusive times summed (under the profiler)."""
        return sum(t for _, t in self.ops)

    @property
    def outside_s(self) -> float:
        """The plain forward's time outside every dispatched call: ``forward_s - ops_s``, at least 0."""
        return max(0.0, self.forward_s - self.ops_s)


def _profiled_calls(work: nn.Module, batch: Any) -> tuple[list[tuple[str, float]], float]:
    """One plain forward under the profiler: its dispatched calls ``(name, seconds)`` in start order, and its wall time."""
    from torch.profiler import ProfilerActivity, profile

    with quiet_kineto(), profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        call_model(work, batch)
        wall = time.perf_counter() - start
    calls = sorted((e for e in prof.events() if dispatched(e)), key=lambda e: e.time_range.start)
    return [(e.name, e.cpu_time_total * 1e-6) for e in calls], wall


def _medians(runs: list[list[tuple[str, float]]]) -> tuple[tuple[str, float], ...]:
    """The per-position median of runs that dispatched the same calls; a run that differs is dropped."""
    names = [name for name, _ in runs[0]]
    same = [r for r in runs if [name for name, _ in r] == names]
    return tuple((name, statistics.median(r[i][1] for r in same)) for i, name in enumerate(names))


def context_times(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    runs: int = 3,
    warmup: int = 2,
    timed: int = 5,
    seed: int = 0,
    plain: bool = True,
) -> ContextTimes:
    """Time ``model``'s plain forward and each of its dispatched calls in place (see the module docstring;
    ``plain=False`` times the calls alone).

    The model is left as found: a model elsewhere (another device, the meta device) runs as a seeded copy.
    """
    if min(runs, timed) < 1 or warmup < 0:
        raise MeasurementError(f"runs and timed must be at least 1 and warmup at least 0, got {runs}, {timed}, {warmup}")
    if kwargs and args:
        raise MeasurementError("context_times takes positional or keyword inputs, not both")
    dev = resolve_device(device)
    work, _ = materialized(model, dev, dtype, seed)
    batch: Any = cast_inputs(kwargs, dev, dtype) if kwargs else cast_inputs(args, dev, dtype)
    with ProfilingContext(work, disable_dropout=True, eval_mode=True, seed=seed), torch.no_grad():
        forward = _plain_seconds(work, batch, dev, warmup, timed if plain else 0)
        profiled = [_profiled_calls(work, batch) for _ in range(runs)]
        faults = [faulted_bytes(lambda: call_model(work, batch)) for _ in range(timed if plain and dev.type == "cpu" else 0)]
    wall = statistics.median(w for _, w in profiled)
    return ContextTimes(_medians([calls for calls, _ in profiled]), forward if forward is not None else wall, wall, runs,
                        statistics.median(faults) if faults else 0.0)  # fmt: skip


def _plain_seconds(work: nn.Module, batch: Any, dev: torch.device, warmup: int, timed: int) -> float | None:
    """The plain forward's median seconds over ``timed`` runs after ``warmup`` (``profile_forward``), or ``None``
    for ``timed`` 0: then the ``warmup`` runs alone, on the heap as ``profile_forward`` settles it."""
    if timed > 0:
        return profile_forward(work, batch, num_runs=timed, warmup_runs=warmup, device=dev).median / 1e3
    if dev.type == "cpu":
        settle_malloc()
    for _ in range(warmup):
        call_model(work, batch)
    return None
