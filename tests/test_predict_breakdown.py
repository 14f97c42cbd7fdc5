"""Where the prediction goes (issue 53): the predicted time by op kind and by layer, the measured forward by kind
beside it, in the report, the JSON and the HTML page. The devices are synthetic CPUs carrying a shipped class-rate
table or kind models fitted to a known law, so nothing here depends on this machine's speed; the measured runs
only check that the measured side is there and adds up, never its figures."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console
from torch import nn

import graphprof
from graphprof.base.choices import Mode, OpStatus
from graphprof.cost.breakdown import OUTSIDE_ATEN, TOP_LAYERS, measured_by_kind
from graphprof.cost.result import Profile
from graphprof.cost.roofline import with_roofline
from graphprof.devices.hardware import Hardware
from graphprof.devices.predict import predict_ops
from graphprof.measure.result import ForwardFaults
from graphprof.render import render_report
from graphprof.render.sink import render_result
from graphprof.schemas import validate


def _cpu(calibration: object) -> Hardware:
    """A CPU (its label names no NVIDIA part) carrying ``calibration``, its bandwidth matched so it is kept."""
    hw = Hardware(name="test-cpu", label="test CPU", kind="test", peak_tflops={"float32": 0.1}, bandwidth_gbs=20.0, source="test")
    return dataclasses.replace(hw, calibration=dataclasses.replace(calibration, bandwidth_gbs=20.0))  # type: ignore[type-var]


def _class_cpu() -> Hardware:
    """The shipped H100 table's class rates on a CPU: the predictor prices by op class."""
    return _cpu(graphprof.get_hardware("h100").calibration)


def _kind_cpu() -> Hardware:
    """Kind models fitted to products timed at 2 ns a FLOP plus 10 us (and ``generic`` over them): by op kind."""
    pytest.importorskip("sklearn")
    from graphprof.calibrate.fit_ops import fit_op_model
    from graphprof.devices.opmodel import Sample, op_features

    rng, samples = random.Random(0), []
    for group in range(4):
        for n in (16, 32, 64, 128, 256, 512, 1024):
            flops, nbytes = 2 * n * 64 * 64, 4 * (2 * n * 64 + 64 * 64)
            features = op_features("linear", flops, nbytes, [[n, 64], [64, 64]], [[n, 64]])
            seconds = (2e-9 * flops + 1e-5) * math.exp(rng.gauss(0, 0.05))
            samples.append(Sample("linear", tuple(features), seconds, group=f"m{group}"))
    return _cpu(dataclasses.replace(graphprof.get_hardware("h100").calibration, op_model=fit_op_model(samples)))  # type: ignore[type-var]


def _linear_relu(mode: str = "eval", hardware: Hardware | None = None) -> Profile:
    model = nn.Sequential(nn.Linear(4, 2), nn.ReLU())
    return with_roofline(graphprof.profile_model(model, input_shape=(1, 4), mode=mode), hardware or _class_cpu())


def _convnet(mode: str = "eval") -> Profile:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=8), nn.Flatten(), nn.Linear(8 * 12 * 12, 10)
    )
    return with_roofline(graphprof.profile_model(model, input_shape=(2, 3, 16, 16), mode=mode), _class_cpu())


def _text(profile: Profile, width: int = 120) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_report(profile))
    return console.export_text()


# ---- by hand -----------------------------------------------------------------------------------------------
def test_by_hand_linear_then_relu_by_op_class() -> None:
    # the calls: aten.t (a view), prim.device, aten.addmm, aten.relu: one matmul and one elementwise, each
    # predicted at its own call's share of the timeline
    profile = _linear_relu()
    b = profile.roofline.breakdown
    assert b is not None and b.taxonomy == "class" and b.passes == "forward"
    ops = [op for _, op in profile.iter_ops()]
    shares = predict_ops(ops, profile.dtype, profile.roofline.hardware, profile.roofline.calibration)
    seconds = {op.op: t for op, t in zip(ops, shares, strict=True)}
    kinds = {k.name: k for k in b.kinds}
    assert kinds["matmul"].calls == 1 and kinds["matmul"].predicted_s == seconds["aten.addmm"]
    assert kinds["elementwise"].calls == 1 and kinds["elementwise"].predicted_s == seconds["aten.relu"]
    assert kinds["view"].calls == 1 and kinds[OUTSIDE_ATEN].calls == 1
    assert set(kinds) == {"matmul", "elementwise", "view", OUTSIDE_ATEN}
    assert [layer.name for layer in b.layers] == ["0", "1"]  # the Linear is predicted above the ReLU


