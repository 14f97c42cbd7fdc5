"""A real training step on the CPU, measured by the allocator: the reference a plan is checked against.

The step is :func:`graphprof.plan.step.train_step`, the one the planner simulates, run for real on a copy
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
from dataclasses import dataclass
from typing import Any

from torch import nn
from torch.utils._pytree import tree_flatten

from graphprof.base.choices import Optimizer
from graphprof.measure.memory import peak_during
from graphprof.plan.step import Wrap, make_optimizer, optimizer_tensors, storage_bytes, train_step

__all__ = ["MeasuredStep", "measure_step"]


@dataclass(frozen=True)
class MeasuredStep:
    """A real step's peak (bytes held before it plus the allocator's most on top) and its time."""

    peak_bytes: int
    base_bytes: int
    step_s: float
    source: str = "torch.profiler CPU allocator events (profile_memory=True), this thread"


def measure_step(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    optimizer: Optimizer | str = Optimizer.ADAMW,
    wraps: tuple[Wrap, ...] = (),
    repeats: int = 3,
) -> MeasuredStep:
    """Measure one step of a copy of ``model`` (real weights, on the CPU) with ``wraps`` applied to the
    copy; ``step_s`` is the fastest of ``repeats`` steps timed apart from the memory run (the profiler
    slows what it watches)."""
    step_model = copy.deepcopy(model)
    for wrap in wraps:
        step_model = wrap(step_model)
    step_model.train()
    opt = make_optimizer(step_model, Optimizer.parse(optimizer), foreach=False)
    train_step(step_model, args, kwargs, opt)  # creates the optimizer's state
    base = storage_bytes([*step_model.parameters(), *step_model.buffers(), *optimizer_tensors(opt), *tree_flatten((args, kwargs))[0]])
    extra, _ = peak_during(lambda: train_step(step_model, args, kwargs, opt), "cpu")
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        train_step(step_model, args, kwargs, opt)
        times.append(time.perf_counter() - start)
    return MeasuredStep(base + extra, base, min(times))


