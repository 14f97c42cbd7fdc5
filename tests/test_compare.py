"""`graphprof compare`, `graphprof hardware` and the roofline options, through typer's CliRunner."""

import csv
import io
import json

import pytest
from typer.testing import CliRunner

import graphprof
from graphprof.base.choices import Capture
from graphprof.devices.hardware import HARDWARE, get_hardware
from graphprof.render import ModelFailure, comparison_rows, render_comparison_csv
from graphprof_cli.main import app, join_input_shape

runner = CliRunner()
SMALL = ["--input-shape", "1", "3", "32", "32"]


def invoke(*args):
    return runner.invoke(app, join_input_shape(list(args)))


def test_compare_two_models_to_json(tmp_path):
    out = tmp_path / "cmp.json"
    result = invoke("compare", "resnet18", "squeezenet1_0", *SMALL, "--hardware", "l4", "--output", str(out))
    assert result.exit_code == 0, result.output
    assert "Model comparison on NVIDIA L4 24GB" in result.output
    assert "resnet18" in result.output and "squeezenet1_0" in result.output
    data = json.loads(out.read_text())
    assert data["kind"] == "compare"  # the kind of its schema (graphprof/schemas/compare.schema.json) and data["hardware"]["name"] == "l4"
    first, second = data["models"]
    assert first["model"] == "resnet18" and second["model"] == "squeezenet1_0"
    assert first["params"] == 11_689_512
    assert all(isinstance(m["flops"], int) and m["estimated_time_s"] > 0 for m in data["models"])
    assert 0.0 <= first["compute_bound_share"] <= 1.0


def test_compare_failure_is_reported_and_exits_nonzero(tmp_path):
    out = tmp_path / "cmp.csv"
    result = invoke("compare", "resnet18", "resnet19", *SMALL, "--output", str(out))
    assert result.exit_code == 3  # the failing model's own exit code (model not found)
    assert "Traceback" not in result.output
    assert "graphprof: error: resnet19: unknown model 'resnet19'" in " ".join(result.stderr.split())
    assert "fixed threshold" in " ".join(result.output.split())
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["model"] for r in rows] == ["resnet18", "resnet19"]
    assert rows[0]["error"] == "" and int(rows[0]["flops"]) > 0
    assert rows[1]["flops"] == "" and "unknown model" in rows[1]["error"]


def test_comparison_rows_match_the_profiles():
    profile = graphprof.profile_model("resnet18", input_shape=(1, 3, 32, 32))
    rows = comparison_rows([profile, ModelFailure("x", "boom", 5)], get_hardware("h100"))
    assert rows[0].flops == profile.total_flops and rows[0].memory == profile.total_bytes
    assert rows[1].error == "boom" and rows[1].flops is None
    back = list(csv.DictReader(io.StringIO(render_comparison_csv(rows))))
    assert float(back[0]["estimated_time_s"]) == rows[0].estimated_time_s


def test_hardware_lists_presets():
    result = invoke("hardware")
    assert result.exit_code == 0, result.output
    for name in HARDWARE:
        assert name in result.output
    assert "989.5" in result.output and "3,350" in result.output  # H100 SXM dense BF16, GB/s
    one = invoke("hardware", "H100")
    assert one.exit_code == 0 and "ridge point 295.4" in one.output


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "resnet18", "--hardware", "nosuch"],
        ["hardware", "nosuch"],
        ["compare", "resnet18", "squeezenet1_0", "--hardware", "nosuch"],
    ],
)
def test_unknown_hardware_is_a_one_line_error(argv):
    result = invoke(*argv)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown hardware 'nosuch'" in lines[0]


def test_custom_device_needs_both_figures():
    result = invoke("--model", "resnet18", "--peak-tflops", "10")
    assert result.exit_code == 2 and "--bandwidth-gbs" in result.output


@pytest.mark.slow  # over 1.5 s: the full suite runs it, the fast tier does not
def test_profile_with_roofline_json_and_plot(tmp_path):
    out, chart = tmp_path / "p.json", tmp_path / "roofline.png"
    result = invoke(
        "--model", "resnet18", *SMALL, "--peak-tflops", "100", "--bandwidth-gbs", "1000",
        "--capture", "fx", "--top", "3", "--output", str(out), "--plot", str(chart),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "ridge point of custom device (100 TFLOP/s, 1000 GB/s) at float32" in " ".join(result.output.split())
    assert "Top 3 layers by FLOPs" in result.output
    data = json.loads(out.read_text())
    assert data["hardware"]["kind"] == "custom"
    assert data["roofline"]["threshold_flops_per_byte"] == pytest.approx(100.0)  # 100e12 / 1000e9
    assert chart.read_bytes().startswith(b"\x89PNG")


def test_bad_plot_name_fails_before_profiling(tmp_path):
    result = invoke("--model", "resnet18", "--plot", str(tmp_path / "chart.png"))
    assert result.exit_code == 7 and "which chart" in result.output


def test_capture_choices_map_to_methods():
    assert Capture.AUTO.methods is None  # the model's default order (graphprof.capture.methods.default_methods)
    assert Capture.FX.methods == ("fx.symbolic_trace",)
    assert Capture.DYNAMO.methods == ("dynamo.export",)
    assert Capture.EAGER.methods == ("eager",)
    result = invoke("--model", "resnet18", *SMALL, "--capture", "eager", "--top", "0")
    assert result.exit_code == 0, result.output
    assert any(line.startswith("Capture") and line.split()[-1] == "eager" for line in result.output.splitlines())