def test_by_hand_linear_then_relu_by_op_kind() -> None:
    profile = _linear_relu(hardware=_kind_cpu())
    b = profile.roofline.breakdown
    assert b is not None and b.taxonomy == "kind"
    kinds = {k.name: k.calls for k in b.kinds}
    assert kinds == {"linear": 1, "activation": 1, "view": 1, OUTSIDE_ATEN: 1}
    assert b.to_dict()["taxonomy_source"].startswith("op_kind")


def test_by_hand_measured_calls_take_the_kinds_of_the_dry_runs_calls() -> None:
    # the forward predicted addmm 3 us and relu 1 us; measured: addmm 6 us, relu_ 2 us (an in-place call: the
    # dry run's relu), a mul the dry run never saw 1 us (its name alone: elementwise), a call inside another
    # (dispatched 0 times) not at all; the layers sum to 12 us, so 12 - 9 = 3 us ran between the calls
    def rec(op: str) -> SimpleNamespace:
        return SimpleNamespace(op=op, status=OpStatus.COUNTED, input_shapes=())

    def timed(layer: str, op: str, calls: int, us: float) -> SimpleNamespace:
        return SimpleNamespace(layer=layer, op=op, dispatched_calls=calls, dispatched_time_us=us)

    forward = [("0", rec("aten.addmm"), 3e-6), ("1", rec("aten.relu"), 1e-6)]
    ops = [timed("0", "aten::addmm", 1, 6.0), timed("1", "aten::relu_", 1, 2.0), timed("(outside layers)", "aten::mul", 1, 1.0),
           timed("0", "aten::empty", 0, 5.0)]  # fmt: skip
    faults = ForwardFaults(775.6e6, 620.4e6)  # counted around the plain and the profiled forwards
    run = SimpleNamespace(ops=ops, layer_sum_us=12.0, device="cpu", layer_runs=3, overhead=0.05, forward_cv=0.02, faults=faults)
    m = measured_by_kind(run, forward, "class")
    kinds = {k.kind: k for k in m.kinds}
    assert set(kinds) == {"matmul", "elementwise"}
    assert kinds["matmul"].measured_s == pytest.approx(6e-6) and kinds["matmul"].ratio == pytest.approx(2.0)
    assert kinds["elementwise"].measured_s == pytest.approx(3e-6) and kinds["elementwise"].calls == 2
    assert kinds["elementwise"].predicted_s == pytest.approx(1e-6)
    assert m.unmatched_s == pytest.approx(1e-6) and m.between_s == pytest.approx(3e-6)
    assert m.measured_s == pytest.approx(12e-6) and m.predicted_s == pytest.approx(4e-6)
    assert "profiler overhead +5.0%" in m.label and "CV 2.0%" in m.label
    assert "page faults a forward: 775.6 MB plain, 620.4 MB profiled" in m.label
    assert m.to_dict()["faults"] == {"plain_bytes": 775.6e6, "profiled_bytes": 620.4e6}
    assert "page faults" not in measured_by_kind(SimpleNamespace(**{**vars(run), "faults": None}), forward, "class").label


# ---- invariants --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_the_kinds_sum_to_the_predicted_time_and_the_shares_to_one(mode: str) -> None:
    profile = _convnet(mode)
    roofline = profile.roofline
    b = roofline.breakdown
    assert b is not None and roofline.predicted_seconds is not None
    assert b.passes == ("forward + backward" if mode == "train" else "forward")
    assert sum(k.predicted_s for k in b.kinds) == pytest.approx(roofline.predicted_seconds, rel=1e-12)
    assert b.total_s == pytest.approx(roofline.predicted_seconds, rel=1e-12)
    assert sum(k.share for k in b.kinds) == pytest.approx(1.0)
    assert sum(k.calls for k in b.kinds) == sum(len(row.ops) for row in profile.layers)
    assert {"conv", "conv_depthwise", "norm", "matmul"} <= {k.name for k in b.kinds}
    assert [k.predicted_s for k in b.kinds] == sorted((k.predicted_s for k in b.kinds), reverse=True)


