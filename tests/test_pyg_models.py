"""The pyg: model family, graph inputs, datasets, the seed's estimators and the estimate-vs-count comparison."""

from __future__ import annotations

import json

import pytest
import torch

import graphprof
import graphprof.gnn.estimate as seed_estimate
from graphprof.errors import DownloadUnavailableError, InvalidInputError, ModelNotFoundError
from graphprof.models.graphs import edge_count, graph_args, random_graph

pyg = pytest.importorskip("torch_geometric")


# ---- synthetic graphs -------------------------------------------------------------------------------------


def test_random_graph_is_deterministic_and_sized() -> None:
    a = random_graph(200, avg_degree=5, feature_dim=8, seed=3)
    b = random_graph(200, avg_degree=5, feature_dim=8, seed=3)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert (a.num_nodes, a.num_edges, tuple(a.x.shape)) == (200, 1000, (200, 8))  # E = N x degree
    assert not torch.equal(a.edge_index, random_graph(200, avg_degree=5, feature_dim=8, seed=4).edge_index)
    assert bool((a.edge_index[0] != a.edge_index[1]).all())  # no self-loops
    assert int(a.edge_index.max()) < 200


def test_random_graph_leaves_the_global_rng_alone() -> None:
    state = torch.get_rng_state()
    random_graph(50, seed=1)
    assert torch.equal(state, torch.get_rng_state())


def test_edge_count_and_bad_sizes() -> None:
    assert edge_count(500, avg_degree=5) == edge_count(500, num_edges=2500) == 2500
    with pytest.raises(InvalidInputError, match="not both"):
        edge_count(10, avg_degree=2, num_edges=20)
    with pytest.raises(InvalidInputError, match="positive"):
        random_graph(0)


def test_graph_args_from_data_and_batch() -> None:
    data = random_graph(10, pe_dim=4).to_data()
    args, kwargs = graph_args(data)
    assert args[0] is data.x and args[1] is data.edge_index and set(kwargs) == {"pe"}
    batch = pyg.data.Batch.from_data_list([random_graph(10).to_data(), random_graph(7).to_data()])
    args, kwargs = graph_args(batch)
    assert args[0].shape[0] == 17 and set(kwargs) == {"batch"}


# ---- the model family -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["gps", "graph_transformer", "gin", "gat", "gcn"])
def test_every_architecture_builds_and_runs_on_tensors_and_data(arch: str) -> None:
    from graphprof.models.pyg import build_graph_model

    model = build_graph_model(arch, hidden_dim=16, num_layers=2, num_heads=2, in_dim=8).eval()
    graph = random_graph(30, feature_dim=8)
    with torch.no_grad():
        out = model(graph.x, graph.edge_index)
        assert torch.equal(out, model(graph.to_data()))
    assert out.shape == (30, 1)


def test_resolve_with_options_and_notes() -> None:
    from graphprof.models import resolve_model, spec_family

    r = resolve_model("pyg:gps?hidden_dim=32&num_layers=2&num_heads=4&ffn_dim=48&pe_dim=8&num_nodes=120&avg_degree=3")
    assert spec_family("pyg:gps") == "pyg" and r.family == "pyg"
    assert r.model.config.ffn_width == 48 and r.model.layers[0].gps.mlp[0].out_features == 48
    assert tuple(r.args[0].shape) == (120, 16) and tuple(r.args[1].shape) == (2, 360) and tuple(r.kwargs["pe"].shape) == (120, 8)
    assert any("120 nodes, 360 edges" in note for note in r.notes)


def test_resolve_errors_are_one_line() -> None:
    from graphprof.models import resolve_model

    with pytest.raises(ModelNotFoundError, match="pyg:gps"):
        resolve_model("pyg:gpss")
    with pytest.raises(InvalidInputError, match="unknown option width"):
        resolve_model("pyg:gin?width=3")
    with pytest.raises(InvalidInputError, match="not divisible"):
        resolve_model("pyg:gat?hidden_dim=30&num_heads=4")
    with pytest.raises(InvalidInputError, match="--nodes"):
        resolve_model("pyg:gin", batch_size=4)


def test_list_models_knows_pyg_without_building() -> None:
    from graphprof.models import list_models

    assert [m.name for m in list_models("pyg")] == ["pyg:gps", "pyg:graph_transformer", "pyg:gin", "pyg:gat", "pyg:gcn"]


def test_components_sum_to_the_total_and_gin_has_no_attention() -> None:
    import graphprof
    from graphprof.gnn.components import component_costs

    pm = graphprof.prepare("pyg:gin?num_nodes=200&num_layers=2")
    profile = pm.profile()
    costs = component_costs(profile, pm.model)
    assert costs.total.flops == profile.total_flops and costs.total.macs == profile.total_macs
    assert costs.flops("attention") == 0 and costs.flops("mpnn") > 0
    # 2 GIN layers, each: aggregate 1000 edges x 64 = 64,000 adds; (1 + eps) x: 1 + 12,800 (scalar add, then
    # a multiply per element); + x: 12,800; MLP 2 x (2 x 200 x 64 x 64 + 12,800 bias) + ReLU 12,800
    per_layer = 64_000 + 1 + 12_800 + 12_800 + 2 * (2 * 200 * 64 * 64 + 12_800) + 12_800
    assert costs.flops("mpnn") == 2 * per_layer


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_a_user_pyg_model_with_data_inputs() -> None:
    """A model of the user's own (a bare GCNConv) profiled through the API with a PyG Data's tensors."""
    import graphprof

    data = pyg.datasets.KarateClub()[0]  # ships with PyG: 34 nodes, 156 edges, 34 features
    conv = pyg.nn.GCNConv(34, 8)
    profile = graphprof.profile_model(conv, example_inputs=graph_args(data)[0])
    assert profile.unsupported == ()
    # the linear: 34 x 34 x 8 = 9,248 MACs; the normalised aggregation adds no MACs
    assert profile.total_macs == 34 * 34 * 8


