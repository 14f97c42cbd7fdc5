"""A damaged ``local.json``: one line naming the field, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


# ---- a damaged local.json: one line, exit 2 (item "bad input") -------------------------------------------
def _damage(text: str, case: str) -> str:
    data = json.loads(text)
    if case == "string":
        data["hardware"]["bandwidth_gbs"] = "fast"
    elif case == "missing":
        del data["hardware"]["peak_tflops"]
    elif case == "unknown":
        data["calibration"]["warp_factor"] = 9
    elif case == "calibration-5":
        data["calibration"] = 5
    elif case == "rates":
        data["calibration"]["rates"]["float32"]["gemm"] = {"speed": 1}
    else:
        return text.replace(str(data["calibration"]["launch_s"]), "NaN", 1)
    return json.dumps(data)


@pytest.mark.parametrize("case", ["string", "missing", "unknown", "calibration-5", "rates", "nan"])
def test_a_damaged_local_calibration_is_one_line_exit_2(tmp_path: Path, monkeypatch, case: str) -> None:
    from graphprof.calibrate.preset import LocalPreset
    from graphprof.calibrate.store import write_preset
    from graphprof.devices.hardware import get_hardware

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    from graphprof.devices.local import cpu_model

    device = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__}  # current
    calibration = get_hardware("h100").calibration
    assert calibration is not None
    shipped = LocalPreset(get_hardware("h100"), calibration, device)
    path = write_preset(shipped.to_dict())
    assert invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local").exit_code == 0
    path.write_text(_damage(path.read_text(), case))
    result = invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "local calibration" in lines[0] and "graphprof calibrate" in lines[0], lines


# ---- learning: two runs at once both keep their records; damaged seconds neither read nor written -------
def _measured_mlp():
    from dataclasses import replace

    from torch import nn

    import graphprof

    mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    prepared = graphprof.prepare(mlp, input_shape=(4, 64))
    measured = prepared.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)
    # held quiet: a noisy run (two forwards on a busy test machine) teaches nothing (tests/test_calibration_busy.py)
    quiet = replace(measured, forward=replace(measured.forward, std=0.0))
    return replace(prepared.profile(), measurement=quiet)


@pytest.mark.slow
def test_two_runs_learning_at_once_keep_both_runs_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run computes its samples from the file as read before (slowed here, as a long measurement is):
    without the lock and the re-read the second writer replaced the first's records."""
    import threading
    import time

    from test_opmodel import _write_local

    import graphprof.calibrate.learn as learn
    from graphprof.devices.hardware import get_hardware

    path = _write_local(tmp_path, monkeypatch)
    profile = _measured_mlp()
    slow = learn.samples_from_run

    def slowly(*args, **kwargs):
        time.sleep(0.3)
        return slow(*args, **kwargs)

    monkeypatch.setattr(learn, "samples_from_run", slowly)
    counts: list[int] = []
    local = get_hardware("local")
    threads = [threading.Thread(target=lambda: counts.append(learn.learn_from_run(profile, local))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(counts) == 3 and counts[0] > 0
    assert len(json.loads(path.read_text())["learned"]) == sum(counts)


@pytest.mark.parametrize("seconds", [-1.0, 0.0, 1e30, 1e400])
def test_damaged_learned_seconds_are_left_out_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Records placed at the very configurations the prediction looks up (so a damaged one would move it)."""
    from test_opmodel import _write_local

    import graphprof
    from graphprof.cost.roofline import classify
    from graphprof.devices.hardware import get_hardware
    from graphprof.devices.opmodel import call_of

    path = _write_local(tmp_path, monkeypatch)
    profile = graphprof.profile_model("resnet18", input_shape=(1, 3, 32, 32))
    clean = classify(profile, get_hardware("local")).predicted_seconds
    calls = [c for c in (call_of(op) for row in profile.layers for op in row.ops) if c is not None]
    data = json.loads(path.read_text())
    data["learned"] = [[kind, list(features), seconds, "run", "user"] for kind, features, _ in calls[:50]]
    path.write_text(json.dumps(data).replace("Infinity", "1e400"))
    refused = len(data["learned"])
    roofline = classify(profile, get_hardware("local"))
    assert roofline.predicted_seconds == pytest.approx(clean)  # the damaged records changed nothing
    assert any(f"{refused} learned record(s)" in n and "damaged" in n for n in roofline.notes), roofline.notes
    result = invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local", "--output", str(tmp_path / "o.json"))
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "o.json").read_text())
    assert "nan" not in json.dumps(out).lower()


def test_a_run_never_writes_damaged_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_opmodel import _write_local

    import graphprof.calibrate.learn as learn
    from graphprof.devices.hardware import get_hardware
    from graphprof.devices.opmodel import Sample

    path = _write_local(tmp_path, monkeypatch)
    bad = [Sample("linear", (1.0, 2.0), s, "run", "x") for s in (-1.0, 0.0, float("inf"), float("nan"), 1e30)]
    monkeypatch.setattr(learn, "samples_from_run", lambda *a, **k: [*bad, Sample("linear", (1.0, 2.0), 1e-4, "run", "x")])
    profile = type("P", (), {"measurement": object(), "mode": learn.Mode.EVAL, "model_name": "m"})()
    assert learn.learn_from_run(profile, get_hardware("local")) == 1
    assert [row[2] for row in json.loads(path.read_text())["learned"]] == [1e-4]
