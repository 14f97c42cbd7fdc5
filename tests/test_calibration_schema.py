"""A damaged ``local.json`` is one line and exit 2 whatever field is damaged (type, range, infinity, NaN),
checked against the calibration's JSON schema when read; a calibration that has learned from a run still
fits its own schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from graphprof_cli.main import app

pytest.importorskip("jsonschema")
runner = CliRunner()


def _kind(data: dict[str, Any]) -> dict[str, Any]:
    """The first fitted op kind's record."""
    kinds = data["calibration"]["op_model"]["kinds"]
    return dict(kinds[next(iter(kinds))])


def _set_kind(data: dict[str, Any], field: str, value: Any) -> None:
    kinds = data["calibration"]["op_model"]["kinds"]
    kinds[next(iter(kinds))][field] = value


DAMAGE: dict[str, Callable[[dict[str, Any]], None]] = {
    "peak out of range": lambda d: d["hardware"]["peak_tflops"].__setitem__("float32", 1e308),
    "bandwidth out of range": lambda d: d["hardware"].__setitem__("bandwidth_gbs", 1e308),
    "negative launch": lambda d: d["calibration"].__setitem__("launch_s", -1.0),
    "a rate's latency of 1e308": lambda d: next(iter(d["calibration"]["rates"]["float32"].values())).__setitem__("latency_s", 1e308),
    "a string among the coefficients": lambda d: _set_kind(d, "coef", ["x"] * len(_kind(d)["coef"])),
    "an intercept of 1e308": lambda d: _set_kind(d, "intercept", 1e308),
    "a scale of 1e308": lambda d: _set_kind(d, "scale", [1e308] * len(_kind(d)["scale"])),
    "an infinity": lambda d: _set_kind(d, "smear", float("inf")),
    "a peak that is a string": lambda d: d["hardware"]["peak_tflops"].__setitem__("float32", "fast"),
}


@pytest.fixture
def local_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current ``local.json`` with fitted op kinds (:func:`test_opmodel._write_local`)."""
    from test_opmodel import _write_local

    return _write_local(tmp_path, monkeypatch)


def test_a_fresh_calibration_fits_its_schema(local_file: Path) -> None:
    from graphprof.schemas import validate

    validate(json.loads(local_file.read_text()))


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_field_is_one_line_exit_2(local_file: Path, case: str) -> None:
    data = json.loads(local_file.read_text())
    DAMAGE[case](data)
    local_file.write_text(json.dumps(data).replace("Infinity", "1e400"))  # 1e400 reads back as an infinity
    result = runner.invoke(app, ["--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0] and "graphprof calibrate" in lines[0], lines
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.slow  # a real measurement of a small MLP, about 3 s
def test_a_calibration_that_has_learned_fits_its_own_schema(local_file: Path) -> None:
    from test_local_calibration_file import _measured_mlp

    from graphprof.calibrate.learn import learn_from_run
    from graphprof.devices.hardware import get_hardware
    from graphprof.schemas import validate

    assert learn_from_run(_measured_mlp(), get_hardware("local")) > 0
    data = json.loads(local_file.read_text())
    assert data["learned"]
    validate(data)
    get_hardware("local")  # and it reads back


def test_learned_records_fit_the_schema_and_damaged_seconds_are_left_to_the_reader(local_file: Path) -> None:
    """``learned``: described by the schema; a record's damaged seconds are left out with a note when read
    (:func:`graphprof.devices.local.usable_learned`), never the whole file refused."""
    from graphprof.devices.local import read_local
    from graphprof.schemas import validate

    data = json.loads(local_file.read_text())
    data["learned"] = [["linear", [1.0, 2.0], 1e-5, "run", "user"], ["linear", [1.0, 2.0], 1e30, "run", "user"]]
    validate(data)
    local_file.write_text(json.dumps(data))
    read = read_local(local_file)
    assert read is not None and len(read["learned"]) == 1 and read["learned_refused"] == 1
