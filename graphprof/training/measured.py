"""A real training step on the CPU, measured by the allocator: the reference a plan is checked against.

The step is :func:`graphprof.training.step.train_step`, the one the planner simulates, run for real on a copy
of a model with weights. A first step creates the optimizer's state; the second runs under
``torch.profiler`` with ``profile_memory=True``, whose ``[memory]`` events are the CPU allocator's own
(every ``malloc`` and ``free`` of tensor memory, kernels' private buffers included), summed on this
thread (:func:`graphprof.measure.memory.peak_during`). The peak is the bytes held before the step (the
parameters, buffers, optimizer state and inputs, each storage once) plus the most allocated on top.
Python's ``tracemalloc`` sees no tensor memory and RSS counts the interpreter, so neither is used.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import set_checkpoint_early_stop

from graphprof.base.choices import Optimizer, Phase
from graphprof.base.inputs import materialize
from graphprof.base.limits import require_fits
from graphprof.measure.memory import peak_during
from graphprof.measure.run import cast_inputs, materialized
from graphprof.run.step import Wrap, checkpointed
from graphprof.training.step import make_optimizer, storage_bytes, train_step
from graphprof.training.tracker import optimizer_tensors

__all__ = ["MeasuredStep", "PlanCheck", "measure_step"]


@dataclass(frozen=True)
class MeasuredStep:
    """A real step's peak (bytes held before it plus the allocator's most on top), its time, and the time
    the named modules' forwards took inside the backward (a checkpoint's recompute), fastest step's."""

    peak_bytes: int
    base_bytes: int
    step_s: float
    recompute_s: float = 0.0
    source: str = "torch.profiler CPU allocator events (profile_memory=True), this thread"


class _RecomputeClock:
    """Wall time of the forwards of some modules that run during the backward (checkpoint's recompute)."""

    def __init__(self, model: nn.Module, names: frozenset[str], clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.phase = Phase.FORWARD
        self.seconds = 0.0
        self._start: dict[int, float] = {}
        self.handles = []
        for name, module in model.named_modules():
            if name in names:
                self.handles.append(module.register_forward_pre_hook(lambda m, _a: self._enter(m)))
                self.handles.append(module.register_forward_hook(lambda m, _a, _o: self._leave(m)))

    def _enter(self, module: nn.Module) -> None:
        self._start[id(module)] = self.clock()

    def _leave(self, module: nn.Module) -> None:
        if self.phase is Phase.BACKWARD:
            self.seconds += self.clock() - self._start.pop(id(module))

    def mark(self, phase: Phase) -> None:
        self.phase = phase


def measure_step(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    optimizer: Optimizer | str = Optimizer.ADAMW,
    wraps: tuple[Wrap, ...] = (),
    repeats: int = 3,
    recomputed: frozenset[str] = frozenset(),
    cpu_time: bool = False,
) -> MeasuredStep:
    """Measure one step of a copy of ``model`` (real weights, on the CPU) with ``wraps`` applied to the
    copy; ``step_s`` is the fastest of ``repeats`` steps timed apart from the memory run (the profiler
    slows what it watches), ``recompute_s`` the fastest of their times of the ``recomputed`` modules' forwards inside that
    step's backward (their hooks' wall time, with checkpoint's early stop off so that each recompute runs
    to its end: the recompute itself, without the allocator's page faults that make two steps' difference
    noisy on a CPU). ``cpu_time`` reads the process's CPU time instead of the wall clock: with one torch
    thread, what the recompute computes, without the time another process's load keeps it waiting."""
    step_model = copy.deepcopy(model)
    # hooks on the modules themselves, before they are wrapped
    clock = _RecomputeClock(step_model, recomputed, time.process_time if cpu_time else time.perf_counter)
    for wrap in wraps:
        step_model = wrap(step_model)
    step_model.train()
    opt = make_optimizer(step_model, Optimizer.parse(optimizer), foreach=False)
    try:
        base, extra = _peak(step_model, args, kwargs, opt)
        times = []
        for _ in range(max(1, repeats)):
            clock.seconds = 0.0
            start = time.perf_counter()
            # the whole forward recomputed (no early stop), so that its end is seen and timed, as planned
            with set_checkpoint_early_stop(not recomputed):
                train_step(step_model, args, kwargs, opt, mark=clock.mark)
            times.append((time.perf_counter() - start, clock.seconds))
    finally:
        for h in clock.handles:
            h.remove()
    # the least disturbed sample of each (another process's burst only ever adds time)
    return MeasuredStep(base + extra, base, min(t for t, _ in times), min(r for _, r in times))


def _peak(step_model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], opt: Any) -> tuple[int, int]:
    """A first step (the optimizer's state made), then the bytes held before a second and the allocator's
    most on top of them during it."""
    train_step(step_model, args, kwargs, opt)
    base = storage_bytes([*step_model.parameters(), *step_model.buffers(), *optimizer_tensors(opt), *tree_flatten((args, kwargs))[0]])
    extra, _ = peak_during(lambda: train_step(step_model, args, kwargs, opt), "cpu")
    return base, extra


class PlanCheck:
    """The real CPU peak of a checkpoint plan applied to the step: the model built with (random) weights once,
    its inputs made real, and for each set of modules a fresh copy checkpointed on them, stepped twice (the
    first makes the optimizer's state), the second measured by the allocator. This is how a plan made for a
    CPU says "fits" on what a real step holds: the CPU kernels' own buffers (the matrix product's copy of a
    transposed gradient, oneDNN's convolution workspace) are in it, which a dry run cannot see.

    Before anything is allocated the step's simulated peak (``expected_bytes``) is checked against this
    machine's available memory (:func:`graphprof.base.limits.require_fits`)."""

    def __init__(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], *, dtype: Any, optimizer: Optimizer,
                 expected_bytes: int) -> None:  # fmt: skip
        require_fits(2 * expected_bytes, "checking the checkpoint plan with a real training step on this CPU (twice the step's peak)")
        cpu = torch.device("cpu")
        self.model, _ = materialized(model, cpu, dtype, 0)
        self.args = cast_inputs(materialize(args, cpu), cpu, dtype)
        self.kwargs = cast_inputs(materialize(kwargs, cpu), cpu, dtype)
        self.optimizer = optimizer
        self.source = MeasuredStep.source

    def peak(self, names: frozenset[str]) -> int:
        """The real step's peak with ``names`` checkpointed (``torch.utils.checkpoint``, as the plan applies it)."""
        step_model = checkpointed(set(names))(copy.deepcopy(self.model)) if names else copy.deepcopy(self.model)
        step_model.train()
        opt = make_optimizer(step_model, self.optimizer, foreach=False)
        base, extra = _peak(step_model, self.args, self.kwargs, opt)
        return base + extra
