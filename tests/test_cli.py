"""The CLI through typer's CliRunner, and the seeds' script paths."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphprof_cli.main import app, join_input_shape

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, join_input_shape(list(args)))


def test_profile_resnet18():
    result = invoke("--model", "resnet18")
    assert result.exit_code == 0, result.output
    assert "fx.symbolic_trace" in result.output
    assert "layer1.0.conv1" in result.output
    assert "11.69M" in result.output


def test_showshape_adds_output_shapes():
    result = invoke("--model", "resnet18", "--showshape", "--input-shape", "1", "3", "128", "128")
    assert result.exit_code == 0, result.output
    assert "1x64x64x64" in result.output


@pytest.mark.parametrize("argv", [["--input-shape", "1", "3", "96", "96"], ["--input-shape", "1,3,96,96"]])
def test_input_shape_both_spellings(argv, tmp_path):
    out = tmp_path / "p.json"
    result = invoke("--model", "resnet18", *argv, "--output", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["input_shapes"] == [[1, 3, 96, 96]]
    assert data["inputs"] == [{"name": "args[0]", "shape": [1, 3, 96, 96], "dtype": "float32"}]


def test_join_input_shape():
    assert join_input_shape(["--input-shape", "1", "3", "8", "8", "--showshape"]) == ["--input-shape", "1,3,8,8", "--showshape"]
    assert join_input_shape(["--input-shape", "1,3,8,8"]) == ["--input-shape", "1,3,8,8"]


def test_unknown_model_is_one_line_error():
    result = invoke("--model", "resnet19")
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    assert "resnet18" in result.output  # the suggestion


def test_bad_input_shape_is_one_line_error():
    result = invoke("--model", "resnet18", "--input-shape", "1,3,0,224")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_missing_pt_file_is_clear_error():
    result = invoke("--model", "no_such_model.pt")
    assert result.exit_code == 3
    assert "download" in result.output.lower()


def test_unknown_output_suffix_is_error_and_writes_nothing(tmp_path):
    out = tmp_path / "p.txt"
    result = invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--output", str(out))
    assert result.exit_code == 7
    assert not out.exists()


def test_list_and_filter():
    result = invoke("--list", "--filter", "resnet")
    assert result.exit_code == 0, result.output
    assert "resnet50" in result.output and "vit_b_16" not in result.output


@pytest.mark.parametrize(
    "script,args,expect",
    [
        ("cli/profile_graph_v2.py", ["--model", "resnet18", "--input-shape", "1", "3", "64", "64"], "fx.symbolic_trace"),
        # the default view folds the module tree; --verbose (seed 002's per-layer flag) lists every layer
        ("cli/profile_graph.py", ["--model", "resnet18", "--input-shape", "1,3,64,64", "--verbose"], "layer4.1.conv2"),
        ("cli/discover_models.py", ["--filter", "mobilenet"], "mobilenet_v2"),
    ],
)
@pytest.mark.slow  # subprocesses running the seed scripts, about 25 s
def test_seed_script_paths(script, args, expect):
    env = {**os.environ, "COLUMNS": "200"}  # a width that shows every name whole (narrower ones fold names over lines)
    proc = subprocess.run([sys.executable, script, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["sweep", "-h"]])
@pytest.mark.slow  # a subprocess each
def test_help_and_version_do_not_import_torch(argv):
    code = (
        "import sys\n"
        "from graphprof_cli.main import main\n"
        f"sys.argv = ['graphprof', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


@pytest.mark.parametrize("command", [[], ["compare"], ["sweep"], ["validate"], ["hardware"], ["list"]])
def test_boolean_flags_are_shown_as_flags(command):
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--help" in result.output
    assert "<bool>" not in result.output
