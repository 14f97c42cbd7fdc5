"""Sweeps without end are refused at once; a sweep's output paths are checked before the work.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

# ---- sweeps without end (point 4) ---------------------------------------------------------------------


@pytest.mark.parametrize("values", ["1:inf:x2", "1:1e15:+1", "1:1000000:+1", "1:nan:x2"])
def test_unbounded_sweeps_are_refused_at_once(values: str) -> None:
    from graphprof_cli.main import app

    start = time.perf_counter()
    result = CliRunner().invoke(app, ["sweep", "--model", "resnet18", "--batch", values])
    assert result.exit_code == 2 and time.perf_counter() - start < 1.0, result.output


def test_sweep_output_paths_are_checked_first_and_dash_is_stdout(tmp_path: Path) -> None:
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["sweep", "--model", "resnet18", "--batch", "1,2", "--output", str(tmp_path / "no" / "s.json")])
    assert result.exit_code == 7 and "does not exist" in result.stderr
    result = CliRunner().invoke(app, ["sweep", "--model", "alexnet", "--batch", "1,2", "--output", "-"])
    assert result.exit_code == 0 and not Path("-").exists()
    assert '"axis": "batch"' in result.stdout
