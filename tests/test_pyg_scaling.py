"""Node and layer scaling of graph models: attention grows as N², message passing as N, measured mean ± std."""

from __future__ import annotations

import pytest
import torch

from graphprof.gnn.scaling import run_graph_scaling

pytest.importorskip("torch_geometric")

NODES = [100, 200, 400, 800, 1600]


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_gps_node_sweep_attention_quadratic_message_passing_linear() -> None:
    result = run_graph_scaling("pyg:gps?num_layers=1&hidden_dim=32&num_heads=2", "num_nodes", NODES, avg_degree=5)
    assert result.parameter_values == NODES and result.runtime_stats == []
    fits = result.fits()  # GIN's (1 + eps) is one scalar FLOP a layer: exponents 1 within 1e-5, not exactly
    for linear in ("mpnn", "ffn", "norm"):
        assert fits[linear].exponent == pytest.approx(1.0, abs=1e-5) and fits[linear].r2 == pytest.approx(1.0)
    quad = result.fit_quadratic("attention")
    # one layer, d = 32: Q K^T and P V are 2 x N^2 x 32 MACs = 128 N^2 FLOPs; softmax and scale add 7 per
    # score per head (2 heads): 14 N^2; so 142 N^2, and the projections are linear in N
    assert quad.quadratic == pytest.approx(142, rel=1e-9) and quad.r2 == pytest.approx(1.0)
    assert quad.quadratic_share(1600) > 0.85
    # between the last two points the attention grows almost as N^2 (the linear projections fade)
    xs, ys = result.series("attention")
    assert 1.8 < (torch.tensor(ys[-1] / ys[-2]).log2().item()) <= 2.0


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_gin_node_sweep_is_linear() -> None:
    result = run_graph_scaling("pyg:gin?num_layers=2", "num_nodes", NODES[:4])
    fits = result.fits()
    assert fits["mpnn"].exponent == pytest.approx(1.0, abs=1e-5)
    assert fits["total"].exponent == pytest.approx(1.0, abs=1e-5)
    assert "attention" not in result.components


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_layer_sweep_is_linear_in_depth() -> None:
    result = run_graph_scaling("pyg:gcn", "num_layers", [1, 2, 4], num_nodes=100)
    flops = [p.costs.flops("mpnn") for p in result.points]
    assert flops[1] == 2 * flops[0] and flops[2] == 4 * flops[0]


@pytest.mark.slow
def test_measured_cpu_runtime_per_point_with_mean_and_std() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the shared machine: two threads stall each other under load
    try:
        result = run_graph_scaling("pyg:gin?num_layers=2", "num_nodes", [100, 400, 1600], measure=True, num_runs=5, warmup_runs=1)
    finally:
        torch.set_num_threads(threads)
    assert len(result.runtime_stats) == 3
    for stats in result.runtime_stats:
        assert stats.mean > 0 and stats.std >= 0 and stats.num_runs >= 2 and stats.min <= stats.mean <= stats.max
    assert result.to_dict()["points"][0]["runtime"]["unit"] == "ms"


@pytest.mark.slow
def test_cli_node_sweep_prints_fits_per_component() -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["sweep", "--model", "pyg:gps?num_layers=1&hidden_dim=32&num_heads=2", "--nodes", "100:800:x2"])
    assert result.exit_code == 0, result.output
    assert "mpnn: exponent 1.00 (linear)" in result.output and "x² term" in result.output
