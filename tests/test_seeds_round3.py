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


def test_seed_script_runs_from_the_seeds_path() -> None:
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "scripts/profile_model.py", "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--profile" in done.stdout and "--hidden_dim" in done.stdout
