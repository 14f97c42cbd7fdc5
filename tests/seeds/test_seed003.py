"""Seed 003 (chisel's ``@capture_model``), as its user types it: the traces the decorator writes, the
``chisel python my_model_script.py`` launcher, ``export CHISEL_DEBUG=1``, and the native decorator's word
when it meets the seed's switch."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch import nn

ROOT = Path(__file__).resolve().parents[2]

#: The seed's "Simple Model Profiling" block, as ``my_model_script.py``.
SCRIPT = """import torch
import torch.nn as nn
from chisel import capture_model

@capture_model(model_name="MyModel", record_shapes=True, profile_memory=True)
class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(100, 50)
        self.linear2 = nn.Linear(50, 10)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.linear1(x))
        x = self.linear2(x)
        return x

# Create and use the model
model = MyModel()
data = torch.randn(32, 100)
output = model(data)  # This forward pass will be automatically profiled
"""


# ---- the traces --------------------------------------------------------------------------------------
class _ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.fc = nn.Linear(8, 2)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.fc(self.blocks(self.bn(self.conv(x)).mean((2, 3))))


def _events(path: Path) -> list[dict[str, object]]:
    import json

    return list(json.loads(path.read_text())["traceEvents"])


def test_train_mode_batchnorm_shows_its_input_shape(tmp_path: Path) -> None:
    """In train mode BatchNorm first bumps its scalar step counter (``aten::add_`` on ``[]``): the shape
    shown is its input's, never the scalar's (before: ``Shapes -``)."""
    import torch

    from graphprof.compat.seed003 import capture_model
    from graphprof.render.tracesummary import render_trace_summary

    model = capture_model("ConvBN", enabled=True, trace_dir=tmp_path, summary=False)(type("ConvBN", (_ConvBN,), {}))().train()
    model(torch.randn(2, 3, 8, 8))
    analysis = graphprof_parse(tmp_path / "ConvBN_forward_001.json")
    assert analysis["layer_stats"]["bn"]["input_shape"] == (2, 8, 6, 6)
    assert "aten::add_" in analysis["layer_stats"]["bn"]["operations"]
    assert any(line.startswith("bn ") and line.endswith("(2, 8, 6, 6)") for line in render_trace_summary(analysis).splitlines())


def graphprof_parse(path: Path) -> dict[str, object]:
    from graphprof.measure.trace import parse_model_trace

    analysis = parse_model_trace(path, "m")
    assert analysis is not None
    return analysis


def test_the_seeds_decorator_records_python_stacks_and_layers_by_path(tmp_path: Path) -> None:
    import torch

    from graphprof.compat.seed003 import capture_model

    model = capture_model("ConvBN", enabled=True, trace_dir=tmp_path, summary=False)(type("ConvBN", (_ConvBN,), {}))()
    model(torch.randn(2, 3, 8, 8))
    events = _events(tmp_path / "ConvBN_forward_001.json")
    assert any(e.get("cat") == "python_function" for e in events)  # before: no stacks
    stats = graphprof_parse(tmp_path / "ConvBN_forward_001.json")["layer_stats"]
    assert {"conv", "bn", "blocks.0", "fc"} <= set(stats) and "Conv2d_0" not in stats  # graphprof's ranges win
    assert stats["fc"]["call_count"] == 1  # not counted twice through the frames


def test_a_foreign_trace_with_stacks_is_read_by_its_module_frames(tmp_path: Path) -> None:
    """A plain ``torch.profiler`` trace recorded ``with_stack=True`` (not written by graphprof): layers come
    from its module frames; before, every op went under "(outside layers)"."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    model, x = _ConvBN().eval(), torch.randn(2, 3, 8, 8)
    model(x)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        model(x)
    prof.export_chrome_trace(str(tmp_path / "foreign.json"))
    stats = graphprof_parse(tmp_path / "foreign.json")["layer_stats"]
    assert {"_ConvBN_0", "Conv2d_0", "BatchNorm2d_0", "Sequential_0", "Linear_0", "ReLU_0", "Linear_1"} <= set(stats)
    assert "(outside layers)" not in stats or not stats["(outside layers)"]["operations"] & {"aten::conv2d", "aten::linear"}
    assert stats["Conv2d_0"]["input_shape"] == (2, 3, 8, 8) and "aten::conv2d" in stats["Conv2d_0"]["operations"]
    assert stats["Linear_1"]["call_count"] == 1 and stats["Linear_1"]["input_shape"] == (2, 8)


def test_cli_trace_files_carry_memory_events(tmp_path: Path) -> None:
    import torch

    import graphprof

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    graphprof.prepare(model, example_inputs=(torch.randn(8, 16),)).measure(
        device="cpu", trace_dir=tmp_path, iters=2, warmup=1, layer_runs=1
    )
    (trace,) = sorted(tmp_path.glob("*.json"))
    assert any(e.get("name") == "[memory]" for e in _events(trace))  # allocator events: profile_memory=True


