"""The records of a planned training step: what it holds at its peak, where, and whether it fits.

Plain integers (bytes, FLOPs) and strings; renderers scale and format them. Every breakdown sums to its
total: ``sum(StepBreakdown.to_dict().values()) - total == total`` is how the tests read it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graphprof.base.choices import Choice, Optimizer, Phase
from graphprof.base.display import NotebookDisplay
from graphprof.base.record import Record

__all__ = ["StepExecution", "StepBreakdown", "PhasePeak", "CheckpointChoice", "CheckpointPlan", "MemoryPlan", "RanksPlan"]


class StepExecution(Choice):
    """How the planned step ran: on FakeTensors (nothing allocated), or for real on the CPU (a model whose
    forward reads values)."""

    FAKE = "fake"
    REAL = "real"


@dataclass(frozen=True)
class StepBreakdown:
    """Bytes live at one moment of a step, by what holds them; :attr:`total` is their sum.

    ``activations``: tensors autograd saved for backward and still held; ``inputs``: the batch;
    ``transients``: everything else a call made and something still refers to (the backward's gradients
    of activations, the optimizer step's temporaries, a block's output not yet consumed).
    """

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    inputs: int
    transients: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations + self.inputs + self.transients

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}


@dataclass(frozen=True)
class PhasePeak:
    """The most a phase of the step held, what held it, and the module and aten op running then (in the
    backward: the module whose autograd node was running)."""

    phase: Phase
    breakdown: StepBreakdown
    module: str | None
    op: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "bytes": self.breakdown.total,
            "breakdown": self.breakdown.to_dict(),
            "module": self.module,
            "op": self.op,
        }


@dataclass(frozen=True)
class CheckpointChoice(Record):
    """One module the plan may recompute: what checkpointing it frees and costs.

    ``freed_bytes``: what its forward saves for backward less the inputs a checkpoint keeps instead;
    ``recompute_flops``: its forward, run again in the backward; ``recompute_s``: that forward's predicted
    time on the device (an estimate: the roofline of its ops)."""

    module: str
    freed_bytes: int
    recompute_flops: int
    recompute_s: float
    chosen: bool


@dataclass(frozen=True)
class CheckpointPlan:
    """Which modules to recompute so the step fits ``budget_bytes`` at the least recompute time.

    ``solver`` names the method (``scipy.optimize.milp`` (HiGHS), exact for this 0/1 knapsack); the new
    peak comes from the step simulated again with the plan applied (``planned``), not from the
    subtraction the solver used (``solver_peak_bytes``), and, for a plan made for a CPU, from the real
    step with the plan applied (``measured_peak_bytes``, the allocator's): :attr:`peak_bytes` is the
    measured one where there is one, and ``feasible`` is decided on it."""

    budget_bytes: int
    choices: tuple[CheckpointChoice, ...]
    solver: str
    solver_peak_bytes: int
    planned: MemoryPlan | None
    feasible: bool
    step_s: float | None = None
    #: how times were predicted (a device's calibration, or the roofline's lower bound)
    timing: str = ""
    #: the real step's peak with the plan applied, on this machine's CPU (``None``: not measured, a GPU's plan)
    measured_peak_bytes: int | None = None
    #: how it was measured
    measured_source: str | None = None

    @property
    def peak_bytes(self) -> int | None:
        """The applied plan's peak: measured where it was, else simulated."""
        if self.measured_peak_bytes is not None:
            return self.measured_peak_bytes
        return None if self.planned is None else self.planned.peak_bytes

    @property
    def chosen(self) -> tuple[CheckpointChoice, ...]:
        return tuple(c for c in self.choices if c.chosen)

    @property
    def recompute_flops(self) -> int:
        return sum(c.recompute_flops for c in self.chosen)

    @property
    def recompute_s(self) -> float:
        return sum(c.recompute_s for c in self.chosen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_bytes": self.budget_bytes, "solver": self.solver, "feasible": self.feasible,
            "solver_peak_bytes": self.solver_peak_bytes, "peak_bytes": self.peak_bytes,
            "measured_peak_bytes": self.measured_peak_bytes, "measured_source": self.measured_source,
            "recompute_flops": self.recompute_flops,
            "recompute_s_estimated": self.recompute_s, "step_s_estimated": self.step_s, "timing": self.timing,
            "choices": [c.to_dict() for c in self.choices],
            "planned": None if self.planned is None else self.planned.to_dict(),
        }  # fmt: skip


@dataclass(frozen=True)
class MemoryPlan(NotebookDisplay):
    """One training step's memory, simulated: each phase's peak and its breakdown, the step's peak and
    where it happens, against the device's memory (per rank when sharded).

    ``execution`` is ``"fake"`` (a dry run on FakeTensors: nothing allocated) or ``"real"`` (a model whose
    forward reads values, run on the CPU); either way the figures are the storages the step's aten calls
    made, an estimate of what the allocator will hold (no allocator rounding, no kernel's private
    workspace).
    """

    model_name: str
    inputs: str
    dtype: str
    optimizer: Optimizer
    foreach: bool
    execution: StepExecution
    phases: tuple[PhasePeak, ...]
    #: every byte autograd saved for backward in the forward (the activations' total, whatever is freed after)
    saved_activation_bytes: int
    shard: str | None = None
    device: str | None = None
    device_memory_bytes: int | None = None
    checkpoint: CheckpointPlan | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def peak(self) -> PhasePeak:
        """The phase whose peak is the step's (the first of equals)."""
        return max(self.phases, key=lambda p: p.breakdown.total)

    @property
    def peak_bytes(self) -> int:
        return self.peak.breakdown.total

    @property
    def largest_transient_bytes(self) -> int:
        """The most transient bytes at any phase's peak (the backward's or the optimizer step's temporaries)."""
        return max((p.breakdown.transients for p in self.phases), default=0)

    @property
    def fits(self) -> bool | None:
        """Whether the peak fits the device's memory (``None`` without a device)."""
        return None if self.device_memory_bytes is None else self.peak_bytes <= self.device_memory_bytes

    def to_dict(self) -> dict[str, Any]:
        peak = self.peak
        return {
            "kind": "memory_plan", "model": self.model_name, "inputs": self.inputs, "dtype": self.dtype,
            "optimizer": self.optimizer, "foreach": self.foreach, "execution": self.execution, "shard": self.shard,
            "peak_bytes": self.peak_bytes, "peak_phase": peak.phase.value, "peak_module": peak.module, "peak_op": peak.op,
            "breakdown": peak.breakdown.to_dict(), "phases": [p.to_dict() for p in self.phases],
            "saved_activation_bytes": self.saved_activation_bytes,
            "largest_transient_bytes": self.largest_transient_bytes,
            "device": self.device, "device_memory_bytes": self.device_memory_bytes, "fits": self.fits,
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_dict(), "notes": list(self.notes),
        }  # fmt: skip


@dataclass(frozen=True)
class RanksPlan(NotebookDisplay):
    """The smallest FSDP world size at which the step fits the device, with and without a checkpoint plan.

    ``tried``: each world size simulated and its per-rank peak; ``None`` where no size up to the limit fits."""

    model_name: str
    device: str
    device_memory_bytes: int
    world: int | None
    world_with_checkpoint: int | None
    tried: tuple[tuple[int, int], ...]
    tried_with_checkpoint: tuple[tuple[int, int], ...]
    notes: tuple[str, ...] = ()
    #: the candidates that fit, fastest first: ``(world, checkpoint, tokens/s per GPU, step seconds)``, each
    #: step priced on the device (:mod:`graphprof.sharding.steptime`); empty where the device has no links
    ranked: tuple[tuple[int, str, float, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "ranks_plan", "model": self.model_name, "device": self.device,
            "device_memory_bytes": self.device_memory_bytes, "world": self.world,
            "world_with_checkpoint": self.world_with_checkpoint,
            "tried": [{"world": w, "peak_bytes": b} for w, b in self.tried],
            "tried_with_checkpoint": [{"world": w, "peak_bytes": b} for w, b in self.tried_with_checkpoint],
            "ranked": [{"world": w, "checkpoint": c, "tokens_per_s_per_gpu": r, "step_s": t} for w, c, r, t in self.ranked],
            "notes": list(self.notes),
        }  # fmt: skip
