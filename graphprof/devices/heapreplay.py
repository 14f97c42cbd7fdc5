"""Which fresh pages a forward faults on the CPU: glibc's main heap replayed over a forward's allocation order.

A plain CPU forward pays a minor page fault for every page of fresh memory it writes, and which memory is fresh
depends on the allocator, not on any one op. With glibc's ``malloc`` once its dynamic thresholds have risen to
their ceilings (after the first forward frees its large blocks):

* a request of at least the mmap threshold (``mmap_bytes``: 32 MiB on 64-bit Linux, measured as the first-touch
  limit by :func:`graphprof.calibrate.bench.measure_first_touch`) is mapped when allocated and unmapped when
  freed: all of its pages fault, every forward;
* a smaller one comes from the heap: the best-fitting free chunk, else the top of the heap, which grows (those
  pages fault once) when it runs out, by the request and a pad of :data:`TOP_PAD`;
* a freed chunk merges with its free neighbours; one that reaches the top gives the top back, and where the free
  space at the top exceeds the trim threshold (``trim_bytes``: twice the mmap threshold) the heap shrinks to the
  top and its pad, so those pages fault again when the heap next grows.

:func:`steady_faults` replays a forward's allocations and frees (:class:`graphprof.run.observers.allocations.Step`
records them in a dry run) three times over and returns what the last forward faults, step by step: the heap a
model's later forwards find. Nothing is fitted: the two thresholds are the machine's, the rules glibc's.

Worked example (mmap 32 MiB, trim 64 MiB): a forward that allocates A = 40 MiB (mapped) and B = 20 MiB, frees
both, then allocates C = 20 MiB faults 40 MiB for A in every forward; B grows the heap once (20 MiB and the pad),
C finds B's chunk free, and the 20 MiB top never exceeds the trim threshold, so from the second forward on the
heap faults nothing: 40 MiB a forward in all.

Held against fresh processes' minor faults at batch 8 on this 2-core machine (``benchmarks/bench_faults.py``, the
median of three processes a model, ``benchmarks/results/bench_faults.md``), over 20 models, summed: the replay over
the captured graph's order is off by 708 MB (-87 MB signed; within 25 MB on 10 models), over the eager forward's
order by 870 MB (+672 MB; 9), the calibration's share law (the predictor's term today) by 2,130 MB (-2,040 MB; 6).
It is right where the heap trims every forward (resnet34 71 / 71-77 MB measured, mobilevit_xs 268 / 258-278) and
where it never does (0 / 0 on four models), and too high where the real heap trims less than its rules say
(regnet_y_400mf and regnet_y_1_6gf 67-77 / 0-74 MB). The measurement varies: the same model's heap faults differ
several-fold from one process to the next (densenet121 46, 250 and 263 MB; efficientnet_b2 90, 299 and 289), which a
replay of one order cannot follow.

The predictor's term (:func:`forward_touch`): every dry run of an eval forward records its allocation order
(:attr:`graphprof.profile.Profile.allocations`), and the share of its fresh blocks below the limit that fault is the
replay's for that forward, where it was the calibration's one share for every model.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from graphprof.devices.firsttouch import FirstTouch, conv_scratch

__all__ = ["PAGE", "TOP_PAD", "GlibcHeap", "HeapStep", "forward_touch", "heap_faults", "heap_steps", "steady_faults"]

#: The page size the kernel maps fresh memory in.
PAGE = 4096
#: glibc's ``M_TOP_PAD`` default: what the heap grows by beyond a request, and keeps when it trims.
TOP_PAD = 128 * 1024
#: A chunk's header and alignment, and PyTorch's 64-byte alignment (``posix_memalign``): a storage of ``n`` bytes
#: takes ``n`` + 80 rounded up to 16.
_HEADER = 16 + 64
_ALIGN = 16
_MIN_CHUNK = 32


@dataclass(frozen=True)
class HeapStep:
    """One op of a forward as the allocator sees it: the blocks freed before it runs (their keys), then the blocks
    it allocates, ``(key, bytes)``; ``scratch``: sizes of blocks it allocates and frees within itself."""

    freed: tuple[Hashable, ...]
    allocated: tuple[tuple[Hashable, int], ...]
    scratch: tuple[float, ...] = ()


def _pages(n: float) -> int:
    return -(-int(n) // PAGE) * PAGE


class GlibcHeap:
    """glibc's main heap at its raised thresholds (see the module docstring); ``alloc`` returns the bytes of fresh
    pages the block will fault when written."""

    def __init__(self, mmap_bytes: float, trim_bytes: float) -> None:
        self.mmap_bytes, self.trim_bytes = mmap_bytes, trim_bytes
        self.free_chunks: list[tuple[int, int]] = []  # (start, size), sorted by start
        self.top = 0  # where the top chunk starts
        self.end = 0  # the heap's end (the program break)
        self.used: dict[Hashable, tuple[int, int] | None] = {}  # None: a mapped block

    def alloc(self, key: Hashable, nbytes: float) -> float:
        if nbytes >= self.mmap_bytes:
            self.used[key] = None
            return float(_pages(nbytes))
        size = max(_MIN_CHUNK, -(-(int(nbytes) + _HEADER) // _ALIGN) * _ALIGN)
        fits = [i for i, (_, s) in enumerate(self.free_chunks) if s >= size]
        if fits:
            best = min(fits, key=lambda i: self.free_chunks[i][1])
            start, have = self.free_chunks.pop(best)
            if have - size >= _MIN_CHUNK:
                bisect.insort(self.free_chunks, (start + size, have - size))
            self.used[key] = (start, size)
            return 0.0
        start, fresh = self.top, 0.0
        if start + size > self.end:
            grown = _pages(start + size + TOP_PAD)
            fresh, self.end = float(grown - self.end), grown
        self.top = start + size
        self.used[key] = (start, size)
        return fresh

    def free(self, key: Hashable) -> None:
        chunk = self.used.pop(key, None)
        if chunk is None:
            return
        start, size = chunk
        i = bisect.bisect_left(self.free_chunks, (start, 0))
        if i < len(self.free_chunks) and self.free_chunks[i][0] == start + size:
            size += self.free_chunks.pop(i)[1]
        if i > 0 and sum(self.free_chunks[i - 1]) == start:
            before, more = self.free_chunks.pop(i - 1)
            start, size = before, more + size
        if start + size != self.top:
            bisect.insort(self.free_chunks, (start, size))
            return
        self.top = start
        if self.end - self.top >= self.trim_bytes:
            self.end = _pages(self.top + TOP_PAD)


def _forward(heap: GlibcHeap, steps: Sequence[HeapStep], tag: int) -> list[float]:
    faults = []
    for i, step in enumerate(steps):
        for key in step.freed:
            heap.free((tag, key))
        fresh = sum(heap.alloc((tag, i, "scratch", j), b) for j, b in enumerate(step.scratch))
        fresh += sum(heap.alloc((tag, key), b) for key, b in step.allocated)
        for j in range(len(step.scratch)):
            heap.free((tag, i, "scratch", j))
        faults.append(fresh)
    return faults


def steady_faults(steps: Sequence[HeapStep], mmap_bytes: float, trim_bytes: float | None = None, *, forwards: int = 3) -> list[float]:
    """Bytes of fresh pages each step of the ``forwards``-th forward faults (the heap as earlier forwards left it).

    ``trim_bytes`` defaults to twice ``mmap_bytes``. Blocks a forward leaves allocated (its output, say) are
    freed before the next forward, as a caller dropping the output does."""
    heap = GlibcHeap(mmap_bytes, 2 * mmap_bytes if trim_bytes is None else trim_bytes)
    faults: list[float] = []
    for tag in range(forwards):
        faults = _forward(heap, steps, tag)
        for key in [k for k in heap.used if isinstance(k, tuple) and k[0] == tag]:
            heap.free(key)
    return faults


def heap_steps(steps: Sequence[Any], touch: FirstTouch) -> list[HeapStep]:
    """A run's :class:`~graphprof.run.observers.allocations.Step` records as the allocator sees them on this CPU:
    each convolution with the blocked copies oneDNN makes inside it (:func:`~graphprof.devices.firsttouch.conv_scratch`,
    ``touch``'s channel block and threads)."""
    return [
        HeapStep(
            s.freed, s.allocated, tuple(conv_scratch(s.op, s.input_shapes, s.output_shapes, s.itemsize, touch.conv_block, touch.threads))
        )
        for s in steps
    ]


def heap_faults(steps: Sequence[Any], touch: FirstTouch) -> tuple[float, float]:
    """``(mapped, heap)``: the bytes a steady forward over the run's allocation order ``steps`` faults in its blocks
    at or above ``touch``'s limit (mapped afresh every forward, page-rounded), and in the heap besides
    (:func:`steady_faults` over :func:`heap_steps`)."""
    heap = heap_steps(steps, touch)
    mapped = sum(_pages(b) for s in heap for b in (*s.scratch, *(n for _, n in s.allocated)) if b >= touch.limit_bytes)
    return float(mapped), sum(steady_faults(heap, touch.limit_bytes)) - mapped


def forward_touch(touch: FirstTouch, ops: Sequence[Any], peak_bytes: float | None, steps: Sequence[Any] = ()) -> FirstTouch:
    """The first-touch term of one eval forward on this CPU: its fresh blocks at or above the limit in full, and of
    its fresh blocks between :attr:`~FirstTouch.min_bytes` and the limit the share the heap replay faults
    (:func:`steady_faults` over the dry run's allocation order ``steps``, the convolutions' copies added: the bytes
    it faults beyond the mapped blocks, over those blocks' bytes, at most 1). ``ops`` are the forward's recorded
    calls as the predictor prices them (a fused call by its parts). Without an order (a profile read back from JSON,
    a training step), the calibration's share law: :meth:`~FirstTouch.for_forward` at ``peak_bytes``.

    Worked example: a forward whose replay faults 40 MiB of mapped blocks and 12 MB more, with 100 MB of fresh
    blocks between 1 MiB and the limit, pays the 40 MiB in full and 12% of each of those blocks."""
    if not steps:
        return touch.for_forward(peak_bytes)
    _, faulted = heap_faults(steps, touch)
    _, between = touch.split(
        b for op in ops for part in (getattr(op, "parts", ()) or (op,)) if part.op.startswith("aten.") for b in touch.fresh(part)
    )
    share = min(max(faulted, 0.0) / between, 1.0) if between > 0 else 0.0
    return replace(touch, share_below=share, trim_peak_bytes=0.0)