def test_a_decorated_model_under_the_users_own_profiler_leaves_that_profiler_alone(tmp_path: Path) -> None:
    """Before, the decorator started a second profiler inside the user's, which stopped theirs: its
    trace was empty and its export crashed the process."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from graphprof.measure.trace import TraceWarning, capture_model

    model = capture_model("Mine", enabled=True, trace_dir=tmp_path)(type("Mine", (_ConvBN,), {}))().eval()
    with warnings.catch_warnings(record=True) as caught, profile(activities=[ProfilerActivity.CPU]) as prof:
        warnings.simplefilter("always")
        model(torch.randn(2, 3, 8, 8))
    assert any(e.key == "aten::conv2d" for e in prof.key_averages())
    assert [w for w in caught if issubclass(w.category, TraceWarning) and "another torch.profiler" in str(w.message)]
    assert not list(tmp_path.glob("*.json"))


# ---- the launcher: chisel python my_model_script.py ------------------------------------------------------
@pytest.fixture
def launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The seed's script in an empty folder, the working folder; what the launcher sets is put back after."""
    (tmp_path / "my_model_script.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHISEL_BACKEND_RUN", "0")  # the launcher switches it on; restored afterwards
    monkeypatch.delenv("GRAPHPROF_TRACE_DIR", raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert "chisel" not in sys.modules
    yield tmp_path
    sys.modules.pop("chisel", None)  # the launcher's alias for the script's `from chisel import ...`


def test_chisel_runs_the_script_with_profiling_on(
    launcher: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``chisel python my_model_script.py``: the forward is profiled into ``MyModel_forward_001.json`` and its
    layer summary printed; without ``CHISEL_DEBUG`` the launcher itself says nothing."""
    from graphprof_cli.chisel import main

    monkeypatch.delenv("CHISEL_DEBUG", raising=False)
    main(["python", "my_model_script.py"])
    assert [p.name for p in launcher.glob("*.json")] == ["MyModel_forward_001.json"]
    err = capsys.readouterr().err
    assert "Layer analysis for MyModel" in err and "linear1" in err and "TOTAL" in err
    assert "chisel:" not in err


def test_chisel_debug_says_what_happens(launcher: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``export CHISEL_DEBUG=1``: the switch seen, each trace written with the layers read from it, the files."""
    from graphprof_cli.chisel import main

    monkeypatch.setenv("CHISEL_DEBUG", "1")
    main(["python", "my_model_script.py"])
    debug = [line for line in capsys.readouterr().err.splitlines() if line.startswith("chisel: ")]
    assert debug[0].startswith("chisel: running my_model_script.py with profiling on (CHISEL_BACKEND_RUN=1)")
    assert "@capture_model on 'MyModel' as 'MyModel': profiling on (CHISEL_BACKEND_RUN=1)" in debug[1]
    assert "wrote MyModel_forward_001.json: 4 layers ((model), linear1, relu, linear2)" in debug[2]
    assert debug[-1] == "chisel: 1 trace file(s) written: MyModel_forward_001.json"


def test_chisel_mistakes_are_one_line_and_exit_2(launcher: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from graphprof_cli.chisel import main

    for argv in ([], ["python"], ["python", "nothere.py"], ["python", "-c", "print(1)"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, argv


def test_the_launcher_is_the_packages_console_script_chisel() -> None:
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["chisel"] == "graphprof_cli.chisel:main"


@pytest.mark.slow  # a subprocess running the seed's script: about 5 s
def test_chisel_as_a_command(tmp_path: Path) -> None:
    """The console script's own entry point, ``python -m graphprof_cli.chisel python my_model_script.py``."""
    (tmp_path / "my_model_script.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "cli")]), "CHISEL_DEBUG": "1"}
    env.pop("CHISEL_BACKEND_RUN", None)
    argv = [sys.executable, "-m", "graphprof_cli.chisel", "python", "my_model_script.py"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "MyModel_forward_001.json").is_file() and "chisel: 1 trace file(s) written" in done.stderr
    plain = subprocess.run([sys.executable, "my_model_script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode != 0 and "No module named 'chisel'" in plain.stderr  # outside the launcher: no chisel


# ---- the native decorator under the seed's switch -----------------------------------------------------------
def test_the_native_decorator_names_the_seeds_one_under_its_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CHISEL_BACKEND_RUN=1`` with ``graphprof.capture_model`` (which reads ``GRAPHPROF_CAPTURE``): one
    warning naming :mod:`graphprof.compat.seed003`, rather than silence."""
    import graphprof
    from graphprof.measure.trace import TraceWarning

    monkeypatch.setenv("CHISEL_BACKEND_RUN", "1")
    monkeypatch.delenv("GRAPHPROF_CAPTURE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphprof.capture_model(model_name="M")(type("M", (nn.Linear,), {}))
    (warning,) = [w for w in caught if issubclass(w.category, TraceWarning)]
    assert "from graphprof.compat.seed003 import capture_model" in str(warning.message)
    monkeypatch.setenv("CHISEL_BACKEND_RUN", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graphprof.capture_model(model_name="M")(type("M", (nn.Linear,), {}))