def test_the_top_layers_are_the_most_predicted_sorted_and_a_subset() -> None:
    profile = _convnet()
    b = profile.roofline.breakdown
    assert b is not None and b.layer_count == len(profile.layers)
    predicted = {layer.name: layer.predicted_seconds for layer in profile.roofline.layers}
    assert len(b.layers) == min(TOP_LAYERS, len(profile.layers))
    assert [x.predicted_s for x in b.layers] == sorted((x.predicted_s for x in b.layers), reverse=True)
    for layer in b.layers:
        assert layer.predicted_s == pytest.approx(predicted[layer.name], rel=1e-12)
    left_out = sorted(predicted.values(), reverse=True)[len(b.layers) :]
    assert all(v <= b.layers[-1].predicted_s for v in left_out)


def test_no_calibration_no_breakdown_and_no_section() -> None:
    profile = graphprof.profile_model(nn.Sequential(nn.Linear(4, 2), nn.ReLU()), input_shape=(1, 4))
    assert profile.roofline.breakdown is None
    assert json.loads(render_result(profile))["roofline"]["prediction_breakdown"] is None
    assert "Predicted time by" not in _text(profile)


# ---- rendered ----------------------------------------------------------------------------------------------
def test_the_json_carries_the_breakdown_and_fits_its_schema() -> None:
    for profile in (_convnet(), _convnet("train"), _linear_relu(hardware=_kind_cpu())):
        data = json.loads(render_result(profile))
        validate(data)
        got = data["roofline"]["prediction_breakdown"]
        assert got["predicted_time_s"] == pytest.approx(data["roofline"]["predicted_time_s"])
        assert got["measured"] is None and "an estimate" in got["label"]


@pytest.mark.parametrize("width", [60, 100, 160])
def test_the_report_has_the_section_at_every_width(width: int) -> None:
    text = _text(_convnet(), width)
    assert "Predicted time by op class" in text and "by predicted time" in text
    assert "conv_depthwise" in text
    assert max(len(line) for line in text.splitlines()) <= width


def test_the_html_page_has_the_section() -> None:
    pytest.importorskip("plotly")
    from graphprof.render.html import render_profile_html

    page = render_profile_html(_convnet())
    assert "id='prediction-breakdown'" in page and "id='prediction-kinds'" in page and "conv_depthwise" in page
    assert "measured fwd" not in page


# ---- beside a measurement ----------------------------------------------------------------------------------
def _measured(mode: str, hardware: Hardware) -> Profile:
    prepared = graphprof.prepare(nn.Sequential(nn.Linear(16, 8), nn.ReLU()), input_shape=(2, 16), mode=mode)
    measurement = prepared.measure(device="cpu", iters=3, warmup=1, layer_runs=3)
    return with_roofline(dataclasses.replace(prepared.profile(), measurement=measurement), hardware)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_with_a_measurement_the_measured_forward_sits_beside_the_prediction(mode: str) -> None:
    profile = _measured(mode, _class_cpu())
    b = profile.roofline.breakdown
    assert b is not None and b.measured is not None
    m = b.measured
    measured = {k.kind: k for k in m.kinds}
    assert measured["matmul"].measured_s > 0 and measured["elementwise"].measured_s > 0
    assert measured["matmul"].calls == 1
    # like for like: the forward's prediction, the whole of it in eval mode, the forward's own timeline in train
    forward = sum(dict(profile.roofline.forward_predicted).values()) if mode == "train" else b.total_s
    assert m.predicted_s == pytest.approx(forward, rel=1e-9)
    if m.between_s > 0:  # the calls and the time between them make up the profiled forward's layers
        assert m.measured_s == pytest.approx(profile.measurement.layer_sum_us * 1e-6, rel=1e-9)
    assert "profiler overhead" in m.label and "CV" in m.label
    # page faults are counted around CPU forwards in eval mode only (a training step's forward is not the plain one)
    assert (profile.measurement.faults is not None) is (mode == "eval")
    data = json.loads(render_result(profile))
    validate(data)
    assert data["roofline"]["prediction_breakdown"]["measured"]["pass"] == "forward"
    text = _text(profile, 160)
    assert "Measured fwd" in text and "(between calls)" in text
    assert ("Pred. fwd" in text) is (profile.mode is Mode.TRAIN)


