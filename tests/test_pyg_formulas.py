"""Message passing counted exactly: gathers, scatters, segment reductions and sparse x dense products,
each by hand (the arithmetic in a comment), then a whole ``pyg:gps`` against torch's FlopCounterMode."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from graphprof.formulas import Cost, op_cost

pytest.importorskip("torch_geometric")

aten = torch.ops.aten


class _Costs(TorchDispatchMode):
    """Every aten call's cost, as the counting pass computes it (real tensors, so sparse ones keep nnz)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Cost | None]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.calls.append((str(func.overloadpacket), op_cost(func, args, kwargs or {}, out)))
        return out


def _cost(fn: Any, op: str) -> Cost:
    with _Costs() as mode:
        fn()
    found = [c for name, c in mode.calls if name == op]
    assert len(found) == 1 and found[0] is not None, mode.calls
    return found[0]


# N = 6 nodes of F = 4 float32 features, E = 10 edges
N, F, E = 6, 4, 10
X = torch.randn(N, F)
SRC = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3])
DST = torch.tensor([1, 2, 3, 4, 5, 0, 2, 3, 4, 5])


def test_index_select_gathers_the_source_rows() -> None:
    cost = _cost(lambda: X.index_select(0, SRC), "aten.index_select")
    # 0 FLOPs; read 10 x 4 gathered floats (160 B) + 10 int64 indices (80 B); write 10 x 4 floats (160 B)
    assert cost == Cost(macs=0, flops=0, bytes_read=240, bytes_written=160)


def test_gather_reads_what_it_writes() -> None:
    index = DST.view(-1, 1).expand(E, F)
    cost = _cost(lambda: X.gather(0, index), "aten.gather")
    # reads 40 floats (160 B) and the index, 40 int64 stored as a stride-0 broadcast of 10 (80 B); writes 160 B
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (0, 240, 160)


def test_scatter_add_one_add_per_message() -> None:
    messages = torch.randn(E, F)
    index = DST.view(-1, 1).expand(E, F)
    cost = _cost(lambda: torch.zeros(N, F).scatter_add_(0, index, messages), "aten.scatter_add_")
    # 10 x 4 = 40 adds; read the index (stride-0 rows: 10 x 8 = 80 B), the messages (160 B) and the 40
    # touched targets (160 B) = 400 B; write the 40 touched targets, 160 B
    assert cost == Cost(macs=0, flops=40, bytes_read=400, bytes_written=160)


def test_scatter_reduce_and_functional_scatter_add() -> None:
    messages = torch.randn(E, F)
    index = DST.view(-1, 1).expand(E, F)
    mean = _cost(lambda: torch.zeros(N, F).scatter_reduce_(0, index, messages, "mean"), "aten.scatter_reduce_")
    functional = _cost(lambda: torch.zeros(N, F).scatter_add(0, index, messages), "aten.scatter_add")
    assert mean.flops == 40  # one add (or compare) per message element: 10 x 4
    assert functional.flops == 40
    # functional: the generic byte rule, every input whole: self 96 + index 80 + messages 160; out 96
    assert (functional.bytes_read, functional.bytes_written) == (336, 96)


def test_index_add_one_add_per_source_element() -> None:
    messages = torch.randn(E, F)
    cost = _cost(lambda: torch.zeros(N, F).index_add_(0, DST, messages), "aten.index_add_")
    # 40 adds; read index 80 + messages 160 + touched 160 = 400 B; write 160 B
    assert cost == Cost(macs=0, flops=40, bytes_read=400, bytes_written=160)


@pytest.mark.parametrize(("reduce", "flops"), [("sum", 12), ("max", 12), ("mean", 14)])
def test_segment_reduce(reduce: str, flops: int) -> None:
    data = torch.randn(12)
    cost = _cost(lambda: torch.segment_reduce(data, reduce, lengths=torch.tensor([5, 7])), "aten.segment_reduce")
    # 12 elements: one add (compare) each; mean adds a divide per segment: 12 + 2 = 14
    assert cost.flops == flops
    # read 12 floats (48 B) + 2 int64 lengths (16 B); write 2 floats (8 B)
    assert (cost.bytes_read, cost.bytes_written) == (64, 8)


