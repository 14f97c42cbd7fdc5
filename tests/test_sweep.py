"""Scaling sweeps: values, fits (log-log, quadratic), the knee, bad input, OOM, renderers and the CLI."""

import importlib.util
import json
import textwrap

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import graphprof
from graphprof.base.choices import SweepAxis
from graphprof.compat.scaling import ScalingExperiment
from graphprof.errors import InvalidInputError
from graphprof.render.sweep import render_sweep_csv, write_sweep_plot
from graphprof.scaling import find_knee, parse_values, sweep
from graphprof.scaling import loop as sweep_module
from graphprof_cli.main import app

runner = CliRunner()

FACTORY = """
from torch import nn

def make(num_layers=2, width=8):
    first = nn.Linear(8, width, bias=False)  # the input stays 8 wide whatever the width
    return nn.Sequential(first, *[nn.Linear(width, width, bias=False) for _ in range(num_layers - 1)])
"""


def make_mlp(num_layers=2, width=8):
    return nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(num_layers)])


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "mlp_factory.py"
    path.write_text(textwrap.dedent(FACTORY))
    return path


# ---- values -----------------------------------------------------------------------------------------
def test_parse_values_lists_and_ranges():
    assert parse_values("1,2,4") == [1, 2, 4]
    assert parse_values("1:256:x2") == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # 2^0 .. 2^8
    assert parse_values("128:512:+128") == [128, 256, 384, 512]
    assert parse_values("0.5,1.5") == [0.5, 1.5]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("4,2,8", "sorted"),
        ("2,2", "sorted"),
        ("0,1", "positive"),
        ("-1,4", "positive"),
        ("a,b", "not a number"),
        ("1:8:x1", "above 1"),
        ("1:8", "range"),
    ],
)
def test_bad_values_are_one_line_errors(text, message):
    with pytest.raises(InvalidInputError, match=message) as info:
        parse_values(text)
    assert "\n" not in str(info.value)


# ---- fits -------------------------------------------------------------------------------------------
def test_batch_sweep_is_exactly_linear():
    model = make_mlp(num_layers=3, width=8)
    s = sweep(model, "batch", [1, 2, 4, 8], input_shape=(1, 8))
    # 3 layers x 8 x 8 MACs per sample = 192; times the batch
    assert [r.macs for r in s.rows] == [192, 384, 768, 1536]
    fit = s.fit("macs")
    assert round(fit.exponent, 3) == 1.000 and round(fit.r2, 3) == 1.000
    assert fit.coefficient == pytest.approx(192)
    # parameters do not grow with the batch: exponent 0, and every row has the same 3 x 64 = 192
    assert {r.params for r in s.rows} == {192}
    assert s.fit("params").exponent == pytest.approx(0.0, abs=1e-12)


def test_resnet_batch_macs_linear_and_capture_reused():
    s = graphprof.sweep("resnet18", "batch", [1, 2, 4], input_shape=(1, 3, 64, 64))
    macs = [r.macs for r in s.rows]
    assert macs[1] == 2 * macs[0] and macs[2] == 4 * macs[0]
    assert round(s.fit("macs").exponent, 3) == 1.0 and round(s.fit("macs").r2, 3) == 1.0
    assert all(r.capture_reused for r in s.rows[1:])


@pytest.mark.slow  # over 1.5 s: the full suite runs it, the fast tier does not
def test_llama_seq_len_quadratic_term_is_attention():
    s = sweep("hf:llama", "seq-len", [128, 256, 512])
    quad = s.fit_quadratic("macs")
    # attention per layer and sequence: QK^T (S x S x hidden) + AV (S x S x hidden) = 2 S^2 hidden;
    # 4 layers x 2 x 256 = 2048 MACs per S^2
    assert quad.quadratic == pytest.approx(2 * 4 * 256, rel=1e-9)
    # linear: lm_head 256 x 32000 = 8,192,000 plus per layer q 256x256 + k 256x128 + v 256x128
    # + o 256x256 + MLP 3 x 256 x 688 = 724,992, x 4 = 2,899,968: 11,091,968 MACs per token
    assert quad.linear == pytest.approx(11_091_968, rel=1e-9)
    assert quad.constant == pytest.approx(0, abs=1.0)
    assert quad.r2 == pytest.approx(1.0)
    # the S^2 share at 512: 2048 x 512^2 / (11,091,968 x 512 + 2048 x 512^2) = 536,870,912 / 6,215,958,528
    assert quad.quadratic_share(512) == pytest.approx(536_870_912 / 6_215_958_528)
    assert s.rows[-1].macs == 6_215_958_528
    assert s.to_dict()["quadratic_fits"]["macs"]["quadratic"] == pytest.approx(2048, rel=1e-9)


