"""Issue 20, the seeds' own examples: seed 003's decorator and trace reader, seed 002's script and intensity
bands, and the measurement report's honesty (like for like in train mode, threads, load, noise, host).

Each test runs the seed's example or command as its user would and checks what the seed promises.
"""

from __future__ import annotations

import json
import os
import re
import warnings

import pytest
import torch
from torch import nn

import graphprof
from graphprof.compat.seed003 import capture_model
from graphprof.measure.trace import TraceWarning
from graphprof.schemas import SCHEMA_VERSIONS


def _seed_model(**options):
    """Seed 003's ``MyModel``, decorated as its "Simple Model Profiling" example decorates it."""

    @capture_model(model_name="MyModel", record_shapes=True, profile_memory=True, **options)
    class MyModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear1 = nn.Linear(100, 50)
            self.linear2 = nn.Linear(50, 10)
            self.relu = nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.relu(self.linear1(x))
            return self.linear2(x)

    return MyModel


# ---- seed 003: @capture_model ------------------------------------------------------------------------
def test_decorator_is_a_pass_through_unless_switched_on(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRAPHPROF_CAPTURE", raising=False)
    monkeypatch.delenv("GRAPHPROF_TRACE_DIR", raising=False)
    model = _seed_model()()
    data = torch.randn(32, 100)
    out = model(data)  # "When running locally, the decorator acts as a pass-through"
    assert out.shape == (32, 10) and os.listdir(tmp_path) == []
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("GRAPHPROF_CAPTURE", "0")
    model(data)
    assert os.listdir(tmp_path) == []


def test_two_instances_three_forwards_leave_six_files_and_six_summaries(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRAPHPROF_CAPTURE", "1")
    monkeypatch.delenv("GRAPHPROF_TRACE_DIR", raising=False)
    cls = _seed_model()
    data = torch.randn(32, 100)
    for model in (cls(), cls()):
        for _ in range(3):
            model(data)
    assert sorted(os.listdir(tmp_path)) == [f"MyModel_forward_{i:03d}.json" for i in range(1, 7)]
    err = capsys.readouterr().err
    assert err.count("Layer analysis for MyModel") == 6
    header = re.search(r"^Layer +Calls +Total Time \(ms\) +Avg Time \(ms\) +Shapes$", err, re.M)
    assert header is not None
    # the seed's rows: linear1 once on (32, 100), relu and linear2 on (32, 50), then TOTAL
    assert re.search(r"^linear1 +1 +[\d.]+ +[\d.]+ +\(32, 100\)$", err, re.M)
    assert re.search(r"^relu +1 +[\d.]+ +[\d.]+ +\(32, 50\)$", err, re.M)
    assert re.search(r"^linear2 +1 +[\d.]+ +[\d.]+ +\(32, 50\)$", err, re.M)
    assert err.count("\nTOTAL ") == 6


def test_numbering_never_overwrites_an_existing_trace(tmp_path, capsys) -> None:
    (tmp_path / "MyModel_forward_001.json").write_text("from another run")
    (tmp_path / "MyModel_forward_003.json").write_text("from another run")
    model = _seed_model(enabled=True, trace_dir=tmp_path, summary=False)()
    for _ in range(3):
        model(torch.randn(32, 100))
    assert sorted(os.listdir(tmp_path)) == [f"MyModel_forward_{i:03d}.json" for i in (1, 2, 3, 4, 5)]
    assert (tmp_path / "MyModel_forward_001.json").read_text() == "from another run"
    assert (tmp_path / "MyModel_forward_003.json").read_text() == "from another run"
    assert capsys.readouterr().err == ""  # summary=False: the one switch for the printed summary


def test_unusable_folder_warns_once_and_passes_through(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cls = _seed_model(enabled=True, trace_dir=blocker / "traces")
    model = cls()
    data = torch.randn(32, 100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [model(data) for _ in range(2)] + [cls()(data)]
    # the decorated forward gives what the undecorated one gives
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], cls.forward.__wrapped__(model, data))
    messages = [str(w.message) for w in caught if issubclass(w.category, TraceWarning)]
    assert len(messages) == 1 and "cannot write traces" in messages[0] and "\n" not in messages[0]


# ---- seed 003: parse_model_trace -----------------------------------------------------------------------
def test_parse_model_trace_as_the_seed_reads_it(tmp_path) -> None:
    model = _seed_model(enabled=True, trace_dir=tmp_path, summary=False)()
    model(torch.randn(32, 100))
    analysis = graphprof.parse_model_trace(tmp_path / "MyModel_forward_001.json", "MyModel")
    assert analysis is not None and analysis["model_name"] == "MyModel"
    layer_stats = analysis["layer_stats"]
    for stats in layer_stats.values():  # the seed's loop
        assert isinstance(stats["total_time_us"], int) and isinstance(stats["call_count"], int)
        assert isinstance(stats["shapes"], set) and isinstance(stats["operations"], set)
    assert [name for name in layer_stats if name in ("linear1", "relu", "linear2")] == ["linear1", "relu", "linear2"]
    # Linear(100, 50) on a (32, 100) batch: input (32, 100), weight (50, 100), bias (50,)
    assert ((32, 100), (50, 100), (50,)) in layer_stats["linear1"]["shapes"]
    assert "aten::linear" in layer_stats["linear2"]["operations"]
    # self times sum to the forward: the "(model)" range's duration in the file, within 1 us per layer
    events = json.loads((tmp_path / "MyModel_forward_001.json").read_text())["traceEvents"]
    forward_us = next(e["dur"] for e in events if e.get("name") == "graphprof.layer::(model)")
    assert sum(s["total_time_us"] for s in layer_stats.values()) == pytest.approx(forward_us, abs=len(layer_stats))


def _event(**fields):
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1, **fields}


MALFORMED = {
    "not json": "not json",
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "a number": "3",
    "events not a list": json.dumps({"traceEvents": {"a": 1}}),
    "NaN duration": json.dumps({"traceEvents": [_event(dur=float("nan"))]}),
    "infinite duration": '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": Infinity}]}',
    "string duration": json.dumps({"traceEvents": [_event(dur="5")]}),
    "no timestamp": json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "dur": 3}]}),
    "negative duration": json.dumps({"traceEvents": [_event(dur=-1)]}),
    "integer too large": '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": ' + "9" * 400 + "}]}",
    "name not a string": json.dumps({"traceEvents": [_event(name=[1])]}),
    "not UTF-8": b"\xff\xfe\x00",
}


