"""How many ranks (issue 39, point 5): the extrapolation by hand, and the search confirmed by simulation."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from toys import Blocks

from graphprof.base.choices import Phase
from graphprof.devices.hardware import get_hardware
from graphprof.training import MemoryPlan, PhasePeak, StepBreakdown, plan_memory, plan_ranks
from graphprof.training.ranks import extrapolate


def test_extrapolation_by_hand() -> None:
    # forward: 100 B sharded (40 + 0 + 60) and 500 B not; optimizer: 160 B sharded (40 + 40 + 80), 10 B not
    phases = (
        PhasePeak(Phase.FORWARD, StepBreakdown(40, 0, 60, 450, 50, 0), None, None),
        PhasePeak(Phase.OPTIMIZER, StepBreakdown(40, 40, 80, 0, 0, 10), None, None),
    )
    plan = MemoryPlan("m", "x", "float32", "adamw", False, "fake", phases, 0)
    # at 4 ranks -> 8: forward 500 + 100 * 4 / 8 = 550; optimizer 10 + 160 / 2 = 90
    assert extrapolate(plan, 4, 8) == 550
    # -> 1 rank: forward 500 + 400 = 900; optimizer 10 + 640 = 650
    assert extrapolate(plan, 4, 1) == 900


@pytest.mark.slow
def test_the_smallest_world_is_confirmed_by_simulation() -> None:
    # eight 256 -> 1024 -> 256 blocks: 4.2 M parameters, 16.8 MB in float32; AdamW keeps 16 B per parameter
    # (weights, gradients, two moments): 67 MB unsharded
    unsharded = plan_memory(Blocks(256, 1024, depth=8), input_shape=(64, 256), foreach=False)
    memory = int(unsharded.peak_bytes * 0.4)  # needs several ranks
    device = dataclasses.replace(get_hardware("h100"), memory_gb=memory / 1e9)
    plan = plan_ranks(Blocks(256, 1024, depth=8), device, input_shape=(64, 256), foreach=False)
    tried = dict(plan.tried)
    assert plan.world is not None and tried[plan.world] <= device.memory_bytes
    if plan.world > 2:  # its half was simulated and does not fit
        assert tried[plan.world // 2] > device.memory_bytes
    assert plan.world_with_checkpoint is not None and plan.world_with_checkpoint <= plan.world
    assert not torch.distributed.is_initialized()