def test_llama_layers_sweep_adds_one_layer_of_params():
    s = sweep("hf:llama", "layers", [1, 2])
    # one decoder layer: 724,992 matmul weights + 2 RMSNorm x 256 = 725,504 parameters
    assert s.rows[1].params - s.rows[0].params == 725_504
    assert s.key == "num_hidden_layers"


def test_factory_keyword_sweep(factory_file):
    spec = f"{factory_file}:make"
    s = sweep(spec, "set", [4, 8, 16], key="width", input_shape=(1, 8))
    # 8 x w + (2 - 1) x w x w MACs: 32 + 16 = 48, 64 + 64 = 128, 128 + 256 = 384
    assert [r.macs for r in s.rows] == [48, 128, 384]
    assert [r.params for r in s.rows] == [48, 128, 384]  # the same count of weights, batch 1
    assert s.label == "width"


def test_factory_layers_via_scaling_experiment():
    exp = ScalingExperiment(make_mlp, "cpu", input_shape=(2, 8))
    result = exp.run_layer_scaling([1, 2, 4])
    # batch 2 x L x 8 x 8 MACs
    assert [r.macs for r in result.rows] == [128, 256, 512]
    assert exp.run("batch", [1, 2]).rows[1].macs == 2 * 2 * 64  # factory defaults: 2 layers, batch 2
    assert set(exp.results) == {"num_layers", "batch"}


def test_scaling_experiment_print_summary(capsys):
    exp = ScalingExperiment(make_mlp, input_shape=(1, 8))
    exp.run("num_layers", [1, 2])
    exp.print_summary()
    out = capsys.readouterr().out
    assert "num_layers sweep" in out and "128" in out  # 2 layers x 64 MACs


# ---- bad input, before any work -----------------------------------------------------------------------
def test_axis_the_model_lacks():
    with pytest.raises(InvalidInputError, match="no sequence length"):
        sweep("resnet50", "seq-len", [128, 256])
    with pytest.raises(InvalidInputError, match="no resolution"):
        sweep("hf:llama", "resolution", [224])
    with pytest.raises(InvalidInputError, match="no depth"):
        sweep("resnet18", "layers", [2, 4])
    with pytest.raises(InvalidInputError, match="unknown sweep axis"):
        sweep("resnet18", "width", [2, 4])


def test_factory_without_keyword(factory_file):
    with pytest.raises(InvalidInputError, match="no keyword 'depth'"):
        sweep(f"{factory_file}:make", "set", [1, 2], key="depth", input_shape=(1, 8))
    with pytest.raises(InvalidInputError, match="no keyword 'hidden'"):
        ScalingExperiment(make_mlp, input_shape=(1, 8)).run("hidden", [1, 2])


def test_unsorted_values_rejected_before_building(monkeypatch):
    def no_prepare(*args, **kwargs):
        raise AssertionError("prepare must not run")

    monkeypatch.setattr(sweep_module, "prepare", no_prepare)
    with pytest.raises(InvalidInputError, match="sorted"):
        sweep("resnet18", "batch", [4, 2])
    with pytest.raises(InvalidInputError, match="positive"):
        sweep("resnet18", "batch", [0, 2])


# ---- the knee and measurement ------------------------------------------------------------------------
def test_find_knee():
    # flat at 1 ms up to batch 8, then linear: the knee is 8 and the slope after it 1
    knee = find_knee([1, 2, 4, 8, 16, 32, 64], [1e-3, 1e-3, 1e-3, 1e-3, 2e-3, 4e-3, 8e-3])
    assert knee is not None and knee.value == 8 and knee.slope == pytest.approx(1.0)
    assert find_knee([1, 2, 4, 8], [1.0, 2.0, 4.0, 8.0]) is None  # never launch-bound
    assert find_knee([1, 2, 4, 8], [1.0, 1.0, 1.0, 1.0]) is None  # launch-bound throughout
    assert find_knee([1, 2], [1.0, 2.0]) is None