@pytest.mark.parametrize("what", [*MALFORMED, "missing"])
def test_parse_model_trace_gives_none_and_one_warning(tmp_path, what) -> None:
    path = tmp_path / "t.json"
    if what != "missing":
        content = MALFORMED[what]
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert graphprof.parse_model_trace(path, "M") is None
    assert len(caught) == 1 and issubclass(caught[0].category, UserWarning)
    assert str(path) in str(caught[0].message) and "\n" not in str(caught[0].message)


def test_parse_model_trace_tolerates_odd_but_readable_events(tmp_path) -> None:
    events = [
        _event(pid=[1], tid={"a": 1}),  # unhashable thread ids
        _event(name="b", ts=5, args=[1, 2]),  # args not a dict
        _event(name="c", ts=7, args={"Input Dims": [[[[[[[1]]]]]]]}),  # dims nested too deep: dropped
        _event(name="d", ts=9, args={"Input Dims": "abc"}),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    analysis = graphprof.parse_model_trace(path)
    assert analysis is not None and analysis["layer_stats"]["(outside layers)"]["total_time_us"] == 4


# ---- graphprof trace FILE ----------------------------------------------------------------------------
def test_trace_command_prints_the_decorators_summary(tmp_path, capsys) -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    model = _seed_model(enabled=True, trace_dir=tmp_path)()
    model(torch.randn(32, 100))
    printed = capsys.readouterr().err
    path = str(tmp_path / "MyModel_forward_001.json")
    result = CliRunner().invoke(app, ["trace", path])
    assert result.exit_code == 0 and result.stdout == printed
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [_event(dur=float("nan"))]}))
    result = CliRunner().invoke(app, ["trace", str(bad)])
    assert result.exit_code == 2 and "not a readable Chrome trace" in result.output
    assert result.output.count("\n") == 1


