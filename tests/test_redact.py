"""``--redact``: the host left out of every JSON and HTML a command writes."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


# ---- --redact: the host left out of a shared report ---------------------------------------------------
@pytest.fixture
def at_home(tmp_path, monkeypatch) -> Path:
    """A home folder and a project in it, the project the working folder, a model file there."""
    home = tmp_path / "ada"
    project = home / "proj"
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    monkeypatch.setattr(socket, "gethostname", lambda: "hostile-box-7")
    (project / "m.py").write_text("import torch\ndef build():\n    return torch.nn.Sequential(torch.nn.Linear(4, 3))\n")
    return project


def _leaks(text: str) -> list[str]:
    found = [p for p in (os.environ["HOME"], os.getcwd(), sys.prefix, sys.base_prefix) if p in text]
    return found + re.findall(r"(?<![\w-])hostile-box-7(?![\w-])", text)


def test_redact_leaves_home_cwd_host_and_prefix_out_of_json_and_html(at_home) -> None:
    model = f"{at_home}/m.py:build"
    plain = invoke("--model", model, "--input-shape", "2,4", "--output", "plain.json")
    assert plain.exit_code == 0, plain.output
    assert _leaks((at_home / "plain.json").read_text())  # the model's path: the test can fail
    result = invoke("--model", model, "--input-shape", "2,4", "--output", "r.json", "--html", "r.html", "--redact")
    assert result.exit_code == 0, result.output
    text = (at_home / "r.json").read_text()
    assert _leaks(text) == []
    assert "<cwd>/m.py:build" in text
    from graphprof.schemas import validate

    validate(json.loads(text))
    host = json.loads(text)["host"]
    assert "cpu" not in host and "platform" not in host and host["cores"]
    assert _leaks((at_home / "r.html").read_text()) == []


def test_redact_text_replaces_install_paths_and_whole_names_only(at_home) -> None:
    from graphprof.base.redact import redact_text

    site = next(p for p in sys.path if p.endswith("site-packages"))
    assert redact_text(f"{site}/ultralytics/nn/tasks.py") == "<site-packages>/ultralytics/nn/tasks.py"
    assert redact_text(f"{os.environ['HOME']}x/file") == f"{os.environ['HOME']}x/file"  # not this home
    assert redact_text(f"{os.environ['HOME']}/notes", html=True) == "&lt;home&gt;/notes"


def test_redact_on_every_command_that_writes(at_home) -> None:
    for command in ("compare", "sweep", "validate", "partition", "graph-estimate"):
        result = invoke(command, "--help")
        assert "--redact" in result.output, command


def _sanitized(text: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in text)


@pytest.mark.slow
def test_redact_leaves_the_host_out_of_traces_their_names_and_the_graph(at_home) -> None:
    """The Chrome traces' ``host_name`` and absolute ``traceName``, trace files named after an absolute model
    path, the ``.dot``'s first line (``digraph "<home>/...:build"``)."""
    model = f"{at_home}/m.py:build"
    args = ("--model", model, "--input-shape", "2,4", "--measure", "--device", "cpu", "--iters", "2", "--trace", "tr")
    result = invoke(*args, "--graph", "g.dot", "--output", "r.json", "--redact")
    assert result.exit_code == 0, result.output
    traces = sorted((at_home / "tr").iterdir())
    assert traces
    for trace in traces:
        text = trace.read_text()
        assert _leaks(text) == [] and '"host_name"' not in text, trace.name
        assert _sanitized(os.environ["HOME"]) not in trace.name and _sanitized(os.getcwd()) not in trace.name
        assert json.loads(text)["traceName"] == trace.name
    assert [Path(p).name for p in json.loads((at_home / "r.json").read_text())["runtime"]["traces"]] == [t.name for t in traces]
    dot = (at_home / "g.dot").read_text()
    assert _leaks(dot) == [] and dot.startswith('digraph "<cwd>/m.py:build"'), dot.splitlines()[0]
    plain = invoke(*args, "--graph", "plain.dot")
    assert plain.exit_code == 0 and _leaks((at_home / "plain.dot").read_text())  # the test can fail
