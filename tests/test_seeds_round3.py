"""Issue 32, the seeds' round two, the rest: seed 004's printed results (item 3), seed 003's traces
(item 5), seed 002's registry and labels (item 6), and MultiheadAttention's out_proj (item 8)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from rich.console import Console
from torch import nn

from graphprof.formulas.cost import Cost
from graphprof.gnn.components import COMPONENTS, ComponentCosts
from graphprof.gnn.scaling import GraphPoint, GraphScalingResult
from graphprof.measure.timing import RuntimeStats
from graphprof.render.graph_models import render_graph_scaling
from graphprof.render.table import format_percent

ROOT = Path(__file__).resolve().parents[1]


def _piped(renderable: object, width: int = 80) -> str:
    """What a pipe (a file, not a terminal) of ``width`` columns shows."""
    out = io.StringIO()
    Console(file=out, width=width).print(renderable)
    return out.getvalue()


def _graph_result(parameter: str, spreads: tuple[float, ...] = (1.0, 62.15, 1.0)) -> GraphScalingResult:
    """A graph transformer's five components at three points, each FLOPs figure 6-7 characters wide."""
    points = []
    for i, (n, std) in enumerate(zip((100, 200, 400), spreads, strict=True)):
        scale = 1 if parameter == "num_nodes" else i + 1
        costs = {c: Cost(flops=0 if c in ("mpnn", "pe") else 911_363 * (k + 1) * n * scale // 100) for k, c in enumerate(COMPONENTS)}
        value = n if parameter == "num_nodes" else i + 1
        runtime = RuntimeStats(mean=49.44, std=std, min=1.0, max=200.0, num_runs=10)
        points.append(GraphPoint(value, n if parameter == "num_nodes" else 500, 5 * n, 1000, ComponentCosts(costs), runtime))
    return GraphScalingResult("pyg:graph_transformer", parameter, tuple(points))


# ---- item 3: seed 004's printed results ------------------------------------------------------------------
@pytest.mark.parametrize("parameter", ["num_nodes", "num_layers"])
def test_graph_scaling_at_80_columns_in_a_pipe_cuts_no_cell(parameter: str) -> None:
    """Every cell, every forward time among them, is whole at 80 columns (before: 22 cells cut to ``…``)."""
    text = _piped(render_graph_scaling(_graph_result(parameter)))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("49.44") == 3 and "62.15" in text


def test_a_noisy_forward_is_flagged_as_the_main_command_flags_it() -> None:
    text = _piped(render_graph_scaling(_graph_result("num_nodes")))
    assert "62.15 *" in text and "noisy" in text and "over 10%" in text
    quiet = _piped(render_graph_scaling(_graph_result("num_nodes", (1.0, 2.0, 3.0))))
    assert "noisy" not in quiet and "*" not in quiet


def test_a_near_zero_share_prints_zero_never_minus_zero() -> None:
    assert format_percent(-1e-9) == "0.0%" and format_percent(-0.0004) == "0.0%" and format_percent(0.1234) == "12.3%"
    text = _piped(render_graph_scaling(_graph_result("num_layers")), width=200)
    assert "-0.0%" not in text
    assert "x² term" not in text  # the node-pair split is about nodes, not depth


def test_node_scaling_still_splits_attention_over_node_pairs() -> None:
    text = _piped(render_graph_scaling(_graph_result("num_nodes")), width=200)
    assert "the x² term (scores over all node pairs) is 0.0% of attention" in text


def test_sweep_table_at_80_columns_in_a_pipe_cuts_no_cell(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``ScalingExperiment.print_summary()`` of a plain sweep, to a pipe with ``COLUMNS=80``."""
    from graphprof.compat.scaling import ScalingExperiment

    def make(hidden_dim: int = 64, num_layers: int = 2) -> nn.Module:
        return nn.Sequential(*[nn.Linear(16 if i == 0 else hidden_dim, hidden_dim) for i in range(num_layers)])

    monkeypatch.setenv("COLUMNS", "80")
    experiment = ScalingExperiment(make, "cpu", input_shape=(1, 16), hardware="h100")
    experiment.run("hidden_dim", [64, 128, 256])
    capsys.readouterr()
    experiment.print_summary()
    text = capsys.readouterr().out
    assert "…" not in text and "hidden" in text and "Est." in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_seed_script_flags_a_noisy_run() -> None:
    from graphprof_cli.seed_profile import _summary

    report = {
        "model_info": {"total_parameters": 10, "parameter_memory_mb": 0.0},
        "runtime": {"forward": {"mean": 49.44, "std": 62.15, "num_runs": 10}, "backward": {"mean": 10.0, "std": 0.5, "num_runs": 10}},
    }  # fmt: skip
    lines = _summary(report)
    assert "noisy" in lines[1] and "126%" in lines[1] and "over 10%" in lines[1]
    assert "noisy" not in lines[2]


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_pyg_import_is_silent_and_leaves_the_users_filters_alone() -> None:
    """PyG's ``torch.jit.script`` deprecation is silenced where graphprof imports PyG, and only there."""
    pytest.importorskip("torch_geometric")
    code = (
        "import warnings; before = list(warnings.filters)\n"
        "from graphprof.models.pyg_import import import_pyg; import_pyg()\n"
        "assert warnings.filters == before, 'the filters changed'\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "cli")])}
    done = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "jit.script" not in done.stderr
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("`torch.jit.script` is deprecated, the user's own", FutureWarning, stacklevel=1)
    assert len(seen) == 1  # the filter was not left behind


def test_the_pyg_extra_installs_scipy_for_the_laplacian_pe() -> None:
    pyg = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines() if line.startswith("pyg = ["))
    assert '"scipy' in pyg.partition("]")[0]  # tomllib is 3.11+, and the extra is one line


def test_laplacian_pe_precompute_runs() -> None:
    pytest.importorskip("scipy")
    transforms = pytest.importorskip("torch_geometric.transforms")
    from graphprof.compat.seed004_profiling import profile_pe_computation
    from graphprof.models.graphs import random_graph

    data = random_graph(60, avg_degree=4, feature_dim=8, seed=0).to_data()
    stats = profile_pe_computation(transforms.AddLaplacianEigenvectorPE(k=4, attr_name="pe"), data, num_runs=2)
    assert stats.num_runs == 2 and stats.mean > 0


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_seed_script_runs_from_the_seeds_path() -> None:
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "scripts/profile_model.py", "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--profile" in done.stdout and "--hidden_dim" in done.stdout


# ---- item 5: seed 003's traces ---------------------------------------------------------------------------
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
    graphprof.prepare(model, example_inputs=(torch.randn(8, 16),)).measure(device="cpu", trace_dir=tmp_path, iters=2, warmup=1, layer_runs=1)
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


# ---- item 8: parameters an op reads though their module never runs -------------------------------------
def test_multihead_attention_out_proj_is_used_in_the_eager_capture() -> None:
    """``nn.MultiheadAttention`` hands ``out_proj.weight`` to ``F.multi_head_attention_forward``, so
    ``out_proj`` never runs as a module: its 64 * 64 + 64 = 4,160 parameters are used all the same
    (before: "4,172 parameters are not used"); a Linear(3, 3) that nothing reads (12) still is not."""
    import graphprof

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
            self.unused = nn.Linear(3, 3)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return self.attn(x, x, x)[0]

    profile = graphprof.profile_model(Attn(), input_shape=(1, 10, 64), methods=("eager",))
    assert profile.graph_params == profile.total_params - 12
    assert next(r for r in profile.layers if r.name == "attn").params == 3 * 64 * 64 + 3 * 64 + 4_160
    assert "12 parameters are not used by the captured forward pass" in profile.notes


# ---- item 6: seed 002's model registry ------------------------------------------------------------------
def test_a_model_registered_the_seeds_way_profiles_from_the_command_line(tmp_path: Path) -> None:
    """Seed 002: ``MODEL_REGISTRY['my_model'] = lambda: MyModel()`` in the user's file, then
    ``--model my_models.py:MODEL_REGISTRY[my_model]`` (before: "has no attribute")."""
    import json

    from typer.testing import CliRunner

    from graphprof_cli.main import app

    (tmp_path / "my_models.py").write_text(
        "import torch.nn as nn\n\n"
        "class MyModel(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))\n\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n\n"
        "MODEL_REGISTRY = {}\n"
        "MODEL_REGISTRY['my_model'] = lambda: MyModel()\n"
    )
    spec = f"{tmp_path / 'my_models.py'}:MODEL_REGISTRY[my_model]"
    done = CliRunner().invoke(app, ["--model", spec, "--input-shape", "1,8", "--output", "-", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout[done.stdout.index("{"):])["total_params"] == 8 * 16 + 16 + 16 * 2 + 2
    missing = CliRunner().invoke(app, ["--model", spec.replace("[my_model]", "['other']"), "--input-shape", "1,8"])
    assert missing.exit_code != 0 and "no entry 'other'" in missing.output and "my_model" in missing.output
