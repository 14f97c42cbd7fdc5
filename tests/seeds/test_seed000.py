"""Seed 000 (the edge profiler's ``Profiler``), as its user types it: the LLaMA case at the default
granularity, the module graph's times and shapes, and the printing ``graph.stats()`` at its new place."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torchvision

from graphprof.compat.seed000 import Profiler
from graphprof.graph.build import GraphBuilder
from graphprof.graph.measured import with_measured_times
from graphprof.graph.model import Graph, GraphNode


def _llama(hidden: int = 64, layers: int = 2):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=1000, hidden_size=hidden, intermediate_size=2 * hidden + hidden // 2, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, attn_implementation="sdpa",
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


# ---- item 1: seed 000's Profiler on LLaMA at the default granularity -------------------------------------
def test_fold_follows_the_graph_names_through_a_module_list():
    """A measured layer inside ``layers.0`` (a ``ModuleList`` item) gives its time to the node ``layers.0``,
    and the model's own ops to its top-level function nodes: nothing measured is lost by the fold
    (before, the fold cut ``layers.0.mlp`` to ``layers`` and the decoder layers got nothing)."""
    nodes = [
        GraphNode(id=0, name="embed", kind="module", type="Embedding", module="embed"),
        GraphNode(id=1, name="arange", kind="module", type="arange", module=None),
        GraphNode(id=2, name="layers.0", kind="module", type="Block", module="layers.0"),
        GraphNode(id=3, name="layers.1", kind="module", type="Block", module="layers.1"),
    ]
    graph = Graph(level="module", model_name="m", nodes=nodes, edges=[], depth=1)
    layer = lambda name, us: SimpleNamespace(name=name, type="-", time_us=us)  # noqa: E731
    op = lambda layer, us: SimpleNamespace(layer=layer, op="aten::arange", cpu_us=us, kernel_us=None)  # noqa: E731
    measurement = SimpleNamespace(
        layers=[layer("(model)", 50.0), layer("embed", 10.0), layer("layers.0", 5.0), layer("layers.0.mlp.up", 100.0),
                layer("layers.0.mlp", 20.0), layer("layers.1.attn.q", 200.0), layer("layers.1", 1.0)],
        ops=[op("(model)", 8.0), op("layers.0", 3.0)],
    )  # fmt: skip
    times = {n.name: n.measured_ms for n in with_measured_times(graph, measurement).nodes}
    assert times == {"embed": 0.010, "arange": 0.008, "layers.0": 0.125, "layers.1": 0.201}


def test_llama_decoder_layers_are_timed_and_shaped_and_sum_to_the_forward():
    """Seed 000's LLaMA case (``Profiler(model.model, token_kwarg="input_ids")``, default granularity): every
    decoder layer has a measured time and its output shape, and the node times sum to the profiled
    forward they come from within 15% (the rest is LlamaModel's own Python between its layers: 6.6-9.2% of
    this 10 ms forward run alone, 10.6% of a 15.6 ms one in a full suite on 2 cores, hence the margin)."""
    model = _llama(hidden=256)
    prof = Profiler(model.model, granularity="module", token_kwarg="input_ids", auto_profile=False)
    ids = torch.randint(0, 1000, (1, 256))
    graph = prof.profile_once(input_ids=ids)
    for name in ("layers.0", "layers.1"):
        node = graph.node(name)
        assert node.measured_ms is not None and node.measured_ms > 0
        assert node.output_shapes == ((1, 256, 256),)
    total = sum(n.measured_ms or 0.0 for n in graph.nodes)
    forward = prof.measurement.instrumented_forward.mean
    assert 0.85 * forward <= total <= 1.01 * forward, (total, forward)


def test_resnet_stage_nodes_have_output_shapes():
    """ResNet's ``layer1``..``layer4`` (folded at depth 1 from the FX capture) carry their outputs' shapes."""
    prof = Profiler(torchvision.models.resnet18().eval(), auto_profile=False, measure=False)
    graph = prof.profile_once(torch.randn(1, 3, 64, 64))
    shapes = {n.name: n.output_shapes for n in graph.nodes}
    assert shapes["layer1"] == ((1, 64, 16, 16),)
    assert shapes["layer4"] == ((1, 512, 2, 2),)


def test_builder_output_shape_of_an_eager_fold_is_the_module_output():
    builder = GraphBuilder(depth=1, detail=False)
    import graphprof

    model = _llama()
    graphprof.prepare(model.model, example_kwargs={"input_ids": torch.zeros(1, 8, dtype=torch.long)}).run([builder])
    graph = builder.module_graph()
    assert graph.node("layers.1").output_shapes == ((1, 8, 64),)


# ---- graph.stats(): printing at its new place ---------------------------------------------------------------
def test_the_native_graph_stats_says_where_the_printing_one_went(capsys: pytest.CaptureFixture[str]) -> None:
    """Last month's README: ``graphprof.Profiler(...).profile_once(x).stats()`` printed. The native graph
    prints nothing; calling it is one line naming ``graphprof.compat.seed000`` (before: a bare AttributeError)."""
    import graphprof

    model, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32)
    graph = graphprof.Profiler(model, auto_profile=False, measure=False).profile_once(x)
    with pytest.raises(AttributeError, match=r"graphprof\.compat\.seed000 import Profiler") as caught:
        graph.stats()
    assert "\n" not in str(caught.value) and not hasattr(graph, "stats") and not hasattr(graph, "nothing")
    seed = Profiler(model, auto_profile=False, measure=False).profile_once(x)
    summary = seed.stats()
    assert f"total_nodes: {summary['nodes']}" in capsys.readouterr().out
