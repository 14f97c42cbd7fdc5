"""What to checkpoint under a memory budget: the modules to recompute so the step fits, at the least time.

The candidates are the model's blocks (:func:`candidate_blocks`: its children, a container opened into
its items). One simulated step (:mod:`graphprof.training.step`) with
:class:`BlockCosts` watching gives, per block, the bytes its forward saves for backward, the inputs a
checkpoint would keep instead, and its forward's aten calls, costed by the formula registry and timed on
the device (:func:`_seconds`: the roofline's lower bound, an estimate).

The choice is a 0/1 knapsack with one coupling term, solved exactly by ``scipy.optimize.milp`` (HiGHS,
branch and bound): minimise ``sum(t_i x_i)`` subject to

* forward:  ``F - sum(f_i x_i) <= B``  (every chosen block's saved bytes freed at the forward's end);
* backward: ``G - sum(f_i x_i) + M <= B`` and ``M >= s_i x_i`` (a recomputed block's activations come back,
  one block at a time, while its backward runs);
* the optimizer's peak is untouched (``<= B`` or nothing can fit).

The model's figures are estimates of where the peak moves; the plan is then simulated again with
``torch.utils.checkpoint`` applied, and, for a plan made for a CPU, the real step is run with the plan
applied and its peak measured by the allocator (:class:`~graphprof.training.measured.PlanCheck`: the CPU
kernels' own buffers, which no dry run sees, are in it). The peak reported, and the one "fits" is decided on,
is the measured one where there is one, else the simulated one; when it is over the budget the budget given
to the solver is lowered by the excess and the choice made again (4 rounds at most).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

from graphprof.base.choices import Lowering, OpStatus, Optimizer, Phase
from graphprof.cost.bounds import roofline_time
from graphprof.cost.count import op_record
from graphprof.cost.result import OpRecord
from graphprof.devices.hardware import Hardware
from graphprof.devices.predict import predict_ops
from graphprof.devices.table import Calibration
from graphprof.errors import InvalidInputError, MissingDependencyError
from graphprof.run.events import Layer, Observer, OpEvent
from graphprof.run.propagate import op_call
from graphprof.run.step import checkpointed
from graphprof.session import BuiltModel
from graphprof.sharding.spec import ShardSpec
from graphprof.training.measured import PlanCheck
from graphprof.training.result import CheckpointChoice, CheckpointPlan, MemoryPlan
from graphprof.training.simulate import plan_step
from graphprof.training.step import StepInputs, simulate_step

__all__ = ["BlockCosts", "candidate_blocks", "solve_checkpoint", "plan_checkpoint", "SOLVER"]

SOLVER = "scipy.optimize.milp (HiGHS): exact 0/1 knapsack with the backward's recompute term"
_ROUNDS = 4


def _has_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def candidate_blocks(model: nn.Module, max_depth: int = 4) -> list[str]:
    """Dotted names of the modules a plan may recompute, in definition order: the model's children that
    hold parameters, with an ``nn.ModuleList`` (never called itself) or a child holding over half the
    parameters opened into its own children (a transformer's layers, ResNet's last stage).

    >>> from torchvision.models import resnet18
    >>> candidate_blocks(resnet18())
    ['conv1', 'bn1', 'layer1', 'layer2', 'layer3', 'layer4.0', 'layer4.1', 'fc']
    """
    total = sum(p.numel() for p in model.parameters())
    out: list[str] = []

    def visit(prefix: str, module: nn.Module, depth: int) -> None:
        for name, child in module.named_children():
            if not _has_params(child):
                continue
            inner = [c for c in child.children() if _has_params(c)]
            big = isinstance(child, nn.ModuleList) or 2 * sum(p.numel() for p in child.parameters()) > total
            if depth < max_depth and inner and big:
                visit(f"{prefix}{name}.", child, depth + 1)
            else:
                out.append(prefix + name)

    visit("", model, 0)
    return out


@dataclass
class _Block:
    saved: dict[StorageWeakRef, int] = field(default_factory=dict)
    inputs: dict[StorageWeakRef, int] = field(default_factory=dict)
    ops: list[OpRecord] = field(default_factory=list)


class BlockCosts(Observer):
    """Per candidate block of one simulated step: bytes saved for backward inside it, its inputs, its
    forward's costed calls; and every call of the step (for the step's predicted time). An observer of the
    run loop's training step: blocks are the copy's modules by name, entered and left as layers."""

    wants_ops = True
    wants_saved = True

    def __init__(self, blocks: list[str]) -> None:
        self.blocks = {name: _Block() for name in blocks}
        self.stack: list[str] = []
        self.step_ops: list[OpRecord] = []
        self.saved_by: dict[StorageWeakRef, str | None] = {}

    def layer_entered(self, layer: Layer) -> None:
        if layer.name in self.blocks:
            self.stack.append(layer.name)

    def layer_inputs(self, layer: Layer, inputs: Any) -> None:
        if layer.name in self.blocks:
            for t in tree_flatten(inputs)[0]:
                if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                    self.blocks[layer.name].inputs[StorageWeakRef(t.untyped_storage())] = t.untyped_storage().nbytes()

    def layer_left(self, layer: Layer, output: Any) -> None:
        if layer.name in self.blocks:
            self.stack.pop()

    def saved(self, layer: Layer | None, tensor: torch.Tensor) -> None:
        t = tensor
        if isinstance(t, nn.Parameter) or isinstance(t._base, nn.Parameter) or t.layout != torch.strided:
            return
        ref = StorageWeakRef(t.untyped_storage())
        if ref not in self.saved_by:
            owner = self.stack[0] if self.stack else None
            self.saved_by[ref] = owner
            if owner is not None:
                self.blocks[owner].saved[ref] = t.untyped_storage().nbytes()

    def op(self, event: OpEvent) -> None:
        phase = Phase.FORWARD if self.stack else Phase.BACKWARD  # the blocks' forwards, the rest of the step
        record = op_record(replace(op_call(event), phase=phase))
        self.step_ops.append(record)
        if self.stack:
            self.blocks[self.stack[0]].ops.append(record)

    def freed(self, name: str) -> int:
        """Bytes checkpointing ``name`` frees: what it saved, less its inputs that only it saved or that
        nobody saved (a checkpoint keeps its inputs)."""
        block = self.blocks[name]
        kept = sum(size for ref, size in block.inputs.items() if ref not in self.saved_by or self.saved_by[ref] == name)
        return max(0, sum(block.saved.values()) - kept)


def _seconds(ops: list[OpRecord], dtype: str, hardware: Hardware, calibration: Calibration | None) -> tuple[float, str]:
    """Predicted seconds of the calls among ``ops`` on ``hardware``, and how: ``calibration``'s per-op models
    where it has them (the ``local`` preset after ``graphprof calibrate``: each op as it runs inside a plain
    forward, :func:`graphprof.devices.predict.predict_ops`), else each counted call's roofline bound (FLOPs
    at the dense peak for ``dtype``, bytes at the bandwidth), summed: a lower bound."""
    if calibration is not None and calibration.op_model is not None:
        return sum(
            predict_ops(ops, dtype, hardware, calibration)
        ), f"the {hardware.name} calibration's per-op predictions (each op in place)"
    peak = hardware.peak_flops(dtype)
    counted = [op for op in ops if op.status is OpStatus.COUNTED]
    return sum(
        roofline_time(op.cost.flops, op.cost.bytes_moved, peak, hardware.bandwidth) for op in counted
    ), f"the roofline of {hardware.name} (a lower bound)"


def solve_checkpoint(
    freed: list[int], saved: list[int], seconds: list[float], forward: int, backward: int, budget: int
) -> list[bool] | None:
    """The cheapest choice meeting the forward and backward constraints of the module docstring, or
    ``None`` when none does. Exact (HiGHS' branch and bound); checked against brute force in the tests."""
    import numpy as np

    try:
        from scipy.optimize import Bounds, LinearConstraint, milp
    except ImportError as exc:
        raise MissingDependencyError("a checkpoint plan is solved with scipy.optimize.milp: pip install 'graphprof[plan]' (scipy)") from exc

    n = len(freed)
    if forward <= budget and backward <= budget:
        return [False] * n
    c = np.array([*seconds, 0.0]) + np.array([*([1e-12] * n), 0.0])  # ties go to fewer blocks
    rows: list[list[float]] = [[-float(f) for f in freed] + [0.0], [-float(f) for f in freed] + [1.0]]
    upper = [float(budget - forward), float(budget - backward)]
    for i, s in enumerate(saved):
        rows.append([float(s) if j == i else 0.0 for j in range(n)] + [-1.0])
        upper.append(0.0)
    constraint = LinearConstraint(np.array(rows, dtype=float), -np.inf, np.array(upper, dtype=float))
    integrality = np.array([1] * n + [0])
    result = milp(c, constraints=[constraint], integrality=integrality, bounds=Bounds([0] * n + [0], [1] * n + [np.inf]))
    if not result.success:
        return None
    return [bool(round(v)) for v in result.x[:n]]


def plan_checkpoint(step: BuiltModel, plan: MemoryPlan, budget: int, hardware: Hardware | None, *, dtype: torch.dtype | None,
                    optimizer: Optimizer, foreach: bool, shard: ShardSpec | None, check: PlanCheck | None = None) -> CheckpointPlan:  # fmt: skip
    """The checkpoint plan of ``step`` (a :class:`graphprof.session.BuiltModel`) under ``budget`` bytes;
    ``plan`` is its unplanned :class:`MemoryPlan`; ``check`` measures a plan's real peak on this CPU. See the
    module docstring."""
    if hardware is None:
        raise InvalidInputError("a checkpoint plan predicts recompute time on a device: give hardware (--hardware)")
    if shard is not None:
        raise InvalidInputError("a checkpoint plan is made for one device: plan it without sharding, then shard the plan")
    blocks = candidate_blocks(step.model)
    costs = BlockCosts(blocks)
    cpu = hardware.target is Lowering.CPU
    simulate_step(StepInputs(step.model, step.args, step.kwargs, dtype, optimizer, foreach, step.real, cpu_kernels=cpu), [costs])
    run_dtype = plan.dtype
    calibration = hardware.calibration  # read once, with the device
    timed = [_seconds(costs.blocks[b].ops, run_dtype, hardware, calibration)[0] for b in blocks]
    freed = [costs.freed(b) for b in blocks]
    saved = [sum(costs.blocks[b].saved.values()) for b in blocks]
    peaks = {p.phase: p.breakdown.total for p in plan.phases}
    flops = [sum(op.cost.flops for op in costs.blocks[b].ops) for b in blocks]
    step_s, how = _seconds(costs.step_ops, run_dtype, hardware, calibration)
    target, chosen, planned, measured, peak = budget, None, None, None, 0
    useful = [f > 0 for f in freed]  # a module that frees nothing is never recomputed, not even as a last resort
    for _ in range(_ROUNDS):
        chosen = solve_checkpoint(freed, saved, timed, peaks.get(Phase.FORWARD, 0), peaks.get(Phase.BACKWARD, 0), target)
        if chosen is None or peaks.get(Phase.OPTIMIZER, 0) > budget:
            chosen = useful
        names = frozenset(b for b, c in zip(blocks, chosen, strict=True) if c)
        wraps = (checkpointed(set(names)),)
        planned = plan_step(step, dtype=dtype, optimizer=optimizer, foreach=foreach, shard=None, wraps=wraps, cpu_kernels=cpu)
        measured = check.peak(names) if check is not None else None
        peak = planned.peak_bytes if measured is None else measured
        if peak <= budget or chosen == useful:
            break
        target -= peak - budget
    assert chosen is not None and planned is not None
    choices = tuple(CheckpointChoice(b, f, fl, t, c) for b, f, fl, t, c in zip(blocks, freed, flops, timed, chosen, strict=True))
    return CheckpointPlan(
        budget_bytes=budget, choices=choices, solver=SOLVER, timing=how,
        solver_peak_bytes=max(peaks.get(Phase.FORWARD, 0) - sum(f for f, c in zip(freed, chosen, strict=True) if c), 0),
        planned=replace(planned, notes=()), feasible=peak <= budget, step_s=step_s,
        measured_peak_bytes=measured, measured_source=check.source if check is not None else None,
    )  # fmt: skip