def _adjacency() -> torch.Tensor:
    return torch.sparse_coo_tensor(torch.stack([DST, SRC]), torch.ones(E), (N, N)).coalesce()


def test_sparse_addmm_is_nnz_times_features() -> None:
    adj = _adjacency()
    cost = _cost(lambda: torch.sparse.mm(adj, X), "aten._sparse_addmm")
    # 10 stored elements x 4 features = 40 MACs, 80 FLOPs (beta 0: no add of self); a dense product would be 6 x 6 x 4 = 144
    assert (cost.macs, cost.flops) == (40, 80)
    # read self 96 + the sparse matrix 10 x (4 + 16) = 200 + the dense 96 = 392 B; write 96 B
    assert (cost.bytes_read, cost.bytes_written) == (392, 96)


def test_csr_mm_counts_stored_elements() -> None:
    adj = _adjacency().to_sparse_csr()
    cost = _cost(lambda: adj @ X, "aten.mm")
    assert (cost.macs, cost.flops) == (40, 80)  # 10 x 4, as the COO product
    dense = _cost(lambda: adj.to_dense() @ X, "aten.mm")
    assert dense.macs == 6 * 6 * 4  # the dense form of the same product: 144


def test_sparse_mm_above_dispatch() -> None:
    from graphprof.formulas import TensorMeta
    from graphprof.formulas.scatter import sparse_mm_cost

    sparse = TensorMeta((N, N), torch.float32, None, nnz=E)
    out = TensorMeta((N, F), torch.float32)
    assert sparse_mm_cost(sparse, TensorMeta((N, F), torch.float32), out=out) == Cost(macs=40, flops=80)


# ---- a whole model ----------------------------------------------------------------------------------------

_PRODUCTS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._scaled_dot_product_flash_attention_for_cpu")


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_pyg_gps_has_no_unsupported_op_and_its_products_match_flop_counter() -> None:
    """``graphprof --model pyg:gps --nodes 1000 --avg-degree 5``: nothing unsupported, and every matrix
    product's forward MACs x 2 equals torch's FlopCounterMode on the same model and graph.

    FlopCounterMode runs with autograd on, so nn.MultiheadAttention takes the path the dry run sees
    (in-projection addmm, SDPA, out-projection addmm) rather than the fused no-grad fast path. It has no
    entry for the CPU flash kernel, so that op is checked against torch's own ``sdpa_flop_count``."""
    from torch.utils.flop_counter import sdpa_flop_count

    import graphprof

    prepared = graphprof.prepare("pyg:gps?num_nodes=1000&avg_degree=5")
    profile = prepared.profile()
    assert profile.unsupported == ()
    ours: dict[str, int] = defaultdict(int)
    sdpa_reference = 0
    for row in profile.layers:
        for op in row.ops:
            if op.phase != "forward" or op.op not in _PRODUCTS:
                continue
            if op.op == "aten._scaled_dot_product_flash_attention_for_cpu":
                sdpa_reference += sdpa_flop_count(*op.input_shapes[:3])
                ours["sdpa"] += 2 * op.cost.macs
            else:
                ours[op.op.removeprefix("aten.")] += 2 * op.cost.macs
    args, kwargs = prepared.inputs()
    with torch.enable_grad(), FlopCounterMode(display=False) as counter:
        prepared.model(*args, **kwargs)
    theirs = {str(op).removeprefix("aten."): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
    assert theirs == {k: v for k, v in ours.items() if k != "sdpa"}
    # 4 layers x 2 products (Q K^T, P V) x N^2 x d = 4 x 2 x 1000^2 x 64 MACs: the N^2 of global attention
    assert ours["sdpa"] == sdpa_reference == 2 * (4 * 2 * 1000 * 1000 * 64)
