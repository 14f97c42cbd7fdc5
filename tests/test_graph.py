"""Module and operator graphs: edges against torch.fx, residual adds, the Profiler API, exports."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch
import torchvision
from torch import nn

import graphprof
from graphprof.compat.seed000 import Profiler  # the seed's: graph.stats() prints
from graphprof.errors import OutputError
from graphprof.graph import GraphBuilder, write_graph
from graphprof.graph.export import to_dot


def _fx_data_edges(model: nn.Module) -> int:
    """Edges between the computing nodes (and placeholders) of the model's symbolic_trace graph."""
    gm = torch.fx.symbolic_trace(model)
    return sum(
        sum(1 for a in n.all_input_nodes if a.op != "get_attr") for n in gm.graph.nodes if n.op not in ("output", "get_attr", "placeholder")
    )


@pytest.fixture(scope="module")
def resnet_graphs():
    model = torchvision.models.resnet18().eval()
    pm = graphprof.prepare(model, input_shape=(1, 3, 64, 64))
    builder = GraphBuilder(hardware=graphprof.get_hardware("h100"))
    pm.run([builder])
    return model, builder.module_graph("resnet18"), builder.detail_graph("resnet18")


def test_resnet18_module_graph_matches_fx_edges(resnet_graphs):
    model, graph, _ = resnet_graphs
    # fx: x -> conv1 -> ... 69 computing nodes; 8 adds read 2 nodes each and the rest 1: 69 + 8 = 77
    assert len(graph.edges) == _fx_data_edges(model) == 77
    assert len(graph.nodes) == 1 + 69
    assert graph.orphans() == [] and graph.components() == 1
    # parameters are credited once: resnet18 has 11,689,512
    assert sum(n.params for n in graph.nodes) == 11_689_512


def test_resnet18_residual_adds_have_two_inputs(resnet_graphs):
    _, graph, _ = resnet_graphs
    adds = [n for n in graph.nodes if n.type == "add"]
    assert len(adds) == 8
    for add in adds:
        assert len(graph.incoming(add.id)) == 2, add.name
    first = graph.node("layer1.0.add")
    assert sorted(graph.nodes[e.src].name for e in graph.incoming(first.id)) == ["layer1.0.bn2", "maxpool"]
    # the identity edge carries maxpool's output: 1 x 64 x 16 x 16 float32 = 65,536 bytes
    edge = next(e for e in graph.incoming(first.id) if graph.nodes[e.src].name == "maxpool")
    assert (edge.shape, edge.dtype, edge.bytes) == ((1, 64, 16, 16), "float32", 65_536)


def test_resnet18_costs_and_estimates_agree_with_profile(resnet_graphs):
    model, graph, detail = resnet_graphs
    profile = graphprof.profile_model(model, input_shape=(1, 3, 64, 64))
    assert sum(n.macs for n in graph.nodes) == sum(n.macs for n in detail.nodes) == profile.total_macs
    assert sum(n.flops for n in graph.nodes) == profile.total_flops
    conv1 = graph.node("conv1")
    # 64 x 32 x 32 outputs x 3 x 7 x 7 = 9,633,792 MACs
    assert conv1.macs == 9_633_792 and conv1.params == 9_408
    h100 = graphprof.get_hardware("h100")
    expected = max(conv1.flops / h100.peak_flops("float32"), conv1.bytes / h100.bandwidth) * 1e3
    assert conv1.estimated_ms == pytest.approx(expected) and conv1.measured_ms is None
    # the detail graph: no view op is a node (flatten is a view; fc's weight reaches addmm through t)
    assert not any(n.type in ("aten.view", "aten.t") for n in detail.nodes)
    addmm = next(n for n in detail.nodes if n.type == "aten.addmm")
    assert addmm.params == 512 * 1000 + 1000
    assert detail.orphans() == [] and detail.components() == 1


class _Split(nn.Module):
    def forward(self, x):
        return x[:, :2] * 2, x[:, 2:] + 1


class _Join(nn.Module):
    def forward(self, a, b):
        return a * b.sum(dim=1, keepdim=True)


class _TwoOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.split = _Split()
        self.join = _Join()

    def forward(self, x):
        a, b = self.split(x)
        n = x.dim()  # a metadata query: never a node
        return self.join(a, b) * n


