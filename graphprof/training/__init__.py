"""Plan a training step before renting the GPUs: will it fit, what to checkpoint, how many ranks.

:func:`plan_memory` simulates one training step (forward, backward, the optimizer's step) on FakeTensors
and reports each phase's peak by what holds it (parameters, gradients, optimizer state, activations saved
for backward, inputs, transients) against a device's memory, per rank with ``shard="fsdp:N"``; with
``memory_budget`` it chooses which modules to recompute (:mod:`~graphprof.training.checkpoint`).
:func:`plan_ranks` finds the smallest FSDP world size that fits. :func:`measure_step` runs the same step
for real on the CPU, the reference the plan is checked against.
"""

from graphprof.training.fits import parse_memory, plan_memory
from graphprof.training.measured import MeasuredStep, measure_step
from graphprof.training.ranks import plan_ranks
from graphprof.training.result import CheckpointChoice, CheckpointPlan, MemoryPlan, PhasePeak, RanksPlan, StepBreakdown

__all__ = [
    "plan_memory", "plan_ranks", "parse_memory", "measure_step", "MeasuredStep", "MemoryPlan", "PhasePeak", "StepBreakdown",
    "CheckpointPlan", "CheckpointChoice", "RanksPlan",
]  # fmt: skip
