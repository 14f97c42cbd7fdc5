"""Out of memory in --measure (under an address-space cap): exit 11 naming the batch, a sweep keeps its points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# ---- out of memory in --measure (point 5), under an address-space cap -------------------------------


def _capped(args: list[str], cap: int = 4_600_000_000) -> subprocess.CompletedProcess[str]:
    if not Path("/usr/bin/prlimit").exists():
        pytest.skip("prlimit is not installed")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        ["prlimit", f"--as={cap}", sys.executable, "-m", "graphprof_cli.main", *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.slow
def test_measure_out_of_memory_is_exit_11_naming_the_batch() -> None:
    done = _capped(["--model", "resnet50", "--batch-size", "64", "--measure", "--device", "cpu", "--iters", "2", "--warmup", "1"])
    assert done.returncode == 11, done.stderr[-500:]
    assert "out of host memory" in done.stderr and "64x3x224x224" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_measured_sweep_keeps_its_points_when_memory_runs_out() -> None:
    done = _capped(["sweep", "--model", "resnet18", "--batch", "1:256:x16", "--measure", "--device", "cpu", "--output", "-"])
    assert done.returncode == 0, done.stderr[-500:]
    import json

    result = json.loads(done.stdout)
    assert [r["value"] for r in result["rows"]] == [1, 16] and result["stopped_at"] == 256
    assert all(r["measured_seconds"] > 0 for r in result["rows"])