# ---- seed 002: cli/profile_graph.py and the intensity bands ------------------------------------------
def test_profile_graph_defaults_to_resnet18() -> None:
    from profile_graph import DEFAULT_MODEL, default_model_args

    assert DEFAULT_MODEL == "resnet18" and default_model_args([]) == ["--model", "resnet18"]
    assert default_model_args(["--verbose"]) == ["--model", "resnet18"]
    for named in (["--model", "vgg11"], ["--model=vgg11"], ["-m", "vgg11"], ["--mode", "train", "-mvgg11"]):
        assert default_model_args(named) == [], named


@pytest.mark.slow
def test_profile_graph_script_with_no_model_profiles_resnet18(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "cli" / "profile_graph.py"
    env = {**os.environ, "COLUMNS": "160"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "GRAPH PROFILE: resnet18" in done.stdout and "Usage" not in done.stdout  # the seed's own report
    for label in ("Strongly compute-bound", "Compute-bound", "Balanced", "Memory-bound"):
        assert label in done.stdout


def test_intensity_bands_as_seed_002_labels_them() -> None:
    from graphprof.cost.roofline import INTENSITY_BANDS, intensity_band

    assert [b.name for b in INTENSITY_BANDS] == ["Strongly compute-bound", "Compute-bound", "Balanced", "Memory-bound"]
    # seed 002's examples: conv1 at AI=57.1 is compute-bound; pooling and batch norm (AI < 10) memory-bound;
    # a large matmul (AI > 100) strongly compute-bound; the edges fall to the band below (10 is memory-bound,
    # as seed 001's fixed threshold has it)
    cases = {156.6: "Strongly compute-bound", 100.0: "Compute-bound", 57.1: "Compute-bound", 50.0: "Balanced"}
    cases |= {30.7: "Balanced", 10.0: "Memory-bound", 0.2: "Memory-bound"}
    for ai, name in cases.items():
        assert intensity_band(ai).name == name, ai
    assert intensity_band(None, flops=5).name == "Strongly compute-bound" and intensity_band(None, flops=0) is None


def test_intensity_band_table_sums_and_agrees_with_the_fixed_threshold() -> None:
    from rich.console import Console

    from graphprof.cost.bounds import Bound
    from graphprof.cost.roofline import classify, intensity_band
    from graphprof.render.bottlenecks import render_intensity_bands

    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 14 * 14, 10))
    profile = graphprof.profile_model(model, input_shape=(1, 3, 16, 16))
    roofline = classify(profile)
    for row, verdict in zip(profile.layers, roofline.layers, strict=True):
        band = intensity_band(row.cost.arithmetic_intensity, flops=row.cost.flops)
        # the band "Memory-bound" is exactly the no-device verdict memory-bound (AI <= 10)
        assert (band is not None and band.name == "Memory-bound") == (verdict.bound is Bound.MEMORY), row.name
    console = Console(width=160, record=True)
    console.print(render_intensity_bands(profile))
    text = console.export_text()
    counts = [int(m.group(1)) for m in re.finditer(r"(?:AI > 100|AI <= 100|AI <= 50|AI <= 10) +(\d+)", text)]
    assert len(counts) == 4 and sum(counts) == sum(1 for r in profile.layers if r.cost.flops or r.cost.bytes_moved)
    assert f"the model as a whole: {profile.arithmetic_intensity:.1f} FLOPs/byte" in text


# ---- measurement honesty -------------------------------------------------------------------------------
RUN = dict(iters=3, warmup=1, layer_runs=1)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.act(self.conv(x)), 1))


def _text(renderable) -> str:
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(renderable)
    return console.export_text()


