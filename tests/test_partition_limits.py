"""Partition bounded before any work: device specs, links, the solver, threads and processes; a run leaves BatchNorm as found.
"""

from __future__ import annotations

import os

import pytest
import torch

from graphprof.errors import InvalidInputError


# ---- 10. partition: devices, the solver, threads and processes bounded ---------------------------------
@pytest.mark.parametrize(
    ("spec", "why"),
    [("h100:1000000000", "at most 1024"), ("cpu:\u00b2", "whole number"), ("h100@1e300", "memory"), ("x=1e-320/1:1@1", "TFLOP/s")],
)
def test_device_specs_are_bounded(spec: str, why: str) -> None:
    from graphprof.partition.devices import parse_devices

    with pytest.raises(InvalidInputError, match=why):
        parse_devices(spec)


def test_a_link_that_would_make_time_infinite_is_refused() -> None:
    from graphprof.partition.devices import parse_links

    with pytest.raises(InvalidInputError, match="link bandwidth"):
        parse_links(["1e-320"])


def test_the_solver_refuses_a_problem_it_cannot_finish() -> None:
    from graphprof.partition.solver import Problem, solve

    kinds, units = 10, 14
    problem = Problem(
        seconds=((1.0,) * units,) * kinds, weight_bytes=(1,) * units, activation_bytes=(0,) * units,
        cut_bytes=(0,) * (units + 1), memory=(10**9,) * kinds, count=(6,) * kinds,
        bandwidth=((1.0,) * kinds,) * kinds, latency=((0.0,) * kinds,) * kinds,
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match="stage choices"):
        solve(problem)


@pytest.mark.parametrize(
    ("options", "why"),
    [({"threads": 100_000}, "threads"), ({"threads": 0}, "threads"), ({"micro_batches": 100_000}, "micro-batches"), ({"kv_len": -1}, "kv-len")],
)
def test_partition_figures_are_bounded_before_any_work(options: dict, why: str, monkeypatch) -> None:
    from graphprof.partition import report

    monkeypatch.setattr(report, "prepare_for", lambda *a, **k: pytest.fail("the model was prepared before the check"))
    with pytest.raises(InvalidInputError, match=why):
        report.partition_report(torch.nn.Linear(4, 4), "cpu:1", run=True, input_shape=(1, 4), **options)


def test_a_run_with_more_stages_than_cores_is_refused(monkeypatch) -> None:
    from graphprof.partition.run import check_run_options

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(InvalidInputError, match="3 stages"):
        check_run_options(micro_batches=1, iters=1, threads=1, stages=3)


# ---- 13. state as found ---------------------------------------------------------------------------
@pytest.mark.slow
def test_partition_run_leaves_batchnorm_statistics_as_found() -> None:
    from graphprof.partition.report import partition_report

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    partition_report(model, "cpu:2", input_shape=(2, 3, 16, 16), iters=1, run=True, run_iters=1, micro_batches=2, compare=False)
    assert [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])] == []
    assert model.training
