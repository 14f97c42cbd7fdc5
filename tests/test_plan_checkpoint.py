"""What to checkpoint under a budget (issue 39, point 4): the solver against brute force, the plan
simulated under its budget, and applied to a real model on the CPU (the allocator's peak)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from graphprof.errors import InvalidInputError
from graphprof.run.step import checkpointed
from graphprof.training import CheckpointPlan, measure_step, plan_memory
from graphprof.training.checkpoint import candidate_blocks, solve_checkpoint


def _brute(freed: list[int], saved: list[int], seconds: list[float], forward: int, backward: int, budget: int) -> float | None:
    best = None
    for pick in itertools.product((False, True), repeat=len(freed)):
        f = sum(x for x, p in zip(freed, pick, strict=True) if p)
        m = max((s for s, p in zip(saved, pick, strict=True) if p), default=0)
        if forward - f <= budget and backward - f + m <= budget:
            cost = sum(t for t, p in zip(seconds, pick, strict=True) if p)
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_solver_is_exact(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    n = 7
    freed = [int(x) for x in torch.randint(10, 100, (n,), generator=g)]
    saved = [f + int(x) for f, x in zip(freed, torch.randint(0, 30, (n,), generator=g), strict=True)]
    seconds = [float(x) for x in torch.rand(n, generator=g)]
    forward, backward = 400, 380
    budget = int(torch.randint(150, 420, (1,), generator=g))
    chosen = solve_checkpoint(freed, saved, seconds, forward, backward, budget)
    best = _brute(freed, saved, seconds, forward, backward, budget)
    if best is None:
        assert chosen is None
    else:
        assert chosen is not None
        assert sum(t for t, c in zip(seconds, chosen, strict=True) if c) == pytest.approx(best, abs=1e-6)


class Chain(nn.Module):
    """Six wide blocks: each saves about 8x its input, so checkpointing frees most of it."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 64)) for _ in range(6)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return x


def test_candidates_open_containers() -> None:
    assert candidate_blocks(Chain()) == [f"blocks.{i}" for i in range(6)]


def _planned(shape: tuple[int, int]) -> tuple[int, CheckpointPlan]:
    plain = plan_memory(Chain(), input_shape=shape, foreach=False)
    budget = int(0.6 * plain.peak_bytes)
    plan = plan_memory(Chain(), input_shape=shape, foreach=False, memory_budget=budget, hardware="desktop-cpu")
    assert plan.checkpoint is not None and plan.checkpoint.planned is not None
    assert budget < plain.peak_bytes
    return budget, plan.checkpoint


@pytest.mark.slow
def test_the_plan_fits_its_budget() -> None:
    budget, cp = _planned((1024, 64))
    assert cp.feasible and cp.planned is not None and cp.planned.peak_bytes <= budget
    assert 0 < len(cp.chosen) < 6  # some blocks, not all
    assert cp.recompute_flops == sum(c.recompute_flops for c in cp.chosen) > 0
    assert "roofline" in cp.timing  # desktop-cpu has no calibration: said so


@pytest.mark.slow
def test_the_plan_applied_to_a_real_step() -> None:
    model, shape = Chain(), (4096, 64)
    budget, cp = _planned(shape)
    assert cp.planned is not None
    measured = measure_step(model, (torch.randn(shape),), {}, wraps=(checkpointed({c.module for c in cp.chosen}),), repeats=1)
    assert abs(cp.planned.peak_bytes / measured.peak_bytes - 1) < 0.10
    assert measured.peak_bytes <= budget


def test_a_budget_needs_a_device() -> None:
    with pytest.raises(InvalidInputError, match="hardware"):
        plan_memory(Chain(), input_shape=(8, 64), memory_budget="1MB")