def test_a_measurement_on_another_kind_of_device_is_not_set_beside_it_and_html_shows_one() -> None:
    pytest.importorskip("plotly")
    from graphprof.render.html import render_profile_html

    on_gpu = _measured("eval", graphprof.get_hardware("h100"))
    assert on_gpu.roofline.breakdown is not None and on_gpu.roofline.breakdown.measured is None
    page = render_profile_html(_measured("eval", _class_cpu()))
    assert "measured fwd" in page and "profiler overhead" in page


def test_the_cli_with_measure_shows_the_measured_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from graphprof.calibrate.preset import LocalPreset
    from graphprof.calibrate.store import write_preset
    from graphprof.devices.local import cpu_model
    from graphprof_cli.main import app, join_input_shape

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    hw = _class_cpu()
    device = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__}
    write_preset(LocalPreset(hw, hw.calibration, device).to_dict())  # type: ignore[arg-type]
    out = tmp_path / "p.json"
    argv = ["--model", "squeezenet1_0", "--input-shape", "1,3,32,32", "--hardware", "local", "--measure", "--iters", "3",
            "--no-learn", "--width", "160", "--output", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, join_input_shape(argv))
    assert result.exit_code == 0, result.output
    assert "Predicted time by op class" in result.output and "Measured fwd" in result.output
    data = json.loads(out.read_text())
    validate(data)
    assert data["roofline"]["prediction_breakdown"]["measured"]["by_kind"]


def test_the_page_faults_the_prediction_prices_are_shown_by_hand() -> None:
    # one ReLU writing a fresh output: 1,000,000 floats (4,000,000 B) above a 2 MiB threshold fault whole;
    # 300,000 floats (1,200,000 B) between 1 MiB and it: by the heap replayed over the dry run's allocation order,
    # none (the heap grows once for the one block, which the next forward re-uses); by the share law (a profile with
    # no allocation order: read back from JSON), the share, 0.5: 600,000 B. At 1e-10 s a byte (speed 1): 0.4 ms,
    # 0 and 0.06 ms. A training profile prices no forward faults apart.
    from graphprof.devices.firsttouch import FirstTouch

    hw = _kind_cpu()
    cal = hw.calibration
    assert cal is not None and cal.op_model is not None and cal.speed == 1.0
    touch = FirstTouch(2 * 2**20, 1e-10, share_below=0.5, min_bytes=2**20)
    hw = dataclasses.replace(hw, calibration=dataclasses.replace(cal, op_model=dataclasses.replace(cal.op_model, first_touch=touch)))
    cases = ((1_000_000, True, 4_000_000.0, "heap replay"), (300_000, True, 0.0, "heap replay"), (300_000, False, 600_000.0, "share law"))
    for n, order, expected, method in cases:
        dry = graphprof.profile_model(nn.Sequential(nn.ReLU()), input_shape=(1, n))
        assert len(dry.allocations) == 1 and dry.allocations[0].allocated[0][1] == 4 * n  # the output's storage
        profile = with_roofline(dry if order else dataclasses.replace(dry, allocations=()), hw)
        b = profile.roofline.breakdown
        assert b is not None and b.faults is not None and b.faults.method == method
        assert b.faults.bytes == pytest.approx(expected) and b.faults.seconds == pytest.approx(expected * 1e-10)
        assert b.total_s >= b.faults.seconds  # priced inside the calls' own times
        assert f"{expected / 1e6:,.1f} MB a forward" in _text(profile, 200)
        data = json.loads(render_result(profile))
        validate(data)
        assert data["roofline"]["prediction_breakdown"]["faults"]["bytes"] == pytest.approx(expected)
        assert data["roofline"]["prediction_breakdown"]["faults"]["method"] == method
    trained = with_roofline(graphprof.profile_model(nn.Sequential(nn.Linear(4, 4)), input_shape=(2, 4), mode="train"), hw)
    assert trained.roofline.breakdown is not None and trained.roofline.breakdown.faults is None
