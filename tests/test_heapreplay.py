"""The allocator replay (graphprof.devices.heapreplay) by hand, and the dry run's allocation order
(graphprof.run.observers.allocations) against the tensors a model really allocates."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graphprof.devices.firsttouch import FirstTouch
from graphprof.devices.heapreplay import PAGE, TOP_PAD, GlibcHeap, HeapStep, heap_steps, steady_faults
from graphprof.run.loop import run_model
from graphprof.run.observers.allocations import AllocationOrder

MIB = 2**20


def _pages(n: int) -> int:
    return -(-n // PAGE) * PAGE


def test_mapped_blocks_fault_every_forward_and_the_settled_heap_none() -> None:
    # the module docstring's example: A (40 MiB) mapped, B (20 MiB) from the heap, both freed, C (20 MiB) takes B's chunk
    steps = [HeapStep((), ((0, 40 * MIB),)), HeapStep((), ((1, 20 * MIB),)), HeapStep((0, 1), ((2, 20 * MIB),))]
    first = steady_faults(steps, 32 * MIB, forwards=1)
    # A: its pages; B: the heap grows from nothing by B's chunk (20 MiB + 80 B of header) and the pad, page-rounded
    assert first == [40 * MIB, _pages(20 * MIB + 80 + TOP_PAD), 0.0]
    assert steady_faults(steps, 32 * MIB) == [40 * MIB, 0.0, 0.0]


def test_a_heap_whose_free_top_passes_the_trim_threshold_faults_again() -> None:
    # 3 x 30 MiB live at once, then all freed: 90 MiB free at the top >= the 64 MiB trim threshold, so the heap
    # shrinks to its pad and the next forward grows it again; with a 128 MiB trim threshold it never shrinks
    steps = [HeapStep((), ((0, 30 * MIB), (1, 30 * MIB), (2, 30 * MIB))), HeapStep((0, 1, 2), ())]
    trimmed, kept = steady_faults(steps, 32 * MIB), steady_faults(steps, 32 * MIB, 128 * MIB)
    assert trimmed[0] >= 90 * MIB and trimmed[1] == 0.0
    assert kept == [0.0, 0.0]


def test_free_chunks_merge_and_the_best_fit_is_taken() -> None:
    heap = GlibcHeap(32 * MIB, 64 * MIB)
    for key, size in (("a", 1 * MIB), ("b", 2 * MIB), ("c", 1 * MIB), ("d", 4096)):
        heap.alloc(key, size)
    heap.free("a")
    heap.free("b")  # merges with a: one 3 MiB chunk below c
    assert len(heap.free_chunks) == 1 and heap.free_chunks[0][1] == _chunk(1 * MIB) + _chunk(2 * MIB)
    assert heap.alloc("e", 3 * MIB - 1024) == 0.0  # fits the merged chunk: no fresh page
    heap.free("d")  # d was at the top: the top moves down, nothing is trimmed (far under 64 MiB)
    assert heap.top == heap.used["c"][0] + heap.used["c"][1]  # type: ignore[index]


def _chunk(n: int) -> int:
    return -(-(n + 80) // 16) * 16


def test_the_dry_runs_allocation_order_is_the_real_forwards() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1), nn.Flatten()).eval()
    x = torch.randn(2, 3, 16, 16)
    order = AllocationOrder()
    with torch.no_grad():
        run_model(None, model, (x,), {}, [order], fake=True)
    fresh = [size for s in order.steps for _, size in s.allocated]
    # conv (2 x 8 x 16 x 16 floats), relu, conv (2 x 4 x 16 x 16); flatten is a view of the last: no storage
    assert fresh == [2 * 8 * 256 * 4, 2 * 8 * 256 * 4, 2 * 4 * 256 * 4]
    # each activation dies once its last user ran: the first conv's output before the second conv allocates
    freed = [s.freed for s in order.steps]
    assert any(0 in f for f in freed) and all(2 not in f for f in freed)  # the output outlives the run
    assert order.steps[0].op == "aten.convolution" and order.steps[0].input_shapes[:2] == ((2, 3, 16, 16), (8, 3, 3, 3))


def test_a_convolution_carries_onednns_copies_into_the_replay() -> None:
    model = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1)).eval()
    order = AllocationOrder()
    with torch.no_grad():
        run_model(None, model, (torch.randn(2, 32, 8, 8),), {}, [order], fake=True)
    touch = FirstTouch(32 * MIB, 1e-10, conv_block=16, threads=2)
    (step,) = heap_steps(order.steps, touch)
    assert step.scratch and all(b > 0 for b in step.scratch)
    assert heap_steps(order.steps, FirstTouch(32 * MIB, 1e-10))[0].scratch == ()  # no block measured: no copies


def _writes(nbytes: int) -> object:
    from types import SimpleNamespace

    from graphprof.base.choices import OpStatus

    return SimpleNamespace(
        op="aten.add", status=OpStatus.COUNTED, cost=SimpleNamespace(bytes_written=nbytes), output_shapes=((nbytes // 4,),), parts=()
    )


def test_a_forwards_term_takes_the_replays_share_of_its_blocks_below_the_limit() -> None:
    """``forward_touch`` by hand. A forward allocates a, b, c (30 MiB each), frees them, allocates d, e (30 MiB), frees
    them, and maps one 40 MiB block. Fresh heap: a-c grow it, their free (90 MiB at the top, over the 64 MiB trim
    threshold) trims it to its pad; d, e grow it again and their 60 MiB top is kept. Every later forward: a-c grow it
    from the kept 60 MiB to 90 MiB, are trimmed, and d, e grow it by 60 MiB again: pages(3 chunks + pad) - pad in all,
    a chunk being 30 MiB + 80 B = 31,457,360 B: pages(94,503,152) = 94,507,008, less the 131,072 B pad, 94,375,936 B
    over 5 x 30 MiB = 157,286,400 B: a share of 0.60003. The 40 MiB block is above the limit (priced whole, not in
    the share). Without an order, the calibration's share law."""
    from graphprof.devices.heapreplay import forward_touch
    from graphprof.run.observers.allocations import Step

    def step(freed: tuple[int, ...], *allocated: tuple[int, int]) -> Step:
        return Step("aten.add", freed, allocated, (), (), 4)

    block = 30 * MIB
    steps = [step((), (0, block), (1, block), (2, block)), step((0, 1, 2), (3, block), (4, block)), step((3, 4), (5, 40 * MIB)), step((5,))]
    ops = [_writes(block) for _ in range(5)] + [_writes(40 * MIB)]
    touch = FirstTouch(32 * MIB, 1e-10, share_below=0.03, trim_peak_bytes=1e9)
    got = forward_touch(touch, ops, 50e6, steps)
    assert got.share_below == pytest.approx(94_375_936 / 157_286_400) and got.trim_peak_bytes == 0.0
    assert got.of_outputs([block] * 5 + [40 * MIB]) == pytest.approx(1e-10 * (40 * MIB + 94_375_936))
    # no order: the share law, here below the trim peak (none)
    assert forward_touch(touch, ops, 50e6) == touch.for_forward(50e6) and forward_touch(touch, ops, 50e6).share_below == 0.0
