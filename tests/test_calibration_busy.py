"""A calibration measured on a busy machine says so wherever it is used; a noisy run teaches it nothing; a
calibration run in a log prints its progress there (issue 54)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from graphprof.calibrate.preset import LocalPreset, busy_reason
from graphprof_cli.main import app

runner = CliRunner()


def test_busy_is_a_load_above_the_cores_before_or_after() -> None:
    assert busy_reason("6.90 3.10 1.00", "0.50 0.40 0.30", cores=2) == (
        "the load average was 6.90 with 2 cores while it measured: its times include other processes' work"
    )
    assert busy_reason("0.50 0.40 0.30", "2.01 1.00 1.00", cores=2) is not None  # after counts too
    assert busy_reason("2.00 1.00 1.00", "1.99 1.00 1.00", cores=2) is None  # at the cores: not over
    assert busy_reason(None, None, cores=2) is None  # no /proc/loadavg: nothing to say


def _local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **device: object) -> Path:
    from graphprof.calibrate.store import write_preset
    from graphprof.devices.hardware import get_hardware
    from graphprof.devices.local import cpu_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    current = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__, **device}
    h100 = get_hardware("h100")
    assert h100.calibration is not None
    return write_preset(LocalPreset(h100, h100.calibration, current).to_dict())


def test_every_prediction_from_a_busy_calibration_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _local(tmp_path, monkeypatch, busy=busy_reason("6.90 3.10 1.00", None, cores=2))
    result = runner.invoke(app, ["--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local", "--width", "200"])
    assert result.exit_code == 0, result.output
    assert "the local calibration is noisy (the load average was 6.90 with 2 cores" in result.output
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    _local(quiet, monkeypatch)
    result = runner.invoke(app, ["--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local", "--width", "200"])
    assert result.exit_code == 0 and "noisy" not in result.output


def test_the_calibrate_command_warns_of_a_busy_machine_and_logs_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.calibrate as calibrate_package
    from graphprof.devices.hardware import get_hardware

    h100 = get_hardware("h100")

    def fake_calibrate(device: str, *, output: object, progress: object, threads: object, quick: bool) -> LocalPreset:
        for done in range(3):
            progress(done + 1, 3, f"step {done + 1}")  # type: ignore[operator]
        assert h100.calibration is not None
        return LocalPreset(h100, h100.calibration, {"type": "cpu", "busy": "the load average was 6.90 with 2 cores"})

    monkeypatch.setattr(calibrate_package, "calibrate", fake_calibrate)
    result = runner.invoke(app, ["calibrate"])
    assert "calibrating: 3/3 step 3" in result.stderr  # CliRunner's stderr is not a terminal: plain lines
    assert "graphprof: warning: the load average was 6.90 with 2 cores" in result.stderr


def test_a_noisy_run_teaches_the_calibration_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_local_calibration_file import _measured_mlp
    from test_opmodel import _write_local

    import graphprof.calibrate.learn as learn
    from graphprof.devices.hardware import get_hardware

    path = _write_local(tmp_path, monkeypatch)
    measured_profile = _measured_mlp()
    measured = measured_profile.measurement
    assert measured is not None
    # the same run twice: quiet (no spread) and noisy (CV 102%, the case), whatever this machine's load
    quiet = replace(measured, forward=replace(measured.forward, std=0.0))
    profile = replace(measured_profile, measurement=quiet)
    noisy = replace(profile, measurement=replace(quiet, forward=replace(quiet.forward, std=quiet.forward.mean * 1.02)))
    measured = quiet
    assert noisy.measurement.noisy and not measured.noisy
    local = get_hardware("local")
    before = json.loads(path.read_text()).get("learned", [])
    assert learn.learn_from_run(noisy, local) == 0
    assert json.loads(path.read_text()).get("learned", []) == before
    assert learn.learn_from_run(profile, local) > 0  # the same run, quiet, does teach it
