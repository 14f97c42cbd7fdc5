"""Hostile and careless input, round three, second half (issue 34): ``--redact``, torch's allow-list after
a YOLO load, trace files refused by size and kind, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
import torch
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
    from graphprof.render.redact import redact_text

    site = next(p for p in sys.path if p.endswith("site-packages"))
    assert redact_text(f"{site}/ultralytics/nn/tasks.py") == "<site-packages>/ultralytics/nn/tasks.py"
    assert redact_text(f"{os.environ['HOME']}x/file") == f"{os.environ['HOME']}x/file"  # not this home
    assert redact_text(f"{os.environ['HOME']}/notes", html=True) == "&lt;home&gt;/notes"


def test_redact_on_every_command_that_writes(at_home) -> None:
    for command in ("compare", "sweep", "validate", "partition", "graph-estimate"):
        result = invoke(command, "--help")
        assert "--redact" in result.output, command


# ---- torch's weights_only allow-list after a YOLO checkpoint (item 13) -----------------------------------
_ALLOW_LIST_PROBE = """
import sys, torch
allowed = torch.serialization.get_safe_globals
fresh = list(allowed())
import torchvision, torch._dynamo  # torch's own import-time registrations (DTensor, DeviceMesh, _DimRange)
import graphprof
from graphprof.models.yolo import load_checkpoint
imported = [g for g in allowed() if g not in fresh]
load_checkpoint(sys.argv[1], input_shape=None, batch_size=None, device=torch.device("cpu"))
loaded = [g for g in allowed() if g not in fresh and g not in imported]
graphprof.profile_model(sys.argv[1])
profiled = [g for g in allowed() if g not in fresh and g not in imported]
print(sorted({getattr(g, "__module__", "?").split(".")[0] for g in imported}), len(loaded), len(profiled))
"""


@pytest.mark.slow  # builds yolov8n and profiles it in a fresh process, about 15 s
def test_a_yolo_checkpoint_leaves_torchs_allow_list_as_found(tmp_path: Path) -> None:
    """The 73 -> 83 of the report: torchvision's first import loads torch.distributed.tensor and
    torch._dynamo, which register their own classes (DTensor, DeviceMesh...) for the process's life, as
    torch does for every user; the checkpoint's load and the profile add nothing of their own."""
    import subprocess

    from graphprof.models import resolve_model

    model = resolve_model("yolov8n").model.half()
    path = tmp_path / "tiny_yolo.pt"
    torch.save({"model": model, "train_args": {"imgsz": 64}}, path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "YOLO_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _ALLOW_LIST_PROBE, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "['torch'] 0 0"


# ---- graphprof trace: the file's kind and size checked before a byte is read (item 11) ----------------------
@pytest.mark.parametrize("size", [150 * 10**6, 2 * 2**30])
def test_trace_refuses_a_file_above_the_cap_before_reading_it(tmp_path: Path, size: int) -> None:
    path = tmp_path / "big_forward_001.json"
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no disk used, and reading it would be a parse of NULs or empty lists
    result = invoke("trace", str(path))
    assert result.exit_code == 2, result.output
    assert re.search(r" is [\d.]+ [MG]iB, above the 128.0 MiB ", result.output)
    assert len(result.output.strip().splitlines()) == 1


def test_trace_refuses_dev_zero_and_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # opening it would block for ever
    for path in ("/dev/zero", str(fifo)):
        result = invoke("trace", path)
        assert result.exit_code == 2, result.output
        assert "not a regular file" in result.output


def test_require_file_allows_a_small_trace(tmp_path: Path) -> None:
    from graphprof.base.limits import require_file

    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}')
    assert require_file(path, "a Chrome trace", cap=100) == 19


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
    import torch

    from graphprof.devices.host import cpu_model

    device = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__}  # current
    shipped = LocalPreset(get_hardware("h100"), load_calibration("h100"), device)
    path = write_preset(shipped.to_dict())
    assert invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local").exit_code == 0
    path.write_text(_damage(path.read_text(), case))
    result = invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "local calibration" in lines[0] and "graphprof calibrate" in lines[0], lines


# ---- graph-estimate and graph sweeps: bad input refused, not ignored --------------------------------------
@pytest.mark.parametrize("ratio", ["nan", "inf", "-1", "0"])
def test_graph_estimate_refuses_a_sparse_ratio_outside_0_1(ratio: str) -> None:
    result = invoke("graph-estimate", "--model", "pyg:gin", "--sparse-ratio", ratio)
    assert result.exit_code == 2, result.output
    assert "sparse_ratio" in result.output and len(result.output.strip().splitlines()) == 1


def test_graph_estimate_refuses_a_model_that_is_not_a_graph_model() -> None:
    result = invoke("graph-estimate", "--model", "resnet18")
    assert result.exit_code == 2, result.output
    assert "not 'resnet18'" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("extra", "named"), [(("--batch", "1,2"), "--batch"), (("--mode", "train"), "--mode"),
                                              (("--measure", "--device", "bogus"), "--device")])  # fmt: skip
def test_a_graph_sweep_refuses_the_options_it_would_ignore(extra: tuple[str, ...], named: str) -> None:
    result = invoke("sweep", "--model", "pyg:gin", "--nodes", "100,200", *extra)
    assert result.exit_code == 2, result.output
    assert f"does not take {named}" in result.output


# ---- the seed-004 API: sizes, ratios and types checked, InvalidInputError -----------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.set_seed("abc"),
        lambda s: s.set_seed(1.5),
        lambda s: s.MemoryProfiler(torch.nn.Linear(2, 2), device="bogus"),
        lambda s: s.RuntimeProfiler(torch.nn.Linear(2, 2), device="bogus"),
        lambda s: s.RuntimeProfiler(torch.nn.Linear(2, 2), num_runs=-1),
        lambda s: s.estimate_attention_memory(-1000, 8, 256),
        lambda s: s.estimate_attention_memory(1000, 8, "256"),
        lambda s: s.estimate_pe_storage(1000, 32, 16, float("nan")),
        lambda s: s.estimate_pe_storage(-1000, 32, 16, 0.1),
        lambda s: s.profile_memory_usage(lambda: None, device="bogus"),
    ],
)
def test_the_seed004_api_refuses_bad_sizes_ratios_and_types(call) -> None:
    from graphprof.compat import seed004_profiling
    from graphprof.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        call(seed004_profiling)


def test_the_seed004_estimator_refuses_negative_sizes_rather_than_negative_flops() -> None:
    from graphprof.errors import InvalidInputError
    from graphprof.gnn.estimate import FLOPsEstimator

    with pytest.raises(InvalidInputError, match="num_nodes"):
        FLOPsEstimator(torch.nn.Linear(2, 2)).estimate(-100, 10)


# ---- cli/profile_model.py (seed 004's script): one line, graphprof's exit code --------------------------------
@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["--avg_degree", "nan"], 2, "average degree"),
        (["--device", "bogus"], 2, "unknown device 'bogus'"),
        (["--device", "cuda"], 2, "no CUDA GPU"),
        (["--output", "nope/x.json"], 7, "does not exist"),  # an output error, as the main command's
    ],
)
def test_the_seed_script_says_one_line(tmp_path: Path, monkeypatch, capsys, args: list[str], code: int, said: str) -> None:
    from graphprof_cli.seed_profile import main

    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.chdir(tmp_path)
    assert main(["--profile", "flops", "--num_nodes", "50", *args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
