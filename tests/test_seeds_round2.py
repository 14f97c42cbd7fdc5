"""Issue 32, the seeds' round two: what each seed's own user still met (seed 000's LLaMA case at the
default granularity, seed 004's CPU memory, seed 001's Dynamo label, the sparse SAGE count)."""

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
    forward they come from within 10% (the rest is LlamaModel's own Python between its layers)."""
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
    assert 0.9 * forward <= total <= 1.01 * forward, (total, forward)


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


# ---- item 2: seed 004's memory figures on the CPU ------------------------------------------------------
def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).eval()


def test_cpu_forward_peak_includes_the_weights_as_the_seed_does():
    from graphprof.seed004 import MemoryProfiler

    model = _mlp()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())  # (512*1024 + 1024 + 1024*512 + 512) * 4
    from graphprof.measure.memory import live_cpu_bytes

    batch = torch.randn(32, 512)
    live = live_cpu_bytes()  # everything allocated on the CPU now, as CUDA's memory_allocated: this process's
    assert live >= weights + batch.nbytes
    stats = MemoryProfiler(model, "cpu").profile_forward(batch)
    # what was live (the weights and the batch among it), plus at least the output, 32*512*4 bytes
    assert live + 32 * 512 * 4 <= stats.peak_bytes < live + 2**20 * 8
    assert stats.allocated_mb >= weights / 2**20


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_cpu_peak_counter_resets_and_sees_an_allocation():
    from graphprof.seed004 import get_peak_memory, reset_memory_stats

    reset_memory_stats("cpu")
    base = get_peak_memory("cpu")
    x = torch.empty(64 * 2**20, dtype=torch.uint8)  # 64 MB
    assert get_peak_memory("cpu") - base >= 64
    del x
    assert get_peak_memory("cpu") - base >= 64  # the peak stays until the next reset
    reset_memory_stats()
    assert get_peak_memory("cpu") < base + 64


# ---- item 8: SAGE's mean aggregation on a sparse adjacency ----------------------------------------------
def test_sparse_mm_reduce_counts_stored_elements_by_hand():
    pytest.importorskip("torch_geometric")
    from graphprof.formulas import op_cost

    # N = 6 nodes, F = 4 features, E = 10 edges
    src = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3])
    dst = torch.tensor([1, 2, 3, 4, 5, 0, 2, 3, 4, 5])
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.ones(10), (6, 6)).coalesce().to_sparse_csr()
    x = torch.randn(6, 4)
    aten = torch.ops.aten
    for reduce, macs, flops in (("sum", 40, 80), ("mean", 40, 80 + 24), ("amax", 0, 80)):
        out = aten._sparse_mm_reduce_impl(adj, x, reduce)
        cost = op_cost(aten._sparse_mm_reduce_impl.default, (adj, x, reduce), {}, out)
        # 10 stored x 4 features = 40 products; mean divides each of the 6 x 4 outputs once; amax compares
        assert (cost.macs, cost.flops) == (macs, flops), reduce


def test_sage_on_a_sparse_adjacency_counts_its_mean_aggregation():
    """A tiny GraphSAGE (mean aggregation) on a CSR adjacency: graphprof's MACs equal an independent count,
    the two linear layers per conv plus the aggregation's nnz x F products (before: the aggregation was 0)."""
    pyg = pytest.importorskip("torch_geometric")
    import graphprof

    n, f, hidden, e = 50, 16, 8, 200
    torch.manual_seed(0)
    edge_index = torch.randint(0, n, (2, e))
    adj = pyg.utils.to_torch_csr_tensor(edge_index, size=(n, n)).t().to_sparse_csr()
    nnz = adj._nnz()
    model = pyg.nn.GraphSAGE(f, hidden, num_layers=2, aggr="mean").eval()
    profile = graphprof.profile_model(model, example_inputs=(torch.randn(n, f), adj))
    # per conv: lin_l (F_in x F_out, on the aggregate) and lin_r (on the node itself), n rows each
    linears = n * (f * hidden + f * hidden) + n * (hidden * hidden + hidden * hidden)
    aggregation = nnz * f + nnz * hidden  # each stored edge meets one row of the layer's input features
    assert profile.total.macs == linears + aggregation
    assert not profile.unsupported


# ---- item 4: the summary's label for a capture method auto skipped -------------------------------------
def test_summary_says_dynamo_was_not_tried_and_why_never_failed():
    import dataclasses
    import io

    from rich.console import Console

    import graphprof
    from graphprof.render.table import render_summary

    profile = graphprof.profile_model(torch.nn.Sequential(torch.nn.Linear(4, 4)), input_shape=(1, 4))
    profile = dataclasses.replace(
        profile,
        capture_attempts=(("fx.symbolic_trace", "TraceError: a loop"),
                          ("dynamo.export", "not tried: YOLO exports in tens of seconds")),
    )  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=200).print(render_summary(profile))
    text = out.getvalue()
    assert "fx.symbolic_trace failed" in text and "TraceError: a loop" in text
    assert "dynamo.export not tried" in text and "YOLO exports in tens of seconds" in text
    assert "dynamo.export failed" not in text
