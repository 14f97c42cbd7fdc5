"""A damaged ``local.json``: one line naming the field, exit 2.
"""

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
    from graphprof.calibrate.local import LocalPreset
    from graphprof.calibrate.store import write_preset
    from graphprof.devices.hardware import get_hardware
    from graphprof.devices.predict import load_calibration

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    from graphprof.devices.local import cpu_model

    device = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__}  # current
    shipped = LocalPreset(get_hardware("h100"), load_calibration("h100"), device)
    path = write_preset(shipped.to_dict())
    assert invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local").exit_code == 0
    path.write_text(_damage(path.read_text(), case))
    result = invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "local calibration" in lines[0] and "graphprof calibrate" in lines[0], lines
