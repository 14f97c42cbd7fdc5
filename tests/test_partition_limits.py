"""Partition bounded before any work: device specs, links, the solver, threads and processes; a run leaves BatchNorm as found."""

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
    [
        ({"threads": 100_000}, "threads"),
        ({"threads": 0}, "threads"),
        ({"micro_batches": 100_000}, "micro-batches"),
        ({"kv_len": -1}, "kv-len"),
    ],
)
def test_partition_figures_are_bounded_before_any_work(options: dict, why: str, monkeypatch) -> None:
    from graphprof.partition import report

    monkeypatch.setattr(report, "prepare_and_plan", lambda *a, **k: pytest.fail("the model was prepared before the check"))
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

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8)
    )
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    partition_report(model, "cpu:2", input_shape=(2, 3, 16, 16), iters=1, run=True, run_iters=1, micro_batches=2, compare=False)
    assert [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])] == []
    assert model.training


# ---- --run: no stage outlives the command (SIGTERM, SIGKILL) ---------------------------------------------
def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


FOUR_LAYERS = """
import torch
def build():
    return torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(1024, 1024), torch.nn.ReLU())])
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize("signum", ["SIGTERM", "SIGKILL"])
def test_partition_run_leaves_no_stage_behind_when_its_parent_is_ended(signum: str, tmp_path) -> None:
    """Two gloo stages (and the TCP port rank 0 listens on) outlived a killed ``partition --run``."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "four.py").write_text(FOUR_LAYERS)  # planned in two stages for throughput
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "cli")])}
    cmd = [sys.executable, "-m", "graphprof_cli.main", "partition", "--model", "four.py:build", "--input-shape", "64,1024",
           "--devices", "cpu:2", "--objective", "throughput", "--run", "--iters", "1000000", "--micro-batches", "2"]  # fmt: skip
    parent = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stages: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(stages) < 2 and parent.poll() is None:
            time.sleep(0.5)
            stages = [p for p in _children(parent.pid) if "spawn_main" in _cmdline(p)]
        assert len(stages) == 2, "the stages never started"
        time.sleep(15)  # they import torch, join their group and run
        assert parent.poll() is None and all(_alive(p) for p in stages)
        parent.send_signal(getattr(signal, signum))
        parent.wait(timeout=60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(p) for p in stages):
            time.sleep(0.2)
        assert not any(_alive(p) for p in stages), [p for p in stages if _alive(p)]
    finally:
        parent.kill()
        parent.wait()
        for pid in stages:  # what a failing run left: ended here, never left running
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# ---- the output contract: the schema on cpu devices, the cores, a user's model ---------------------------
@pytest.mark.slow
def test_partition_on_cpu_devices_to_stdout_fits_its_schema(tmp_path) -> None:
    """``devices/1/hardware: None`` (a cpu device has no preset) did not fit the schema; 64 cpu devices on
    this machine's few cores said nothing about the cores."""
    import json

    from typer.testing import CliRunner

    from graphprof.schemas import validate
    from graphprof_cli.main import app

    (tmp_path / "four.py").write_text(FOUR_LAYERS)
    model = f"{tmp_path}/four.py:build"
    result = CliRunner().invoke(app, ["partition", "--model", model, "--input-shape", "8,1024", "--devices", "cpu:64", "--output", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    validate(data)
    assert data["devices"][0]["hardware"] is None
    assert any("this machine has" in note and "cores" in note for note in data["notes"]), data["notes"]


def test_partition_takes_the_input_shape_it_asks_a_users_model_for(tmp_path) -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    (tmp_path / "four.py").write_text(FOUR_LAYERS)
    args = ["partition", "--model", f"{tmp_path}/four.py:build", "--devices", "a100:2"]
    asked = CliRunner().invoke(app, args)
    assert asked.exit_code == 2 and "--input-shape" in asked.output
    result = CliRunner().invoke(app, [*args, "--input-shape", "8,1024"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("devices", [42, None, [1, 2], []])
def test_partition_from_the_api_refuses_devices_that_are_not_a_spec(devices: object) -> None:
    """``graphprof.partition.partition('resnet18', 42)`` was a raw TypeError."""
    from graphprof.partition import partition

    with pytest.raises(InvalidInputError, match="devices must be a spec"):
        partition("resnet18", devices)  # type: ignore[arg-type]


def test_a_run_whose_copies_of_the_model_would_not_fit_is_refused_before_any_process(monkeypatch) -> None:
    """``partition --devices cpu:2 --run`` on ``hf:t5-base`` went past 6 GB: each stage traces a whole copy."""
    import graphprof
    import graphprof.partition.run as run

    prepared = graphprof.prepare(torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 256)), input_shape=(2, 256))
    weights = 2 * (256 * 256 + 256) * 4  # two linears, float32
    monkeypatch.setattr("graphprof.base.limits.available_memory", lambda: weights * 5)  # under 2 stages x 2 + 2 copies
    monkeypatch.setattr(run, "_spawn", lambda *a, **k: pytest.fail("a process started"))
    with pytest.raises(InvalidInputError, match="each process tracing the whole model"):
        run.run_split(prepared, ["1"], micro_batches=1, iters=1)
