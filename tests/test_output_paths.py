"""Output paths: /dev/stdout appends, two options naming one file are refused, graph writes are atomic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn
from typer.testing import CliRunner

import graphprof

# ---- outputs (point 6) -------------------------------------------------------------------------------


@pytest.mark.slow
def test_output_to_dev_stdout_appends_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("earlier line\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(
        f"{sys.executable} -m graphprof_cli.main --model alexnet --output /dev/stdout >> {log}",
        shell=True,
        check=True,
        env=env,
        capture_output=True,
    )
    text = log.read_text()
    assert text.startswith("earlier line\n") and '"model": "alexnet"' in text


def test_output_and_graph_on_one_path_is_refused(tmp_path: Path) -> None:
    from graphprof_cli.main import app

    target = tmp_path / "x.json"
    result = CliRunner().invoke(app, ["--model", "alexnet", "--output", str(target), "--graph", str(target)])
    assert result.exit_code == 2 and "two different names" in result.stderr and not target.exists()  # refused up front (issue 34, item 8)


def test_graph_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof.graph import export

    pm = graphprof.prepare(nn.Linear(4, 2), input_shape=(1, 4))
    graph, detail = pm.graph()
    target = tmp_path / "g.json"
    export.write_graph(graph, target, detail=detail)
    before = target.read_text()
    monkeypatch.setattr(export, "to_json", lambda *a, **k: 1 / 0)  # the writer fails half way
    with pytest.raises(ZeroDivisionError):
        export.write_graph(graph, target, detail=detail)
    assert target.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["g.json"]


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "resnet18", "--output", "{d}/out.json/"],
        ["--model", "resnet18", "--html", "{d}/page.html/"],
        ["calibrate", "--quick", "--output", "{d}/newdir/"],
        ["partition", "--model", "resnet18", "--devices", "cpu:2", "--output", "{d}/p.json/"],
        ["validate", "--model", "resnet18", "--output", "{d}/v.json/"],
    ],
)
def test_an_output_ending_in_a_slash_is_refused_before_the_work(tmp_path: Path, args: list[str]) -> None:
    """``Path("out.json/")`` drops the slash: the file ``out.json`` was written after minutes of work."""
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, [a.format(d=tmp_path) for a in args])
    assert result.exit_code == 2 and "slash" in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_the_library_refuses_a_path_ending_in_a_slash(tmp_path: Path) -> None:
    from graphprof.errors import OutputError
    from graphprof.render.sink import write_result

    with pytest.raises(OutputError, match="slash"):
        write_result(graphprof.profile_model("alexnet"), f"{tmp_path}/out.json/")
    assert list(tmp_path.iterdir()) == []
