"""Sweeps without end are refused at once; a sweep's output paths are checked before the work."""

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
    # refused before any work: a sweep that started would run for hours, so 10 s tells them apart; the first
    # case also pays the sweep command's imports (1.3 s once inside the loaded full suite; 1 s was too tight)
    assert result.exit_code == 2 and time.perf_counter() - start < 10.0, result.output


def test_sweep_output_paths_are_checked_first_and_dash_is_stdout(tmp_path: Path) -> None:
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["sweep", "--model", "resnet18", "--batch", "1,2", "--output", str(tmp_path / "no" / "s.json")])
    assert result.exit_code == 7 and "does not exist" in result.stderr
    result = CliRunner().invoke(app, ["sweep", "--model", "alexnet", "--batch", "1,2", "--output", "-"])
    assert result.exit_code == 0 and not Path("-").exists()
    assert '"axis": "batch"' in result.stdout


@pytest.mark.parametrize("values", [list(range(1, 10**6 + 1)), range(1, 10**12), iter(lambda: 1, 0)])
def test_a_huge_list_from_the_api_is_refused_at_once(values) -> None:
    """The 200-point bound held for a string only; a list, a range or an endless iterator now too."""
    import graphprof
    from graphprof.errors import InvalidInputError

    start = time.perf_counter()
    with pytest.raises(InvalidInputError, match="at most 200"):
        graphprof.sweep("resnet18", "batch", values)
    assert time.perf_counter() - start < 2.0


def test_a_plot_with_an_unknown_suffix_is_refused_before_the_sweep(tmp_path: Path, monkeypatch) -> None:
    import graphprof.scaling.loop as loop
    from graphprof_cli.main import app

    ran: list[object] = []
    monkeypatch.setattr(loop, "_run_points", lambda *a, **k: ran.append(a))
    result = CliRunner().invoke(app, ["sweep", "--model", "resnet18", "--batch", "1,2", "--plot", str(tmp_path / "sw.xyz")])
    assert result.exit_code == 7 and "sw.xyz" in result.output, result.output
    assert ran == [] and "Traceback" not in result.output and not (tmp_path / "sw.xyz").exists()