def test_measured_sweep_on_the_cpu():
    s = sweep(make_mlp(), "batch", [1, 2, 4], input_shape=(1, 8), measure=True, device="cpu")
    assert [r.value for r in s.rows] == [1, 2, 4]
    assert all(r.measured_seconds is not None and r.measured_seconds > 0 for r in s.rows)
    assert all(r.measured_peak_bytes is not None and r.measured_peak_bytes > 0 for r in s.rows)
    # the peak holds at least the largest batch's input: 4 x 8 float32 features
    assert s.rows[-1].measured_peak_bytes >= 4 * 8 * 4


class _Measured:
    def __init__(self, seconds, peak_bytes):
        self.seconds, self.peak_bytes = seconds, peak_bytes


def test_out_of_memory_stops_the_sweep(monkeypatch):
    def fake_measure(prepared, *, device, batch_size=None, **_):
        if batch_size >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return _Measured(1e-3, 1000 * batch_size)

    monkeypatch.setattr(sweep_module, "_load_measure", lambda: fake_measure)
    s = sweep(make_mlp(), "batch", [1, 2, 4, 8], input_shape=(1, 8), measure=True)
    assert [r.value for r in s.rows] == [1, 2]
    assert s.stopped_at == 4 and s.last_fit == 2
    assert [r.measured_peak_bytes for r in s.rows] == [1000, 2000]
    assert s.to_dict()["stopped_at"] == 4


def test_measured_knee_from_rows(monkeypatch):
    times = {1: 1e-3, 2: 1e-3, 4: 1e-3, 8: 2e-3, 16: 4e-3}
    monkeypatch.setattr(sweep_module, "_load_measure", lambda: lambda pm, *, device, batch_size=None, **_: _Measured(times[batch_size], 1))
    s = sweep(make_mlp(), SweepAxis.BATCH, [1, 2, 4, 8, 16], input_shape=(1, 8), measure=True)
    assert s.knee() is not None and s.knee().value == 4


# ---- renderers and the CLI ----------------------------------------------------------------------------
def test_csv_and_plot(tmp_path):
    s = sweep(make_mlp(), "batch", [1, 2, 4], input_shape=(1, 8), hardware="h100")
    lines = render_sweep_csv(s).splitlines()
    assert lines[0].startswith("value,inputs,params,macs")
    assert lines[2].split(",")[:4] == ["2", "2x8 float32", "128", "256"]  # 2 layers x 64 params; x2 batch
    assert all(r.estimated_seconds and r.estimated_seconds > 0 for r in s.rows)
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib not installed")
    out = write_sweep_plot(s, tmp_path / "sweep.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_sweep_set_json(factory_file, tmp_path):
    out = tmp_path / "s.json"
    result = runner.invoke(
        app, ["sweep", "--model", f"{factory_file}:make", "--set", "num_layers=1,2,4", "--input-shape", "1,8", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["axis"] == "set" and data["key"] == "num_layers"
    assert [r["macs"] for r in data["rows"]] == [64, 128, 256]  # L x 8 x 8
    assert data["fits"]["macs"]["exponent"] == pytest.approx(1.0)
    assert "Growth" in result.output


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--model", "resnet18"], 2, "exactly one axis"),
        (["--model", "resnet18", "--batch", "1,2", "--seq-len", "128"], 2, "exactly one axis"),
        (["--model", "resnet18", "--batch", "4,2"], 2, "sorted"),
        (["--model", "resnet50", "--seq-len", "128,256"], 2, "no sequence length"),
        (["--model", "resnet18", "--set", "width"], 2, "key=v1,v2"),
    ],
)
def test_cli_bad_input_one_line(argv, code, message):
    result = runner.invoke(app, ["sweep", *argv])
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow  # a real measured sweep, about 6 s
def test_cli_measured_sweep_on_the_cpu(tmp_path):
    out = tmp_path / "s.json"
    argv = ["sweep", "--model", "resnet18", "--input-shape", "1,3,32,32", "--batch", "1,2", "--measure", "--device", "cpu"]
    result = runner.invoke(app, [*argv, "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["rows"]
    assert [r["value"] for r in rows] == [1, 2] and all(r["measured_seconds"] > 0 for r in rows)