def test_multi_output_module_keeps_every_output():
    pm = graphprof.prepare(_TwoOutputs(), input_shape=(2, 4), methods=["eager"])
    builder = GraphBuilder()
    pm.run([builder])
    graph = builder.module_graph()
    split, join = graph.node("split"), graph.node("join")
    between = [e for e in graph.edges if e.src == split.id and e.dst == join.id]
    # both outputs of split, each 2 x 2 float32 = 16 bytes, reach join
    assert [(e.shape, e.bytes) for e in between] == [((2, 2), 16), ((2, 2), 16)]
    detail = builder.detail_graph()
    assert not any("dim" in n.type or "slice" in n.type for n in detail.nodes)
    # x -> mul and x -> add pass through the two slices; sum reads add's output
    names = {n.id: n.name for n in detail.nodes}
    assert sorted(names[e.src] for e in detail.edges if names[e.dst] == "split:mul") == ["input"]
    assert sorted(names[e.src] for e in detail.edges if names[e.dst] == "join:sum") == ["split:add"]


def _tiny_llama(device: str):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    with torch.device(device):
        return transformers.LlamaForCausalLM(cfg)


@pytest.mark.slow  # over 1.5 s: the full suite runs it, the fast tier does not
def test_llama_detail_graph_crosses_both_residual_paths():
    model = _tiny_llama("meta")
    prof = Profiler(model.model, token_kwarg="input_ids", auto_profile=False)
    detail = prof.profile_detail(input_ids=torch.zeros(1, 8, dtype=torch.long))
    names = {n.id: n.name for n in detail.nodes}
    types = {n.type for n in detail.nodes}
    assert {"aten.mm", "aten.silu", "aten.mul", "aten.add"} <= types
    for layer in (0, 1):
        attn = [n for n in detail.nodes if n.module == f"layers.{layer}.self_attn"]
        # attention on the dry run: Q K^T and softmax(.) V (bmm, or one fused kernel) and a softmax
        assert any(n.type == "aten.bmm" or "attention" in n.type for n in attn)
        mlp = [n.type for n in detail.nodes if (n.module or "").startswith(f"layers.{layer}.mlp")]
        assert mlp.count("aten.mm") == 3 and "aten.silu" in mlp
        # residual 1: the stream entering the layer + o_proj; residual 2: residual 1 + down_proj
        attn_add, mlp_add = detail.node(f"layers.{layer}:add"), detail.node(f"layers.{layer}:add_1")
        stream = "embed_tokens:embedding" if layer == 0 else "layers.0:add_1"
        assert sorted(names[e.src] for e in detail.incoming(attn_add.id)) == sorted([stream, f"layers.{layer}.self_attn.o_proj:mm"])
        assert sorted(names[e.src] for e in detail.incoming(mlp_add.id)) == sorted([attn_add.name, f"layers.{layer}.mlp.down_proj:mm"])
    assert detail.orphans() == [] and detail.components() == 1
    assert len(detail.edges) > len(detail.nodes)


@pytest.mark.slow  # real runs of resnet18 through the Profiler, about 60 s
def test_seed_resnet18_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = torchvision.models.resnet18().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    prof = Profiler(model, granularity="layer", auto_profile=False, capture_ops=False)
    x = torch.randn(1, 3, 224, 224)
    prof.profile_once(x)
    prof.export("resnet18_profile", module_include_edges=True, include_stats=True, overwrite_module=True)
    prof.profile_detail(x)
    prof.export("resnet18_profile", detail_include_edges=True, include_stats=True, overwrite_module=False)
    prof.graph.stats()
    assert prof.detail_graph
    prof.detail_graph.stats()
    out = prof(x)
    assert out.shape == (1, 1000)
    text = (tmp_path / "resnet18_profile_module.txt").read_text()
    assert "[edges]" in text and "total_edges: 77" in text and "layer1.0.add" in text
    # real weights: the module graph carries each layer's measured forward time, as the edge profiler's does
    assert "measured_ms: total=" in text
    assert "measured_ms: total=" in (tmp_path / "resnet18_profile_detail.txt").read_text()
    assert all(n.measured_ms and n.measured_ms > 0 for n in prof.graph.nodes if n.type in ("Conv2d", "add"))
    assert "total_nodes: 69" in (tmp_path / "resnet18_profile_detail.txt").read_text()  # 68 ops + the input
    # the model is left as found: same weights, no hooks
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert set(prof.get_graphs()) == {"module_graph", "detail_graph"}