@pytest.fixture(scope="module")
def train_measured():
    import dataclasses

    pm = graphprof.prepare(_Block(), example_inputs=(torch.randn(4, 3, 8, 8),), mode="train")
    return dataclasses.replace(pm.profile(), measurement=pm.measure(device="cpu", breakdown=False, **RUN))


def test_train_mode_compares_the_forward_estimate_with_the_measured_forward(train_measured) -> None:
    from graphprof.cost.roofline import with_roofline
    from graphprof.render.measured import estimated_layer_seconds, forward_layer_seconds, render_measured

    h100 = graphprof.get_hardware("h100")
    on_h100 = with_roofline(train_measured, h100)
    forward = forward_layer_seconds(on_h100)
    both = estimated_layer_seconds(on_h100)
    # the forward alone, from the same rows' forward costs: below forward + backward on every layer with a backward
    assert forward["conv"] < both["conv"] and forward["fc"] < both["fc"]
    eval_profile = graphprof.profile_model(_Block(), input_shape=(4, 3, 8, 8))
    eval_estimate = estimated_layer_seconds(with_roofline(eval_profile, h100))
    assert forward == pytest.approx(eval_estimate)  # a train profile's forward is the eval profile
    text = _text(render_measured(on_h100))
    title = "Per layer, forward only: estimated forward (h100 roofline) vs measured forward"
    assert title in " ".join(text.split())  # the title wraps at the table's width
    total_us = sum(forward.values()) * 1e6
    total_row = next(line for line in text.splitlines() if "TOTAL" in line)
    assert f"{total_us:,.1f} us" in total_row  # the TOTAL estimate is the forward's


def test_measurement_header_names_threads_and_load_and_flags_noise(train_measured) -> None:
    import dataclasses

    from graphprof.render.measured import render_measured

    m = train_measured.measurement
    assert m.host.threads == torch.get_num_threads()
    text = _text(render_measured(train_measured))
    assert f"{torch.get_num_threads()} torch threads" in text and "load " in text
    if m.host.loadavg is not None:
        assert all(isinstance(x, float) for x in m.host.loadavg) and " ".join(f"{x:.2f}" for x in m.host.loadavg) in text

    def with_cv(cv: float):
        forward = dataclasses.replace(m.forward, mean=10.0, std=10.0 * cv)
        return dataclasses.replace(train_measured, measurement=dataclasses.replace(m, forward=forward))

    noisy = _text(render_measured(with_cv(0.15)))
    assert "noisy run" in noisy and "15.0%" in noisy and "--iters" in noisy and "OMP_NUM_THREADS" in noisy
    assert "noisy run" not in _text(render_measured(with_cv(0.05)))
    assert with_cv(0.15).to_dict()["runtime"]["noisy"] is True
    assert with_cv(0.05).to_dict()["runtime"]["forward_cv"] == pytest.approx(0.05)


def test_every_json_has_a_timestamp_and_the_host(train_measured) -> None:
    import datetime

    from graphprof.render import render_json

    dry = json.loads(render_json(graphprof.profile_model(_Block(), input_shape=(1, 3, 8, 8))))
    assert dry["schema_version"] == SCHEMA_VERSIONS["profile"]
    stamp = datetime.datetime.fromisoformat(dry["timestamp"])
    assert stamp.tzinfo is not None and abs((datetime.datetime.now(datetime.timezone.utc) - stamp).total_seconds()) < 600
    assert dry["host"]["torch"] == torch.__version__ and dry["host"]["threads"] == torch.get_num_threads()
    assert {"cpu", "cores", "platform", "loadavg"} <= set(dry["host"])
    assert {layer["intensity_band"] for layer in dry["layers"]} <= {
        None,
        "Strongly compute-bound",
        "Compute-bound",
        "Balanced",
        "Memory-bound",
    }
    measured = json.loads(render_json(train_measured))
    assert measured["timestamp"] == train_measured.measurement.timestamp and set(measured["host"]) == set(dry["host"])
