"""graphprof partition: the exact planner against brute force, the device spec, a small model end to end."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from graphprof.errors import InvalidInputError
from graphprof.partition.solver import Infeasible, Problem, evaluate, solve


def _random_problem(rng: random.Random, units: int, counts: tuple[int, ...]) -> Problem:
    kinds = len(counts)
    bw = [[rng.choice([1e3, 5e3, 2e4]) for _ in range(kinds)] for _ in range(kinds)]
    bw = [[bw[min(a, b)][max(a, b)] for b in range(kinds)] for a in range(kinds)]  # symmetric
    lat = [[rng.choice([0.0, 0.01, 0.1]) for _ in range(kinds)] for _ in range(kinds)]
    lat = [[lat[min(a, b)][max(a, b)] for b in range(kinds)] for a in range(kinds)]
    return Problem(
        seconds=tuple(tuple(rng.uniform(0.1, 2.0) for _ in range(units)) for _ in range(kinds)),
        weight_bytes=tuple(rng.randint(1, 10) for _ in range(units)),
        activation_bytes=tuple(rng.randint(0, 5) for _ in range(units)),
        cut_bytes=(0, *(rng.randint(0, 400) for _ in range(units - 1)), 0),
        memory=tuple(rng.randint(12, 40) for _ in range(kinds)),
        count=counts,
        bandwidth=tuple(map(tuple, bw)),
        latency=tuple(map(tuple, lat)),
    )


def _brute_force(p: Problem, objective: str) -> tuple[float, float]:
    """Every composition of the units into stages, every ordered choice of distinct devices for them:
    the optimum, and (for throughput) the least latency among the plans reaching it."""
    devices = [k for k, c in enumerate(p.count) for _ in range(c)]
    n, best = p.units, (math.inf, math.inf)
    for stages in range(1, min(n, len(devices)) + 1):
        for cuts in itertools.combinations(range(1, n), stages - 1):
            bounds = (0, *cuts, n)
            ranges = list(zip(bounds, bounds[1:]))
            for chosen in itertools.permutations(range(len(devices)), stages):
                kinds = [devices[d] for d in chosen]
                if any(p.stage_memory(i, j) > p.memory[k] for (i, j), k in zip(ranges, kinds)):
                    continue
                s = evaluate(p, [(i, j, k) for (i, j), k in zip(ranges, kinds)])
                best = min(best, (s.latency, s.latency) if objective == "latency" else (s.bottleneck, s.latency))
    return best


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_solver_matches_brute_force(objective: str) -> None:
    rng = random.Random(22)
    checked = 0
    for _ in range(60):
        p = _random_problem(rng, rng.randint(1, 6), tuple(rng.randint(1, 2) for _ in range(rng.randint(1, 3))))
        expected, latency = _brute_force(p, objective)
        if math.isinf(expected):
            with pytest.raises(Infeasible):
                solve(p, objective)
            continue
        got = solve(p, objective)
        value = got.latency if objective == "latency" else got.bottleneck
        assert value == pytest.approx(expected, rel=1e-9)
        assert got.latency == pytest.approx(latency, rel=1e-6)  # throughput's tie-break: least latency
        # the plan it returns is a real one: contiguous, covering every unit, within each device's memory
        assert got.stages[0][0] == 0 and got.stages[-1][1] == p.units
        assert all(a[1] == b[0] for a, b in zip(got.stages, got.stages[1:]))
        assert all(p.stage_memory(i, j) <= p.memory[k] for i, j, k in got.stages)
        checked += 1
    assert checked > 30