def test_seed_module_granularity_groups_by_top_level_submodules(tmp_path, monkeypatch, capsys):
    """The edge profiler's README: "module" is the coarser grouping by high-level submodules, and
    ``prof.graph.stats()`` prints the stats (and returns them)."""
    monkeypatch.chdir(tmp_path)
    prof = Profiler(torchvision.models.resnet18().eval(), granularity="module", auto_profile=False, measure=False)
    graph = prof.profile_once(torch.randn(1, 3, 224, 224))
    names = [n.name for n in graph.nodes]
    assert names == ["input", "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "flatten", "fc"]
    stats = prof.graph.stats()
    printed = capsys.readouterr().out
    assert stats["nodes"] == 12 and "total_nodes: 12" in printed and "total_edges: 11" in printed  # a chain
    assert prof.graph.stats(echo=False) == stats and capsys.readouterr().out == ""


@pytest.mark.slow  # the seed example, about 2 s
def test_seed_llama_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _tiny_llama("cpu")
    model.model = Profiler(model.model, granularity="module", token_kwarg="input_ids", auto_profile=False, capture_ops=False)
    dry_inputs = {"input_ids": torch.randint(0, 128, (1, 8)), "attention_mask": torch.ones(1, 8, dtype=torch.long)}
    model.model.profile_once(**dry_inputs)
    model.model.export("llama_profile", module_include_edges=True, include_stats=True, overwrite_module=True)
    model.model.profile_detail(**dry_inputs)
    model.model.export("llama_profile", detail_include_edges=True, include_stats=True, overwrite_module=False)
    module_text = (tmp_path / "llama_profile_module.txt").read_text()
    # "module": the decoder layers (through the ModuleList that holds them), not their leaves
    names = [n.name for n in model.model.graph.nodes]
    assert "layers.0" in names and "layers.1" in names and not any("down_proj" in n for n in names)
    assert "layers.1" in module_text and "[stats]" in module_text
    assert (tmp_path / "llama_profile_detail.txt").stat().st_size > 0
    assert model(**dry_inputs).logits.shape == (1, 8, 128)


def test_export_refuses_bad_paths_and_writes_nothing(tmp_path):
    prof = Profiler(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), auto_profile=True, capture_ops=True)
    with pytest.raises(graphprof.GraphprofError, match="nothing to export"):
        prof.export(tmp_path / "early")
    prof(torch.randn(2, 4))  # auto_profile: the first call builds the module graph
    assert len(prof.graph.edges) == 2  # input -> 0 -> 1
    assert [n.type for n in prof.detail_graph.nodes] == ["input", "aten.addmm", "aten.relu"]  # capture_ops: same pass
    with pytest.raises(OutputError, match="does not exist"):
        prof.export(tmp_path / "missing" / "p")
    existing = tmp_path / "p_module.txt"
    existing.write_text("keep me")
    # overwrite_module=False (the default): the existing module file stays, the detail file is written
    assert prof.export(tmp_path / "p") == [tmp_path / "p_detail.txt"]
    assert existing.read_text() == "keep me" and "[edges]" in (tmp_path / "p_detail.txt").read_text()
    with pytest.raises(graphprof.GraphprofError, match="base path"):
        prof.export("")
    prof.export(tmp_path / "p", overwrite_module=True)
    assert "[nodes]" in existing.read_text() and "[edges]" in (tmp_path / "p_detail.txt").read_text()
    with pytest.raises(OutputError, match="unknown graph format"):
        write_graph(prof.graph, tmp_path / "g.xml")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_dot_output_is_accepted_by_graphviz(resnet_graphs, tmp_path):
    _, graph, detail = resnet_graphs
    dot_file = tmp_path / "g.dot"
    write_graph(graph, dot_file, depth=1)
    assert "subgraph cluster_" in dot_file.read_text() and 'label="layer1"' in dot_file.read_text()
    done = subprocess.run(["dot", "-Tsvg", str(dot_file)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout
    # labels break into lines (name, type, FLOPs): no literal backslash-n reaches the drawing
    assert ">conv1</text>" in done.stdout and ">Conv2d</text>" in done.stdout and "\\n" not in done.stdout
    write_graph(graph, tmp_path / "g.svg")
    assert (tmp_path / "g.svg").read_text().lstrip().startswith("<?xml")
    assert subprocess.run(["dot", "-Tsvg"], input=to_dot(detail), capture_output=True, text=True, check=False).returncode == 0


def test_svg_without_graphviz_says_how_to_install(resnet_graphs, tmp_path, monkeypatch):
    _, graph, _ = resnet_graphs
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(graphprof.errors.MissingDependencyError, match="apt-get install graphviz"):
        write_graph(graph, tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()


def test_json_is_versioned(resnet_graphs, tmp_path):
    import json

    _, graph, detail = resnet_graphs
    write_graph(graph, tmp_path / "g.json", detail=detail)
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["kind"] == "graph" and data["schema_version"] == data["module_graph"]["schema_version"] == "1.1"
    assert len(data["module_graph"]["edges"]) == 77
    assert data["detail_graph"]["stats"]["nodes"] == len(detail.nodes)


def _connected(graph) -> None:
    assert graph.orphans() == [], [n.name for n in graph.orphans()]
    assert graph.components() == 1


@pytest.mark.parametrize(
    "methods",
    [
        ["eager"],
        # Dynamo export of yolov8n takes about 35 s on a busy 2-core machine: opt in with GRAPHPROF_SLOW=1
        pytest.param(
            ["dynamo.export"],
            marks=pytest.mark.skipif(not __import__("os").environ.get("GRAPHPROF_SLOW"), reason="slow: set GRAPHPROF_SLOW=1"),
        ),
    ],
)
@pytest.mark.slow  # about 5 s
def test_yolov8n_graphs_are_connected(methods):
    pytest.importorskip("ultralytics")
    pm = graphprof.prepare("yolov8n", input_shape=(1, 3, 64, 64), methods=methods)
    builder = GraphBuilder()
    pm.run([builder])
    graph, detail = builder.module_graph(), builder.detail_graph()
    assert pm.capture_method == methods[0]
    _connected(graph)
    _connected(detail)
    # every parameter of the model is credited to exactly one node of each graph
    total = sum(p.numel() for p in pm.model.parameters())
    assert sum(n.params for n in graph.nodes) == sum(n.params for n in detail.nodes) == total


@pytest.mark.slow  # a real run of a detection model, about 13 s
def test_detection_model_eager_real_run_graph_is_connected():
    pm = graphprof.prepare("fasterrcnn_mobilenet_v3_large_320_fpn", input_shape=(1, 3, 128, 128), methods=["eager"], device="cpu")
    builder = GraphBuilder()
    pm.run([builder])
    graph = builder.module_graph()
    _connected(graph)
    assert len(graph.incoming(graph.node("rpn.head.cls_logits").id)) >= 1
    # ops on constants made inside the forward (the feature-map scales of box_roi_pool, read back with
    # .item()) hang off the "(constants)" source, so the operator graph is connected too
    detail = builder.detail_graph()
    assert detail.orphans() == [] and detail.components() == 1
    constants = detail.node("(constants)")
    assert any("box_roi_pool:log2" in detail.nodes[e.dst].name for e in detail.outgoing(constants.id))


@pytest.mark.slow  # about 6 s
def test_cli_graph_option_writes_by_suffix(tmp_path):
    import json

    from typer.testing import CliRunner

    from graphprof_cli.main import app, join_input_shape

    runner = CliRunner()
    args = ["--model", "resnet18", "--input-shape", "1", "3", "64", "64", "--hardware", "h100", "--depth", "1"]
    done = runner.invoke(app, join_input_shape([*args, "--graph", str(tmp_path / "r.json")]))
    assert done.exit_code == 0, done.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert len(data["module_graph"]["edges"]) == 77 and data["module_graph"]["hardware"] == "h100"
    assert all(n["estimated_ms"] is not None for n in data["module_graph"]["nodes"] if n["kind"] != "input")
    done = runner.invoke(app, join_input_shape([*args, "--graph", str(tmp_path / "r.txt")]))
    assert done.exit_code == 0, done.output
    assert (tmp_path / "r_module.txt").exists() and (tmp_path / "r_detail.txt").exists()
    # a bad path fails before profiling, with the output error's exit code and nothing written
    done = runner.invoke(app, join_input_shape([*args, "--graph", str(tmp_path / "nope" / "r.dot")]))
    assert done.exit_code == OutputError.exit_code and "does not exist" in done.output
    assert not (tmp_path / "nope").exists()


@pytest.mark.slow  # a real measurement, about 10 s
def test_measured_times_on_module_graph_nodes():
    from graphprof.graph import with_measured_times

    model = torchvision.models.resnet18().eval()
    pm = graphprof.prepare(model, input_shape=(1, 3, 64, 64), device="cpu")
    m = pm.measure(device="cpu", iters=3, warmup=1, layer_runs=1, breakdown=False)
    graph, detail = pm.graph(measurement=m)
    layer = {t.name: t for t in m.layers}
    # a module called twice (layer1.0.relu, layer1.0.relu_1) shares its self time between its two nodes
    relu = layer["layer1.0.relu"]
    assert relu.calls == 2
    assert graph.node("layer1.0.relu").measured_ms == graph.node("layer1.0.relu_1").measured_ms == pytest.approx(relu.cpu_us / 2e3)
    assert graph.node("layer1.0.conv1").measured_ms == pytest.approx(layer["layer1.0.conv1"].cpu_us / 1e3)
    # the residual `out += identity` runs aten::add_ inside layer1.0: that op's time, not the block's Python
    add = next(o for o in m.ops if o.layer == "layer1.0" and o.op == "aten::add_")
    assert graph.node("layer1.0.add").measured_ms == pytest.approx(add.cpu_us / 1e3)
    assert all(n.measured_ms is not None for n in graph.nodes if n.kind == "module")
    assert f"measured {graph.node('layer1.0.conv1').measured_ms:.3g} ms" in to_dot(graph)  # drawn on the node
    total_ms = sum(t.cpu_us for t in m.layers) / 1e3
    assert sum(n.measured_ms or 0.0 for n in graph.nodes) <= total_ms
    # the operator graph: an op's time is that of the calls a dispatch mode sees, everything below them
    # included: aten::convolution with the mkldnn/slow kernel under it, not the composite aten::conv2d above
    ops = {(o.layer, o.op): o for o in m.ops}
    conv = ops[("conv1", "aten::convolution")]
    assert conv.dispatched_calls == 1 and ops[("conv1", "aten::conv2d")].dispatched_calls == 0
    assert conv.dispatched_cpu_us >= max(o.cpu_us for (layer, _), o in ops.items() if layer == "conv1")
    assert detail is not None
    assert detail.node("conv1:convolution").measured_ms == pytest.approx(conv.dispatched_cpu_us / 1e3)
    # the dry run dispatches the eager forward's in-place add (torchvision's `out += identity`): its node is add_
    assert detail.node("layer1.0.add:add_").measured_ms == pytest.approx(ops[("layer1.0", "aten::add_")].dispatched_cpu_us / 1e3)
    assert all(n.measured_ms is not None for n in detail.nodes if n.kind == "op")
    assert sum(n.measured_ms or 0.0 for n in detail.nodes) <= total_ms
    # folded at depth 1: layer1's node holds the self time of every layer inside it, and its own
    builder = GraphBuilder(depth=1)
    pm.run([builder])
    folded = with_measured_times(builder.module_graph("resnet18"), m)
    inside = sum(t.cpu_us for name, t in layer.items() if name == "layer1" or name.startswith("layer1.")) / 1e3
    assert folded.node("layer1").measured_ms == pytest.approx(inside)
    # without a measurement, and on the meta device, no node claims a measured time
    assert all(n.measured_ms is None for n in pm.graph()[0].nodes)
    with torch.device("meta"):
        meta_model = torchvision.models.resnet18().eval()
    prof = Profiler(meta_model, auto_profile=False)
    prof.profile_once(torch.empty(1, 3, 64, 64, device="meta"))
    assert all(n.measured_ms is None for n in prof.graph.nodes)


@pytest.mark.slow  # a real measurement, about 12 s
def test_cli_measure_puts_measured_times_on_the_graph(tmp_path):
    import json

    from typer.testing import CliRunner

    from graphprof_cli.main import app, join_input_shape

    args = ["--model", "resnet18", "--input-shape", "1", "3", "64", "64", "--measure", "--iters", "3", "--warmup", "1"]
    done = CliRunner().invoke(app, join_input_shape([*args, "--graph", str(tmp_path / "g.json")]))
    assert done.exit_code == 0, done.output
    graphs = json.loads((tmp_path / "g.json").read_text())
    assert all(n["measured_ms"] > 0 for n in graphs["module_graph"]["nodes"] if n["kind"] == "module")
    assert all(n["measured_ms"] > 0 for n in graphs["detail_graph"]["nodes"] if n["kind"] == "op")
