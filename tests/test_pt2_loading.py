"""A ``.pt2`` whose loading would unpickle code is refused (API and CLI) unless the user opts in; a zip bomb is refused before reading.

Every planted payload leaves a marker file when it runs; each case checks that none was created, and an
opt-in case shows the payload really runs without the guard, so the tests can fail.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import pytest
import torch
from planted import Payload
from typer.testing import CliRunner

import graphprof
from graphprof.errors import InvalidInputError, UnsafeLoadError
from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


def _legacy(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=False)
    return buffer.getvalue()


# ---- 1. a .pt2 whose loading would unpickle code ----------------------------------------------------
@pytest.fixture(scope="module")
def tiny_pt2(tmp_path_factory) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    path = tmp_path_factory.mktemp("pt2") / "tiny.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(2, 4),)), path)
    return path


def _rewrite(src: Path, dst: Path, member: str, data: bytes) -> None:
    """``src`` with ``<archive>/member`` replaced by (or added as) ``data``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        prefix = zin.namelist()[0].split("/")[0]
        for name in zin.namelist():
            if name != f"{prefix}/{member}":
                zout.writestr(name, zin.read(name))
        zout.writestr(f"{prefix}/{member}", data)


PT2_VARIANTS = {
    "legacy sample inputs": ("data/sample_inputs/model.pt", lambda m: _legacy(((Payload(m),), {}))),
    "raw pickle sample inputs": ("data/sample_inputs/model.pt", lambda m: pickle.dumps(Payload(m))),
    "legacy weights": ("data/weights/model.pt", lambda m: _legacy({"w": Payload(m)})),
    "legacy constants": ("data/constants/model.pt", lambda m: _legacy({"c": Payload(m)})),
}


@pytest.fixture(params=sorted(PT2_VARIANTS))
def evil_pt2(request, tiny_pt2, tmp_path) -> tuple[Path, Path]:
    member, make = PT2_VARIANTS[request.param]
    marker = tmp_path / "MARKER"
    path = tmp_path / "evil.pt2"
    _rewrite(tiny_pt2, path, member, make(marker))
    return path, marker


def test_pt2_payloads_are_refused_by_the_api(evil_pt2) -> None:
    path, marker = evil_pt2
    with pytest.raises(UnsafeLoadError, match="would unpickle code"):
        graphprof.profile_model(str(path))
    assert not marker.exists()


def test_pt2_payloads_are_refused_by_the_cli(evil_pt2) -> None:
    path, marker = evil_pt2
    result = invoke("--model", str(path))
    assert result.exit_code == 9, result.output
    assert not marker.exists()
    assert "Traceback" not in result.output


def test_pt2_opt_in_runs_the_payload_and_ends_in_one_line(evil_pt2) -> None:
    """The opt-in really does load the payload (so the tests above can fail), and ends without a traceback."""
    path, marker = evil_pt2
    result = invoke("--model", str(path), "--allow-unsafe-load")
    assert marker.exists()
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def test_genuine_pt2_still_loads(tiny_pt2) -> None:
    assert graphprof.profile_model(str(tiny_pt2)).total_macs == 2 * 4 * 3


def test_pt2_zip_bomb_is_refused_before_reading(tiny_pt2, tmp_path) -> None:
    bomb = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(tiny_pt2) as zin, zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        zout.writestr(zin.namelist()[0].split("/")[0] + "/extra/blob", bytes(8 << 20))  # 8 MiB -> ~8 KiB
    for opt_in in (False, True):
        with pytest.raises(InvalidInputError, match="zip bomb"):
            graphprof.profile_model(str(bomb), allow_unsafe_load=opt_in)
