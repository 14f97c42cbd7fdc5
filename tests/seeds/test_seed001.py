"""Seed 001 (the unified graph profiler), as its user types it: the hybrid strategy's labels, YOLO through
Dynamo (measured, with the same counts), ``1. Warm-up (always)`` as ``--capture-warmup always``, and the future
work's ONNX export as ``--export-onnx model.onnx``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import graphprof
from graphprof_cli.main import app


# ---- the summary's label for a capture method auto skipped -------------------------------------
def test_summary_says_dynamo_was_not_tried_and_why_never_failed():
    import dataclasses
    import io

    from rich.console import Console

    import graphprof
    from graphprof.render.summary import render_summary

    profile = graphprof.profile_model(torch.nn.Sequential(torch.nn.Linear(4, 4)), input_shape=(1, 4))
    attempts = (("fx.symbolic_trace", "TraceError: a loop"), ("dynamo.export", "not tried: YOLO exports in tens of seconds"))
    ladder = tuple(dataclasses.replace(f, passed_over=attempts) if f.rung == "capture" else f for f in profile.fallbacks)
    profile = dataclasses.replace(profile, capture_attempts=attempts, fallbacks=ladder)
    out = io.StringIO()
    Console(file=out, width=200).print(render_summary(profile))
    text = out.getvalue()
    assert "fx.symbolic_trace failed" in text and "TraceError: a loop" in text
    assert "dynamo.export not tried" in text and "YOLO exports in tens of seconds" in text
    assert "dynamo.export failed" not in text


# ---- YOLO through Dynamo ---------------------------------------------------------------------------------
def test_yolo_says_why_dynamo_is_not_tried_with_the_measured_times() -> None:
    """``auto`` counts YOLO with the eager capture and says why Dynamo was not tried, in measured seconds."""
    pytest.importorskip("ultralytics")
    from graphprof.models.registry import family_traits

    reason = family_traits("yolo").dynamo_skip
    assert reason is not None and re.search(r"about \d+ s on a CPU", reason) and "same counts" in reason


@pytest.mark.slow  # two YOLO profiles, one through Dynamo: about 15 s
def test_yolo_through_dynamo_counts_what_the_eager_capture_counts() -> None:
    """Seed 001: "YOLO: YOLOv5, YOLOv8, YOLO11 (via Dynamo fallback)". Forced through Dynamo, yolov8n has
    the same parameters and MACs as the default (eager) capture, module by module."""
    pytest.importorskip("ultralytics")
    eager = graphprof.profile_model("yolov8n")
    dynamo = graphprof.profile_model("yolov8n", methods=("dynamo.export",))
    assert (eager.capture_method, dynamo.capture_method) == ("eager", "dynamo.export")
    assert dict(eager.capture_attempts)["dynamo.export"].startswith("not tried: Dynamo export of YOLO takes about")
    rows = lambda p: {m.path: (m.params, m.cost.macs) for m in p.modules}  # noqa: E731
    assert rows(eager) == rows(dynamo) and len(rows(eager)) > 200
    assert eager.total_params == dynamo.total_params == 3_157_200  # yolov8n's own figure (3.2M)


# ---- 1. Warm-up (always) -----------------------------------------------------------------------------------
def test_warm_up_always_gives_every_model_its_real_forward() -> None:
    """``graphprof --model M --capture-warmup always``: seed 001's warm-up for a model that initialises nothing
    lazily; the default (auto) keeps skipping it, and never skips it even for a lazy model."""
    done = CliRunner().invoke(app, ["--model", "resnet18", "--input-shape", "1,3,32,32", "--capture-warmup", "always", "--width", "200"])
    assert done.exit_code == 0, done.output
    assert "warmed up with one real forward: asked for (warm_up='always')" in done.output
    default = graphprof.profile_model(nn.Linear(2, 2), input_shape=(1, 2))
    assert any(n.startswith("no warm-up: nothing in the model initialises lazily") for n in default.notes)
    never = graphprof.profile_model(nn.Linear(2, 2), input_shape=(1, 2), warm_up="never")
    assert any("warm_up='never'" in n for n in never.notes)
    with pytest.raises(graphprof.GraphprofError, match="warm_up='never', but lazy modules"):
        graphprof.profile_model(nn.Sequential(nn.LazyLinear(4)), input_shape=(2, 3), warm_up="never")
    auto = graphprof.profile_model(nn.Sequential(nn.LazyLinear(4)), input_shape=(2, 3))
    assert any("lazy modules take their shapes" in n for n in auto.notes) and auto.total_params == 3 * 4 + 4


def test_a_warm_up_policy_that_does_not_exist_is_one_line() -> None:
    done = CliRunner().invoke(app, ["--model", "resnet18", "--capture-warmup", "sometimes"])
    assert done.exit_code == 2 and "sometimes" in done.output
    with pytest.raises(graphprof.GraphprofError, match="unknown warm-up policy 'sometimes'"):
        graphprof.profile_model(nn.Linear(2, 2), input_shape=(1, 2), warm_up="sometimes")


# ---- future work: ONNX export ------------------------------------------------------------------------------
@pytest.mark.slow  # torch.onnx's exporter: about 6 s
def test_export_onnx_writes_the_model_and_checks_its_op_counts(tmp_path: Path) -> None:
    """``graphprof --model M --export-onnx model.onnx``: the file loads with onnx, and its 20 convolutions
    and one matrix product (resnet18: 17 3x3/7x7 + 3 downsampling 1x1; the fc) are graphprof's."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    path = tmp_path / "model.onnx"
    done = CliRunner().invoke(app, ["--model", "resnet18", "--input-shape", "1,3,32,32", "--export-onnx", str(path), "--width", "200"])
    assert done.exit_code == 0, done.output
    assert "convolution (Conv, ConvTranspose): 20 in the ONNX graph, 20 counted by graphprof - agree" in done.output
    assert "matrix product (Gemm, MatMul): 1 in the ONNX graph, 1 counted by graphprof - agree" in done.output
    model = onnx.load(str(path))
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 20


def test_graphprofs_side_of_the_onnx_check_counts_each_call() -> None:
    """The contractions graphprof recorded, by kind: one conv, two linears, an attention kernel (its two
    matrix products) and nn.MultiheadAttention's fused path (four: in, scores, values, out)."""
    from graphprof.graph.onnx_export import _graphprof_counts

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.fc1, self.fc2 = nn.Conv2d(3, 4, 3), nn.Linear(36, 8), nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc2(self.fc1(self.conv(x).flatten(2)))  # (1, 4, 8)
            return torch.nn.functional.scaled_dot_product_attention(h, h, h)

    counts = _graphprof_counts(graphprof.profile_model(Net(), input_shape=(1, 3, 8, 8)))
    assert (counts["convolution"], counts["matrix product"]) == (1, 2 + 2)


def test_export_onnx_refuses_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that does not exist, and a missing extra, are one line each, before the model is built."""
    done = CliRunner().invoke(app, ["--model", "resnet18", "--export-onnx", str(tmp_path / "nowhere" / "m.onnx")])
    assert done.exit_code != 0 and "nowhere" in done.output and "Traceback" not in done.output
    import sys

    from graphprof.graph.onnx_export import require_onnx

    if "onnx" in sys.modules or __import__("importlib").util.find_spec("onnx") is not None:
        with pytest.raises(graphprof.GraphprofError, match="meta device"):
            graphprof.prepare("resnet18").export_onnx(tmp_path / "m.onnx")  # no weights to write
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if the onnx extra were not installed
    with pytest.raises(graphprof.GraphprofError, match=r"graphprof\[onnx\]"):
        require_onnx()
