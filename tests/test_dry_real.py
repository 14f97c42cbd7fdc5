"""The differential tier: a dry run counts what a real run of the same capture does, op by op.

The dry run computes shapes, not values, except for index arithmetic, which it computes on the input's
real values (``graphprof.run.values``). A value it keeps must stay true after a write (``mask[idx] =
True``); a value it cannot keep must not be guessed: the op whose shape depends on it makes the session
run for real. Either way, the per-op records (op, cost, input and output shapes, layer) of the profile's
run equal those of a real run of the same captured graph on the same inputs. Each construct below is one
that once went wrong, or that a graph, routing or recurrent model is built of.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from graphprof.base.inputs import materialize
from graphprof.base.options import RunSpec
from graphprof.capture.methods import preserved_state
from graphprof.cost.count import op_record
from graphprof.formulas.registry import OpStatus
from graphprof.run.propagate import Trace, propagate
from graphprof.session import open_session

# ---- the corpus of value-dependent constructs ---------------------------------------------------------


class MaskWritten(nn.Module):
    """``to_dense_batch``'s way: a mask made as zeros, written in place, then used to select (2,048 MACs:
    8 rows x 16 x 16)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16, bias=False)

    def forward(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(h.shape[0], dtype=torch.bool, device=h.device)
        mask[idx] = True
        return self.lin(h[mask])


class MaskThroughView(MaskWritten):
    """Writes through views of a mask (a slice's ``fill_``, ``masked_fill_``), then selects with the base."""

    def forward(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(h.shape[0], dtype=torch.bool)
        mask.view(-1)[2:7].fill_(True)
        mask.masked_fill_(torch.isin(torch.arange(h.shape[0]), idx), True)
        return self.lin(h[mask])


class MaskFromFeatures(nn.Module):
    """A mask written with values that come from features: not kept, so the selection needs a real run."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(h.shape[0], dtype=torch.bool)
        mask[idx] = h[idx, 0] > 0
        return self.lin(h[mask])


class RaggedBatch(nn.Module):
    """A batch vector into a dense ``[graphs, most nodes, features]`` tensor, as ``to_dense_batch`` does."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        counts = torch.bincount(batch)
        graphs, most = counts.numel(), int(counts.max())
        start = torch.cumsum(counts, 0) - counts
        pos = torch.arange(batch.numel()) - start[batch]
        dense = x.new_zeros(graphs, most, x.shape[-1])
        dense[batch, pos] = x
        mask = torch.zeros(graphs, most, dtype=torch.bool)
        mask[batch, pos] = True
        out, _ = self.attn(dense, dense, dense, key_padding_mask=~mask)
        return out[mask]


class TopKRouting(nn.Module):
    """Top-1 routing to two experts: which tokens go where depends on the router's (float) scores."""

    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(16, 2)
        self.experts = nn.ModuleList([nn.Linear(16, 32), nn.Linear(16, 32)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        choice = self.router(x).topk(1, dim=-1).indices.squeeze(-1)
        out = x.new_zeros(x.shape[0], 32)
        for e, expert in enumerate(self.experts):
            rows = torch.nonzero(choice == e).squeeze(-1)
            out[rows] = expert(x[rows])
        return out


class UniqueEmbed(nn.Module):
    """``unique`` and ``nonzero`` over input ids, and ``repeat_interleave`` with input counts."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.lin = nn.Linear(8, 4)

    def forward(self, ids: torch.Tensor, repeats: torch.Tensor) -> torch.Tensor:
        kept = torch.unique(ids)
        nz = torch.nonzero(ids > 10).squeeze(-1)
        return self.lin(torch.cat([self.emb(kept), self.emb(ids[nz]), self.emb(torch.repeat_interleave(kept[:4], repeats))]))


class SelectAfterScatter(nn.Module):
    """Boolean indexing after a scatter: nodes with at least one incoming edge."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(12, 6)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        deg = torch.zeros(x.shape[0], dtype=torch.long).scatter_add_(0, edge_index[1], torch.ones_like(edge_index[1]))
        return self.lin(x[deg > 0])


class Packed(nn.Module):
    """A packed recurrent sequence: lengths are values the packing reads."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 16, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]


def _corpus() -> dict[str, tuple[nn.Module, tuple[Any, ...]]]:
    g = torch.Generator().manual_seed(0)
    h = torch.randn(32, 16, generator=g)
    idx = torch.arange(0, 16, 2)
    return {
        "mask written": (MaskWritten(), (h, idx)),
        "mask through views": (MaskThroughView(), (h, idx)),
        "mask from features": (MaskFromFeatures(), (h, idx)),
        "ragged batch": (RaggedBatch(), (torch.randn(9, 8, generator=g), torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2]))),
        "top-k routing": (TopKRouting(), (h,)),
        "unique, nonzero, repeat_interleave": (UniqueEmbed(), (torch.randint(0, 50, (20,), generator=g), torch.tensor([1, 2, 3, 1]))),
        "select after scatter": (SelectAfterScatter(), (torch.randn(10, 12, generator=g), torch.tensor([[0, 1, 2, 3], [1, 2, 2, 5]]))),
        "packed sequence": (Packed(), (torch.randn(3, 10, 8, generator=g), torch.tensor([10, 7, 3]))),
    }


# ---- the comparison -------------------------------------------------------------------------------------


def _records(trace: Trace) -> list[tuple[Any, ...]]:
    """Every op of a run that costs (counted or unsupported), in order: its layer, op, cost and shapes (what the
    profile's tables are made of). Zero-cost calls (views, ``prim.device`` queries a FakeTensor answers) count
    nothing and are left out, and so is an output of shape ``(0,)``: a kernel's unused result (the attention
    weights ``_native_multi_head_attention`` does not return, the RNN layer's workspace in eval), which the
    real kernel leaves undefined and the FakeTensor kernel makes empty; either way 0 bytes."""
    rows = []
    for key in [*trace.keys, trace.unattributed]:
        for call in key.calls:
            r = op_record(call)
            if r.status is not OpStatus.ZERO_COST:
                rows.append((key.name, r.op, r.status, r.cost, r.input_shapes, tuple(o for o in r.output_shapes if o != (0,))))
    return rows


def dry_and_real(model_or_name: nn.Module | str, **options: Any) -> tuple[Any, Trace]:
    """The session's first run (a dry run, or real where it must be) and a real run of the same capture."""
    session = open_session(model_or_name, **options)
    first = session.run_call(session.resolve(RunSpec()))
    call = session.resolve(RunSpec())
    device = session.device
    with preserved_state(session.model):
        session.model.train(call.train)
        real = propagate(
            first.capture.graph, session.model, materialize(call.args, device), materialize(call.kwargs, device),
            train=call.train, dtype=call.dtype, fake=False,
        )  # fmt: skip
    return first, real


@pytest.mark.parametrize("name", list(_corpus()))
def test_the_dry_run_counts_what_a_real_run_does_op_by_op(name: str) -> None:
    model, inputs = _corpus()[name]
    with torch.no_grad():
        expected = model(*inputs)  # the real output: its rows are what the layers after a selection see
    first, real = dry_and_real(model, example_inputs=inputs)
    assert _records(first.trace) == _records(real)
    assert sum(r[3].macs for r in _records(real)) > 0
    assert expected.numel() > 0


def test_a_mask_written_in_place_keeps_its_write_and_stays_a_dry_run() -> None:
    # 8 selected rows (idx = 0, 2, ..., 14) through Linear(16, 16, bias=False): 8 x 16 x 16 = 2,048 MACs
    import graphprof

    model, inputs = _corpus()["mask written"]
    p = graphprof.profile_model(model, example_inputs=inputs)
    assert p.total_macs == 2048
    assert p.execution.value == "dry-run"
    assert not any(n.startswith("WARNING") for n in p.notes)


def test_a_write_the_dry_run_cannot_compute_makes_the_run_real_never_a_guess() -> None:
    import graphprof

    model, inputs = _corpus()["mask from features"]
    p = graphprof.profile_model(model, example_inputs=inputs)
    with torch.no_grad():
        rows = int((inputs[0][inputs[1], 0] > 0).sum())
    assert p.total_macs == rows * 16 * 16  # the Linear over the selected rows, counted on the real run
    assert p.execution.value == "real"
    assert "aten.nonzero" in p.execution_note


def test_the_callers_index_tensors_are_never_written() -> None:
    import graphprof

    class WritesItsInput(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            mask[0] = True  # in place into the caller's own tensor
            return self.lin(x[mask])

    mask = torch.tensor([False, True, False, True])
    graphprof.profile_model(WritesItsInput(), example_inputs=(torch.randn(4, 4), mask))
    assert mask.tolist() == [False, True, False, True]


def test_an_empty_selection_before_a_layer_with_weights_is_said_loudly() -> None:
    import graphprof

    class SelectsNothing(MaskWritten):
        def forward(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            mask = torch.zeros(h.shape[0], dtype=torch.bool)
            mask[idx] = False
            return self.lin(h[mask])

    model, inputs = SelectsNothing(), _corpus()["mask written"][1]
    p = graphprof.profile_model(model, example_inputs=inputs)
    assert p.total_macs == 0  # what the real run does too
    warnings = [n for n in p.notes if n.startswith("WARNING")]
    assert any("aten.index" in n and "empty" in n for n in warnings)
    assert any(n.startswith("WARNING: lin read weights beside an empty tensor") for n in warnings)
    # a model that never selects nothing says nothing of the kind
    assert not [n for n in graphprof.profile_model(MaskWritten(), example_inputs=inputs).notes if n.startswith("WARNING")]


# ---- model families ----------------------------------------------------------------------------------------


#: The zoo, timm and detector models of the suite's saved-bytes agreement (tests/test_saved_agree.py) and the
#: first rows of each family, built with weights on the CPU so that the same capture runs for real.
FAMILIES = [
    "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "efficientnet_v2_s",
    "densenet121", "convnext_tiny", "inception_v3", "googlenet", "regnet_y_400mf", "regnet_x_400mf", "shufflenet_v2_x1_0",
    "squeezenet1_0", "mnasnet0_5", "alexnet", "vgg11", "resnext50_32x4d", "vit_b_16", "swin_t", "maxvit_t",
    "timm:resnet18", "timm:vit_tiny_patch16_224", "timm:convnext_atto", "yolov8n", "hf:gpt2", "hf:bert-base", "hf:llama",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_zoo_timm_yolo_and_hf_models_count_the_same_dry_and_real(name: str) -> None:
    if name.startswith("timm:"):
        pytest.importorskip("timm")
    if name.startswith("yolo"):
        pytest.importorskip("ultralytics")
    first, real = dry_and_real(name, device="cpu")
    dry, wet = _records(first.trace), _records(real)
    if name.startswith("hf:"):
        # transformers takes a FakeTensor for tracing and builds the causal mask as a tensor on a dry run (a few
        # L x L boolean ops at the model's top level: 65,536 FLOPs for hf:llama's 128 tokens), where the real
        # run checks one flag and passes is_causal instead; graphprof's attention ignores that mask on a dry
        # run. Every layer below the top level counts the same, and the top level differs by the mask alone.
        top = dry[0][0]
        assert [r for r in dry if r[0] != top] == [r for r in wet if r[0] != top]
        extra = sum(r[3].flops for r in dry if r[0] == top) - sum(r[3].flops for r in wet if r[0] == top)
        # at most five boolean ops over the 128 x 128 mask of the catalogue's default 128 tokens
        assert 0 <= extra <= 5 * 128 * 128 and all(r[3].macs == 0 for r in dry if r[0] == top), extra
        return
    assert dry == wet


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pyg:gcn", "pyg:gat", "pyg:gin", "pyg:gps"])
def test_graph_models_count_the_same_dry_and_real(name: str) -> None:
    pytest.importorskip("torch_geometric")
    first, real = dry_and_real(name)
    assert _records(first.trace) == _records(real)


@pytest.mark.slow
@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_models_count_the_same_dry_and_real(cell: type[nn.Module]) -> None:
    model = cell(16, 32, num_layers=2, batch_first=True)
    first, real = dry_and_real(model, example_inputs=(torch.randn(2, 7, 16),))
    assert _records(first.trace) == _records(real)


def test_pyg_to_dense_batch_over_three_graphs_stays_a_dry_run_and_counts_by_hand() -> None:
    pytest.importorskip("torch_geometric")
    from torch_geometric.utils import to_dense_batch

    import graphprof

    class DenseAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.lin = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
            dense, mask = to_dense_batch(x, batch)
            out, _ = self.attn(dense, dense, dense, key_padding_mask=~mask)
            return self.lin(out[mask])

    inputs = (torch.randn(9, 8), torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2]))
    p = graphprof.profile_model(DenseAttention(), example_inputs=inputs)
    # 3 graphs padded to 4 nodes: in-projection 12 x 8 x 24 = 2,304; scores and values 3 x 2 heads x 4 x 4 x 4
    # = 384 each; out-projection 12 x 8 x 8 = 768; the Linear over the 9 real nodes 9 x 8 x 8 = 576
    assert p.total_macs == 2304 + 384 + 384 + 768 + 576
    assert p.execution.value == "dry-run"
    first, real = dry_and_real(DenseAttention(), example_inputs=inputs)
    assert _records(first.trace) == _records(real)