def test_datasets_karate_and_download_error() -> None:
    from graphprof.gnn.datasets import load_graph

    assert load_graph("KarateClub").num_nodes == 34
    with pytest.raises(DownloadUnavailableError, match="--data-root") as info:
        load_graph("peptides_func")
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInputError, match="unknown graph dataset"):
        load_graph("imaginary")


# ---- the seed's estimators ---------------------------------------------------------------------------------


def test_estimators_by_hand() -> None:
    assert seed_estimate.estimate_linear_flops(16, 32, 2, 3) == 2 * 2 * 3 * 16 * 32  # 6,144
    # QKV + out 8 N d^2 = 8*100*32^2 = 819,200; scores + weighted sum 4 N^2 d = 1,280,000; softmax 5 N^2 h = 200,000
    assert seed_estimate.estimate_attention_flops(100, 32, 4) == 819_200 + 1_280_000 + 200_000
    assert seed_estimate.estimate_attention_flops(100, 32, 4, sparse_ratio=0.5) == 819_200 + 640_000 + 100_000
    assert seed_estimate.estimate_ffn_flops(32, 64, 100) == 4 * 100 * 32 * 64 + 4 * 100 * 64  # 819,200 + 25,600
    assert seed_estimate.estimate_mpnn_flops(100, 500, 32, 32, "gin") == 500 * 32 + 2 * (2 * 100 * 32 * 32)  # 425,600
    assert seed_estimate.estimate_mpnn_flops(100, 500, 32, 32, "gcn") == 2 * 100 * 32 * 32 + 2 * 500 * 32  # 236,800
    assert seed_estimate.estimate_pe_flops(30, 8, "lap") == 4 * 30**3 // 3 == 36_000
    assert seed_estimate.estimate_pe_flops(30, 8, "none") == 0
    with pytest.raises(InvalidInputError, match="mpnn_type"):
        seed_estimate.estimate_mpnn_flops(1, 1, 1, 1, "sage")


def test_estimate_model_flops_is_the_sum_of_its_breakdown() -> None:
    e = seed_estimate.estimate_model_flops(num_nodes=500, num_edges=2500, hidden_dim=256, num_layers=6, num_heads=8, ffn_dim=512)
    assert e.total == sum(e.breakdown.values()) == 5_545_824_000  # 6 x 924,304,000 (see estimate.py)
    assert set(e.breakdown) >= {"attention", "ffn", "mpnn", "pe"}


def test_flops_estimator_reads_a_pyg_model() -> None:
    from graphprof.models.pyg import build_graph_model

    model = build_graph_model("gps", hidden_dim=32, num_layers=3, num_heads=4)
    estimator = seed_estimate.FLOPsEstimator(model)
    assert estimator.hyperparameters["ffn_dim"] == 64 and estimator.hyperparameters["num_layers"] == 3
    assert estimator.count_parameters() == sum(p.numel() for p in model.parameters())
    assert estimator.estimate(100, 500).total == seed_estimate.estimate_model_flops(100, 500, 32, 3, 4, 64).total


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_comparison_of_the_readme_graph_transformer() -> None:
    """The README's side-by-side: the seed's example arguments and the matching pyg:graph_transformer."""
    from graphprof.gnn.compare import compare_graph_model

    c = compare_graph_model("pyg:graph_transformer?hidden_dim=256&num_layers=6&num_heads=8&ffn_dim=512&num_nodes=500&num_edges=2500")
    rows = {r.component: r for r in c.rows}
    assert c.estimated_total == 5_545_824_000
    assert rows["mpnn"].counted_flops == 0 and "attention along the edges" in rows["mpnn"].reason
    assert "E/N² = 1.00%" in rows["attention"].reason
    # ffn: the products are the seed's exactly (6 x 4 x 500 x 256 x 512 = 1,572,864,000); the rest is bias and GELU
    assert 1_572_864_000 < rows["ffn"].counted_flops < rows["ffn"].estimated_flops * 1.01
    assert c.counted_total == sum(r.counted_flops for r in c.rows)
    json.dumps(c.to_dict())


# ---- the command line --------------------------------------------------------------------------------------


def test_cli_graph_options_and_errors() -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    runner = CliRunner()
    result = runner.invoke(app, ["--model", "pyg:gin", "--nodes", "200", "--avg-degree", "2", "--width", "120"])
    assert result.exit_code == 0, result.output
    assert "200 nodes, 400 edges" in result.output and "unsupported" not in result.output.lower()
    result = runner.invoke(app, ["--model", "resnet18", "--nodes", "200"])
    assert result.exit_code == 2 and "apply to graph models" in result.output


@pytest.mark.parametrize("options", [{"batch_size": 2}, {"batch_size": 1}, {"input_shape": (4, 8)}])
def test_a_prepared_graph_model_refuses_a_batch_or_shape(options: dict) -> None:
    """``prepare("pyg:gin").profile(batch_size=2)`` was accepted: a graph has no batch dimension (the node
    count was resized instead: batch_size=1 profiled a graph of one node)."""
    prepared = graphprof.prepare("pyg:gin")
    with pytest.raises(InvalidInputError, match="takes a graph"):
        prepared.profile(**options)
    assert prepared.profile().total_macs > 0
