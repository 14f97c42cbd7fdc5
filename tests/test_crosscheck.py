"""graphprof against fvcore and torch's FlopCounterMode: the convention table, the probes, whole models, the CLI.

Numbers are checked more than one way: the arithmetic by hand (in the comments), the reference run plain
(a probe must not change the reference's own figures), and invariants (groups sum to totals, shares and
accuracy add up to 100%, a MAC is one fvcore flop and two torch FLOPs).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from typer.testing import CliRunner

from graphprof.base.choices import OpStatus, Phase
from graphprof.cost.result import LayerRow, OpRecord
from graphprof.crosscheck import (
    FVCORE,
    LEFT_OUT,
    TORCH,
    CrossCheck,
    GroupComparison,
    Reference,
    Status,
    count_with_fvcore,
    count_with_torch,
    crosscheck_model,
    iter_crosschecks,
    select_models,
)
from graphprof.crosscheck.result import Adjustment
from graphprof.errors import InvalidInputError, MissingDependencyError, ModelNotFoundError
from graphprof.formulas import Cost
from graphprof.render.crosscheck import describe, render_comparison, render_csv, render_details, render_json, render_markdown
from graphprof_cli.main import app, join_input_shape
from graphprof_cli.validate import DISAGREE_EXIT

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, join_input_shape(["validate", *args]))


def record(op, inputs, outputs=(), macs=0, flops=0):
    return OpRecord(op, OpStatus.COUNTED, Phase.FORWARD, Cost(macs, flops), tuple(inputs), tuple(outputs))


def row(type_="Conv2d"):
    return LayerRow("x", "x", None, type_, 0, (), Cost(), Cost())


# --------------------------------------------------------------------------------------------------
# The convention table, by hand


def test_fvcore_counts_contractions_as_macs():
    conv = record("aten.convolution", [(1, 3, 8, 8), (4, 3, 3, 3)], [(1, 4, 8, 8)], macs=6912)
    assert FVCORE.graphprof_counts(row(), conv) == {"conv": 6912}
    mm = record("aten.addmm", [(5,), (2, 3), (3, 5)], [(2, 5)], macs=30)
    assert FVCORE.graphprof_counts(row("Linear"), mm) == {"matmul": 30}
    assert TORCH.graphprof_counts(row("Linear"), mm) == {"matmul": 60}  # 2 FLOPs per MAC
    relu = record("aten.relu", [(1, 4, 8, 8)], [(1, 4, 8, 8)], flops=256)
    assert FVCORE.graphprof_counts(row("ReLU"), relu) == {} == TORCH.graphprof_counts(row("ReLU"), relu)


@pytest.mark.parametrize(
    ("op", "shapes", "flops_per_element", "expected_per_element"),
    [
        ("aten.native_batch_norm", [(2, 4, 3, 3), (4,), (4,), (4,), (4,)], 2, 2),  # eval, affine: x * scale + shift
        ("aten._native_batch_norm_legit_no_training", [(2, 4, 3, 3), (4,), (4,)], 2, 1),  # eval, no affine
        ("aten.native_batch_norm", [(2, 4, 3, 3), (4,), (4,), (4,), (4,)], 6, 5),  # training (graphprof rate 6)
        ("aten.native_batch_norm", [(2, 4, 3, 3)], 6, 4),  # training, no affine, no stats (instance norm)
    ],
)
def test_fvcore_batch_norm_rule(op, shapes, flops_per_element, expected_per_element):
    n = 2 * 4 * 3 * 3
    bn = record(op, shapes, [shapes[0]], flops=flops_per_element * n)
    assert FVCORE.graphprof_counts(row("BatchNorm2d"), bn) == {"batch_norm": expected_per_element * n}


def test_fvcore_elementwise_rules():
    ln = record("aten.native_layer_norm", [(2, 5, 8), (8,), (8,)], [(2, 5, 8)])
    assert FVCORE.graphprof_counts(row("LayerNorm"), ln) == {"layer_norm": 5 * 80}
    gn = record("aten.native_group_norm", [(1, 8, 4, 4)], [(1, 8, 4, 4)])
    assert FVCORE.graphprof_counts(row("GroupNorm"), gn) == {"group_norm": 4 * 128}  # no affine: 4 / elem
    up = record("aten.upsample_bilinear2d", [(1, 2, 4, 4)], [(1, 2, 8, 8)])
    assert FVCORE.graphprof_counts(row("Upsample"), up) == {"upsample_bilinear2d": 4 * 128}
    near = record("aten.upsample_nearest2d", [(1, 2, 4, 4)], [(1, 2, 8, 8)])
    assert FVCORE.graphprof_counts(row("Upsample"), near) == {"upsample_nearest2d": 128}
    grid = record("aten.grid_sampler_2d", [(1, 2, 8, 8), (1, 3, 3, 2)], [(1, 2, 3, 3)])
    assert FVCORE.graphprof_counts(row("grid_sample"), grid) == {"grid_sampler": 4 * 18}


def test_adaptive_pool_to_one_is_a_mean_only_inside_an_adaptive_pool():
    mean = record("aten.mean", [(1, 16, 7, 7)], [(1, 16, 1, 1)], flops=800)
    assert FVCORE.graphprof_counts(row("AdaptiveAvgPool2d"), mean) == {"adaptive_avg_pool2d": 784}  # 16 * 7 * 7
    assert FVCORE.graphprof_counts(row("adaptive_avg_pool2d"), mean) == {"adaptive_avg_pool2d": 784}
    assert FVCORE.graphprof_counts(row("mean"), mean) == {}  # x.mean((2, 3)): aten::mean, unsupported by fvcore


def test_encoder_layer_fast_path_splits_into_products_and_norms():
    shapes = [(1, 4, 16)] + [(48, 16), (48,), (16, 16), (16,)] + [(16,)] * 4 + [(32, 16), (32,), (16, 32), (16,)]
    tel = record("aten._transformer_encoder_layer_fwd", shapes, [(1, 4, 16)], macs=8704)
    assert FVCORE.graphprof_counts(row("TransformerEncoderLayer"), tel) == {"matmul": 8704, "layer_norm": 640}


def test_reference_keys_map_onto_groups():
    assert [FVCORE.reference_group(k) for k in ("conv", "linear", "addmm", "einsum", "instance_norm", "layer_norm")] == [
        "conv", "matmul", "matmul", "matmul", "batch_norm", "layer_norm"
    ]  # fmt: skip
    assert TORCH.reference_group("aten.convolution") == "conv"
    assert TORCH.reference_group("aten.baddbmm") == "matmul"


def test_left_out_probes_by_hand():
    # SDPA: batch 1 x 2 heads x 4 queries, 6 keys, E = Ev = 8: 8 rows x 6 x (8 + 8) = 768
    assert LEFT_OUT["scaled_dot_product_attention"].counts([(1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8)], [], FVCORE) == {"matmul": 768}
    # nn.MultiheadAttention fused: 4 tokens, D = 16: projections 1 x (4 + 4 + 4 + 4) x 16 x 16 = 4096; products 2 x 4 x 4 x 16 = 512
    assert LEFT_OUT["_native_multi_head_attention"].counts([(1, 4, 16), (1, 4, 16), (1, 4, 16)], [], FVCORE) == {"matmul": 4608}
    # conv, padding="same": 1 x 8 x 8 x 8 outputs x 3 x 3 x 3 = 13824, counted in conv
    conv = LEFT_OUT["_convolution_mode"].counts([(1, 3, 8, 8), (8, 3, 3, 3), (8,)], [(1, 8, 8, 8)], FVCORE)
    assert conv == {"conv": 13824}
    # under torch's convention a MAC is 2 FLOPs
    assert LEFT_OUT["mv"].counts([(5, 7), (7,)], [(5,)], TORCH) == {"matmul": 70}  # 2 x 5 x 7


# --------------------------------------------------------------------------------------------------
# Whole models


class TinyAttention(nn.Module):
    """Convolutions (one with padding="same"), norms, resampling, pooling, a linear, and attention."""

    def __init__(self):
        super().__init__()
        self.same = nn.Conv2d(3, 8, 3, padding="same")
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.bn = nn.BatchNorm2d(8)
        self.gn = nn.GroupNorm(2, 8)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.proj = nn.Linear(32, 64)
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        y = self.gn(self.bn(self.up(self.same(x))))  # 1 x 8 x 16 x 16
        y = F.interpolate(y, scale_factor=2, mode="bilinear") + F.interpolate(y, scale_factor=2, mode="nearest")
        t = self.ln(self.proj(self.pool(y).flatten(1)).view(1, 4, 16))  # 4 tokens of 16
        q = t.view(1, 4, 2, 8).transpose(1, 2)  # 2 heads of 8
        a = F.scaled_dot_product_attention(q, q, q)
        return torch.einsum("bhld,bhmd->bhlm", a, a).sum() + y.mean()


@pytest.fixture(scope="module")
def tiny_fvcore():
    torch.manual_seed(0)
    return crosscheck_model(TinyAttention().eval(), input_shape=(1, 3, 8, 8), against="fvcore")


def test_tiny_model_every_difference_is_named(tiny_fvcore):
    c = tiny_fvcore
    assert c.status(tolerance=0.0) is Status.EXPLAINED
    assert c.unexplained == 0 and all(g.unexplained == 0 for g in c.groups)
    left_out = {e.name: e.amount for e in c.explanations() if e.kind == "left_out"}
    # padding="same": 1 x 8 x 8 x 8 x 27 = 13824; SDPA: 2 heads x 4 x 4 x (8 + 8) = 512
    assert left_out == {"aten::_convolution_mode": 13824, "aten::scaled_dot_product_attention": 512}
    assert c.difference == c.explained == 13824 + 512
    groups = {g.group: g for g in c.groups}
    assert groups["conv"].reference == 16384  # the transposed conv alone: 8 x 8 x 8 inputs x 8 x 2 x 2
    assert groups["upsample_bilinear2d"].graphprof == groups["upsample_bilinear2d"].reference == 4 * 8 * 32 * 32
    assert groups["group_norm"].graphprof == 5 * 8 * 16 * 16
    assert groups["batch_norm"].graphprof == 2 * 8 * 16 * 16
    # invariants: groups sum to the totals, shares and accuracy add up to 100%
    assert c.graphprof_count == sum(g.graphprof for g in c.groups)
    assert c.reference_count == sum(g.reference for g in c.groups)
    shares = sum(100 * e.amount / c.reference_count for e in c.explanations())
    assert c.accuracy == pytest.approx(100 - shares)


def test_probes_leave_fvcores_own_count_unchanged(tiny_fvcore):
    from fvcore.nn import FlopCountAnalysis

    torch.manual_seed(0)
    model, x = TinyAttention().eval(), torch.randn(1, 3, 8, 8)
    plain = FlopCountAnalysis(model, (x,)).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    counts = count_with_fvcore(model, (x,), {})
    assert counts.total == plain.total() == tiny_fvcore.reference_count
    assert {o.op: o.count for o in counts.counted} == dict(plain.by_operator())
    assert "aten::scaled_dot_product_attention" in plain.unsupported_ops()


def test_tiny_model_against_torch():
    torch.manual_seed(0)
    model, x = TinyAttention().eval(), torch.randn(1, 3, 8, 8)
    c = crosscheck_model(model, example_inputs=(x,), against=Reference.TORCH)
    assert c.unit.startswith("FLOPs") and c.unexplained == 0
    assert c.graphprof_count == 2 * c.macs  # every contraction, 2 FLOPs per MAC
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as plain:
        model(x)
    assert c.reference_count == plain.get_total_flops()  # probes leave torch's own count unchanged
    # FlopCounterMode has no formula for the CPU flash kernel: 2 x 512 MACs
    assert {e.name: e.amount for e in c.explanations()} == {"aten._scaled_dot_product_flash_attention_for_cpu": 1024}


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_resnet18_agrees_exactly_both_ways():
    c = crosscheck_model("resnet18", input_shape=(1, 3, 64, 64))
    assert c.status(tolerance=0.0) is Status.AGREES and c.difference == 0
    groups = {g.group: g for g in c.groups}
    assert set(groups) == {"conv", "matmul", "batch_norm", "adaptive_avg_pool2d"}
    assert groups["matmul"].reference == 512 * 1000  # the classifier: 512 x 1000
    assert groups["adaptive_avg_pool2d"].reference == 512 * 2 * 2  # 64 px / 32 = 2 x 2 per channel
    assert c.macs == groups["conv"].graphprof + groups["matmul"].graphprof
    t = crosscheck_model("resnet18", input_shape=(1, 3, 64, 64), against="torch")
    assert t.difference == 0 and t.reference_count == 2 * c.macs


@pytest.mark.slow  # about 4 s
def test_mobilenet_v3_small_agrees():
    # hardswish / squeeze-excitation: the SE pools are AdaptiveAvgPool2d(1), a mean at dispatch
    c = crosscheck_model("mobilenet_v3_small", input_shape=(1, 3, 64, 64))
    assert c.status(tolerance=0.0) is Status.AGREES, [describe(e, c) for e in c.explanations()]
    assert any(o.op == "aten.mean" for g in c.groups for o in g.graphprof_ops if g.group == "adaptive_avg_pool2d")


class Contractions(nn.Module):
    def forward(self, a, b, w):
        # einsum of 3 x 17 x 19 x 23 = 22287 MACs: numpy's einsum_path estimates "4.458e+04" flops, fvcore 22290
        e = torch.einsum("bij,bjk->bik", a, b)
        # (17 x 19) @ (3 x 19 x 23): 3 x 17 x 19 x 23 MACs; fvcore multiplies out the first operand only
        m = torch.matmul(a[0], b)
        return e.sum() + m.sum() + torch.baddbmm(e, a, b).sum() + (w @ w).sum()


def test_fvcore_approximations_are_measured_and_named():
    torch.manual_seed(0)
    a, b, w = torch.randn(3, 17, 19), torch.randn(3, 19, 23), torch.randn(4, 4)
    c = crosscheck_model(Contractions(), example_inputs=(a, b, w))
    causes = {(e.kind, e.name): e.amount for e in c.explanations()}
    assert causes == {
        ("estimated", "aten::einsum"): 22287 - 22290,
        ("broadcast", "aten::matmul"): 22287 - 17 * 19 * 23,
        ("left_out", "aten::baddbmm"): 22287,
    }
    assert c.unexplained == 0 and c.status(tolerance=0.0) is Status.EXPLAINED


def test_model_is_left_as_found():
    model = TinyAttention().train()
    model.proj.weight.requires_grad_(False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    crosscheck_model(model, input_shape=(1, 3, 8, 8))
    assert model.training and model.bn.training and not model.proj.weight.requires_grad
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_missing_fvcore_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "fvcore", None)
    with pytest.raises(MissingDependencyError, match="pip install"):
        count_with_fvcore(nn.Linear(2, 2), (torch.randn(1, 2),), {})


def test_torch_reference_runs_without_fvcore(monkeypatch):
    monkeypatch.setitem(sys.modules, "fvcore", None)
    counts = count_with_torch(nn.Linear(3, 5), (torch.randn(2, 3),), {})
    assert counts.total == 2 * 2 * 3 * 5


# --------------------------------------------------------------------------------------------------
# Results, statuses and renderings


def _check(**groups):
    return CrossCheck("m", "fvcore", unit="fvcore flops (1 per MAC)", groups=tuple(groups.values()))


def test_status_follows_the_tolerance():
    exact = _check(conv=GroupComparison("conv", 1000, 1000))
    assert exact.status(0.0) is Status.AGREES and exact.accuracy == 100.0
    explained = _check(
        m=GroupComparison("matmul", 1100, 1000, explained=100, adjustments=(Adjustment("aten::x", 100, "left_out", "matmul", 1),))
    )
    assert explained.status(1.0) is Status.EXPLAINED and explained.accuracy == pytest.approx(90.0)
    off = _check(conv=GroupComparison("conv", 1012, 1000))
    assert off.status(1.0) is Status.DIFFERS and off.status(1.5) is Status.AGREES and not off.agrees(1.0)
    assert [e.kind for e in off.explanations()] == ["unexplained"]
    failed = CrossCheck("m", "fvcore", error="boom")
    assert failed.status() is Status.FAILED and not failed.agrees()


def test_renderings(tiny_fvcore, tmp_path):
    from rich.console import Console

    results = [tiny_fvcore, CrossCheck("broken", "fvcore", error="unknown model 'broken'")]
    console = Console(width=200, record=True)
    console.print(render_comparison(results, tolerance=1.0))
    console.print(render_details(tiny_fvcore))
    text = console.export_text()
    assert "FLOP comparison: graphprof vs fvcore" in text
    assert "aten::scaled_dot_product_attention x1 left out by fvcore" in text
    assert "unknown model 'broken'" in text and "1 of 2 agree within 1%" in text
    document = json.loads(render_json(results, 1.0))
    assert document["summary"] == {"models": 2, "agrees": 0, "explained": 1, "differs": 0, "failed": 1}
    assert document["models"][0]["unexplained"] == 0
    lines = render_csv(results, 1.0).splitlines()
    assert len(lines) == 3 and lines[0].startswith("model,family,input,reference,status")
    assert render_markdown(results, 1.0).count("\n") == 4


def test_names_are_not_read_as_markup_or_emoji():
    from rich.console import Console

    check = CrossCheck("hf:llama", "fvcore", groups=(GroupComparison("matmul[x]", 10, 10),))
    console = Console(width=120, record=True)
    console.print(render_comparison([check], tolerance=1.0))
    console.print(render_details(check))
    text = console.export_text()
    assert "hf:llama: per-op comparison" in text and "matmul[x]" in text


# --------------------------------------------------------------------------------------------------
# Selection, batches, the CLI and the seed's path


def test_select_models():
    assert select_models(["resnet18,resnet50", "resnet18"]) == ["resnet18", "resnet50"]
    assert select_models([]) == ["resnet18"]
    assert "resnet18" in select_models(family="classification") and "yolov8n" not in select_models(family="classification")
    with pytest.raises(InvalidInputError, match="classification"):
        select_models(family="clasification")
    with pytest.raises(ModelNotFoundError, match="resnet18"):
        select_models(["resnet19"])


def test_a_failing_model_does_not_stop_the_batch():
    results = dict(iter_crosschecks(["not_a_model", "resnet18"], input_shape=(1, 3, 32, 32)))
    assert results[0].status() is Status.FAILED and "unknown model" in results[0].error
    assert results[1].status() is Status.AGREES


def test_cli_validate_verbose_and_output(tmp_path):
    out = tmp_path / "v.json"
    result = invoke("--model", "resnet18", "--input-shape", "1", "3", "64", "64", "--verbose", "--output", str(out))
    assert result.exit_code == 0, result.output
    assert "agrees" in result.output and "per-op comparison" in result.output
    assert json.loads(out.read_text())["models"][0]["model"] == "resnet18"


def test_cli_a_failed_row_makes_the_exit_non_zero(tmp_path):
    out = tmp_path / "v.csv"
    # a 3-d input shape cannot feed resnet18: its row fails, squeezenet1_1's is still checked
    result = invoke("--models", "resnet18,squeezenet1_1", "--input-shape", "1,3,32", "--output", str(out))
    assert result.exit_code == DISAGREE_EXIT, result.output
    assert "failed" in result.output and "Traceback" not in result.output
    assert len(out.read_text().splitlines()) == 3


def test_cli_against_torch_and_errors():
    result = invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--against", "torch")
    assert result.exit_code == 0, result.output
    assert "graphprof vs torch FlopCounterMode" in result.output
    unknown = invoke("--models", "resnet19")
    assert unknown.exit_code == 3 and "did you mean" in unknown.output


@pytest.mark.slow  # a subprocess with parallel jobs, about 25 s
def test_seed_script_path_with_parallel_jobs(tmp_path):
    script = ROOT / "cli" / "profile_graph_with_fvcore.py"
    out = tmp_path / "v.json"
    argv = ["--models", "resnet18,squeezenet1_1", "--input-shape", "1", "3", "32", "32", "--jobs", "2", "-o", str(out)]
    env = {**os.environ, "COLUMNS": "200"}  # whole names; narrower widths fold them
    done = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FLOP COMPARISON: Our Estimator vs fvcore" in done.stdout and "squeezenet1_1" in done.stdout  # the seed's labels
    document = json.loads(out.read_text())
    assert [m["model"] for m in document["models"]] == ["resnet18", "squeezenet1_1"]  # input order, not finish order
    assert document["summary"]["agrees"] == 2
