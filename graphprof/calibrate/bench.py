"""Measure the local device's op table: single aten calls over a grid of shapes, timed back to back.

Each record is one benchmark (a matrix product, a convolution, an element-wise op...) run eagerly
under ``torch.no_grad`` as graphprof's ``--measure`` runs a forward. Its FLOPs and bytes are not
written by hand: the call is run once through the run loop with :class:`_CostRecorder` watching, which applies graphprof's own
formula registry (:func:`graphprof.formulas.op_cost`) to every aten call it makes, so the table is
costed exactly as a profile is. The record keeps the main aten op and its input shapes, from which
:func:`graphprof.devices.predict.op_class` and :func:`graphprof.devices.predict.reduction_depth` read its family.

Timing (:func:`time_call`): calls run in back-to-back chunks of about ``chunk_s`` seconds; the
per-call time is the median over chunks. On the CPU that is one call after another; on CUDA the
chunk ends with a synchronise, so launches overlap with running kernels, as in a model's forward.
The median, not the mean, because the machine may be shared: one descheduled chunk moves it little.

Besides the table, three floors: ``floor_s`` (a one-element add: the dispatcher and launch alone),
``view_s`` (a view: the dispatcher without a kernel) and ``host_per_kernel_s`` (a chain of small
layers at batch 1: one eager op inside a module's forward, module call included); and on the CPU the
first touch of large fresh outputs (:func:`measure_first_touch`).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from graphprof.base.choices import OpStatus
from graphprof.errors import ShapePropagationError, first_line
from graphprof.formulas import op_cost, op_status
from graphprof.formulas.registry import op_name
from graphprof.measure.heap import STEADY_BLOCK_BYTES, glibc, settle_malloc
from graphprof.run.events import Observer, OpEvent
from graphprof.run.loop import run_model

__all__ = [
    "Benchmark",
    "benchmarks",
    "kind_benchmarks",
    "measure_benchmarks",
    "time_call",
    "cost_of",
    "measure_first_touch",
    "measure_floors",
    "measure_op_table",
    "Progress",
]

#: ``progress(done, total, what)``: how a caller hears about a long measurement (the library never prints).
Progress = Callable[[int, int, str], None]


class _CostRecorder(Observer):
    """Sum graphprof's cost of every aten call a run makes; remember the costliest call."""

    wants_ops = True

    def __init__(self) -> None:
        self.flops = 0
        self.bytes = 0
        self.main: tuple[int, str, list[list[int]]] = (-1, "", [])
        self.out_shapes: list[list[int]] = []

    def op(self, event: OpEvent) -> None:
        func, args, out = event.func, event.args, event.out
        if op_status(func) is not OpStatus.COUNTED:
            return
        cost = op_cost(func, args, event.kwargs, out)
        if cost is None:
            return
        self.flops += cost.flops
        self.bytes += cost.bytes_moved
        weight = cost.flops + cost.bytes_moved
        if weight > self.main[0]:
            shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
            self.main = (weight, op_name(func), shapes)
            outs = out if isinstance(out, tuple | list) else (out,)
            self.out_shapes = [list(o.shape) for o in outs if isinstance(o, torch.Tensor)]


class _Call(nn.Module):
    """A benchmark's call as a module, so the run loop runs it (for real, no gradients) like any model."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self) -> Any:
        return self.fn()


def cost_of(fn: Callable[[], Any]) -> tuple[str, list[list[int]], int, int, list[list[int]]]:
    """(main aten op, its input shapes, FLOPs, bytes, its output shapes) of one call of ``fn``, by graphprof's
    formulas: one real run of the call through the run loop, the costs from its op events."""
    recorder = _CostRecorder()
    try:
        run_model(None, _Call(fn), (), {}, [recorder], fake=False)
    except ShapePropagationError as exc:  # the call's own error, as the call raised it
        raise (exc.__cause__ or exc) from None
    return recorder.main[1], recorder.main[2], recorder.flops, recorder.bytes, recorder.out_shapes


def time_call(fn: Callable[[], Any], sync: Callable[[], None], chunk_s: float = 0.004, chunks: int = 5) -> float:
    """Median per-call seconds of ``fn`` over ``chunks`` back-to-back chunks of about ``chunk_s`` each."""
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, min(2000, int(chunk_s / once)))
    per_call = []
    for _ in range(chunks if once < 0.05 else 3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        per_call.append((time.perf_counter() - start) / calls)
    return statistics.median(per_call)


@dataclass(frozen=True)
class Benchmark:
    """One entry of the grid: a label, a dtype and a factory returning the call to time."""

    label: str
    dtype: torch.dtype
    make: Callable[[torch.device], Callable[[], Any]]


def _mm(m: int, n: int, k: int, dt: torch.dtype) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        a, b = torch.randn(m, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        return lambda: a @ b

    return Benchmark(f"mm {m}x{k}x{n}", dt, make)


def _linear(batch: int, fin: int, fout: int, dt: torch.dtype) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        x = torch.randn(batch, fin, device=dev, dtype=dt)
        w, b = torch.randn(fout, fin, device=dev, dtype=dt), torch.randn(fout, device=dev, dtype=dt)
        return lambda: F.linear(x, w, b)

    return Benchmark(f"linear {batch}x{fin}->{fout}", dt, make)


def _bmm(b: int, m: int, n: int, k: int, dt: torch.dtype) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        x, y = torch.randn(b, m, k, device=dev, dtype=dt), torch.randn(b, k, n, device=dev, dtype=dt)
        return lambda: torch.bmm(x, y)

    return Benchmark(f"bmm {b}x{m}x{k}x{n}", dt, make)


def _conv(x: tuple[int, ...], cout: int, kernel: int, groups: int, stride: int, dt: torch.dtype) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        inp = torch.randn(x, device=dev, dtype=dt)
        w = torch.randn(cout, x[1] // groups, kernel, kernel, device=dev, dtype=dt)
        bias = torch.randn(cout, device=dev, dtype=dt)
        return lambda: F.conv2d(inp, w, bias, stride=stride, padding=kernel // 2, groups=groups)

    kind = "dw" if groups == x[1] and groups > 1 else (f"g{groups}" if groups > 1 else "")
    return Benchmark(f"conv{kind} {kernel}x{kernel}/{stride} {list(x)}->{cout}", dt, make)


def _unary(name: str, numel: int, dt: torch.dtype, fn: Callable[[torch.Tensor], Any]) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        x = torch.randn(max(numel // 1024, 1), min(numel, 1024), device=dev, dtype=dt)
        return lambda: fn(x)

    return Benchmark(f"{name} {numel}", dt, make)


def _add(numel: int, dt: torch.dtype) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        x, y = torch.randn(numel, device=dev, dtype=dt), torch.randn(numel, device=dev, dtype=dt)
        return lambda: x + y

    return Benchmark(f"add {numel}", dt, make)


def _image(name: str, shape: tuple[int, ...], dt: torch.dtype, fn: Callable[[torch.Tensor], Any]) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        x = torch.randn(shape, device=dev, dtype=dt)
        return lambda: fn(x)

    return Benchmark(f"{name} {list(shape)}", dt, make)


def _batch_norm(x: torch.Tensor) -> Any:
    c = x.shape[1]
    ones = torch.ones(c, dtype=x.dtype, device=x.device)
    return F.batch_norm(x, ones, ones, ones, ones, training=False)


def _sdpa(b: int, heads: int, seq: int, dim: int, dt: torch.dtype) -> Benchmark:
    def make(dev: torch.device) -> Callable[[], Any]:
        q = torch.randn(b, heads, seq, dim, device=dev, dtype=dt)
        return lambda: F.scaled_dot_product_attention(q, q, q)

    return Benchmark(f"sdpa {b}x{heads}x{seq}x{dim}", dt, make)


#: Fused attention (the CPU's flash kernel) in the grid, (batch, heads, tokens, head size), across the ranges of
#: the adaptive grid (``_kind_grid``): batch 1-8, 3-12 heads of 32 or 64, 49-512 tokens.
_SDPA_GRID = ((1, 12, 197, 64), (8, 12, 197, 64), (2, 6, 49, 32), (4, 3, 256, 32), (1, 12, 512, 64), (8, 6, 64, 32), (4, 12, 196, 64))


def benchmarks(full: bool = False) -> Iterator[Benchmark]:
    """The grid: matrix products, convolutions (dense, 1x1, grouped, depthwise, stem), memory-bound ops.

    Sizes span the shapes of image and transformer models at batch 1 to 8; ``full`` adds larger ones
    (for a GPU, where the small ones are all launch floor).
    """
    f32, bf16 = torch.float32, torch.bfloat16
    scale = 4 if full else 1
    for dt in (f32, bf16):
        for m, n, k in (
            (1, 1000, 512),
            (1, 1024, 1024),
            (64, 256, 256),
            (196, 768, 768),
            (256, 1024, 256),
            (512, 512, 512),
            (1024, 1024, 1024),
        ):
            yield _mm(m * (scale if m > 1 else 1), n, k, dt)
    for batch, fin, fout in ((1, 768, 3072), (8, 1280, 1000), (1576, 768, 768), (392, 384, 1536)):
        yield _linear(batch, fin, fout, f32)
    for b, m, n, k in ((12, 197, 197, 64), (96, 49, 49, 32), (12, 197, 64, 197)):
        yield _bmm(b * scale, m, n, k, f32)
    for b, heads, seq, dim in _SDPA_GRID:
        yield _sdpa(b * scale, heads, seq, dim, f32)
    for x, cout, kernel, groups, stride in (
        ((1, 64, 56, 56), 64, 3, 1, 1), ((8, 64, 56, 56), 64, 3, 1, 1), ((1, 128, 28, 28), 128, 3, 1, 1),
        ((1, 256, 14, 14), 256, 3, 1, 1), ((1, 512, 7, 7), 512, 3, 1, 1), ((8, 512, 7, 7), 512, 3, 1, 1),
        ((1, 3, 224, 224), 64, 7, 1, 2), ((8, 3, 224, 224), 32, 3, 1, 2), ((1, 3, 224, 224), 96, 4, 1, 4),
        ((1, 256, 56, 56), 64, 1, 1, 1), ((1, 64, 56, 56), 256, 1, 1, 1), ((8, 64, 56, 56), 256, 1, 1, 1),
        ((1, 1024, 14, 14), 256, 1, 1, 1), ((8, 512, 7, 7), 2048, 1, 1, 1), ((1, 16, 112, 112), 16, 1, 1, 1),
        ((1, 64, 56, 56), 64, 3, 8, 1), ((1, 224, 28, 28), 224, 3, 14, 1), ((8, 104, 28, 28), 104, 3, 13, 1),
        ((1, 32, 112, 112), 32, 3, 32, 1), ((8, 96, 56, 56), 96, 3, 96, 1), ((1, 672, 14, 14), 672, 5, 672, 1),
        ((1, 96, 56, 56), 96, 7, 96, 1), ((1, 144, 56, 56), 144, 3, 144, 2), ((1, 1152, 7, 7), 1152, 5, 1152, 1),
    ):  # fmt: skip
        yield _conv((x[0] * scale, *x[1:]), cout, kernel, groups, stride, f32)
    yield _conv((1, 64, 56, 56), 64, 3, 1, 1, bf16)
    yield _conv((1, 256, 56, 56), 64, 1, 1, 1, bf16)
    for dt in (f32, bf16):
        for numel in (4096, 65536, 1 << 20, 1 << 23):
            numel *= scale
            yield _add(numel, dt)
            yield _unary("relu", numel, dt, torch.relu)
            if dt is f32:
                yield _unary("gelu", numel, dt, F.gelu)
                yield _unary("mul", numel, dt, lambda x: x * 0.5)
                yield _unary("softmax", numel, dt, lambda x: x.softmax(-1))
                yield _unary("layer_norm", numel, dt, lambda x: F.layer_norm(x, x.shape[-1:]))
                yield _unary("sum", numel, dt, lambda x: x.sum(-1))
    for shape in ((1, 64, 112, 112), (8, 64, 112, 112), (1, 256, 14, 14)):
        yield _image("batch_norm", (shape[0] * scale, *shape[1:]), f32, _batch_norm)
    for shape in ((1, 64, 112, 112), (8, 64, 112, 112)):
        yield _image("max_pool2d", (shape[0] * scale, *shape[1:]), f32, lambda x: F.max_pool2d(x, 3, 2, 1))
    for shape in ((1, 512, 7, 7), (8, 960, 7, 7), (1, 1280, 14, 14)):
        yield _image("adaptive_avg_pool2d", (shape[0] * scale, *shape[1:]), f32, lambda x: F.adaptive_avg_pool2d(x, 1))
    for shape in ((1, 96, 56, 56), (8, 256, 28, 28)):
        yield _image("hardswish", (shape[0] * scale, *shape[1:]), f32, F.hardswish)


def _sync_for(dev: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)


def _record(bench: Benchmark, dev: torch.device) -> dict[str, Any]:
    call = bench.make(dev)
    op, shapes, flops, nbytes, out_shapes = cost_of(call)
    with torch.no_grad():
        seconds = time_call(call, _sync_for(dev))
    dtype = str(bench.dtype).removeprefix("torch.")
    return {"label": bench.label, "op": op, "shapes": shapes, "out_shapes": out_shapes, "dtype": dtype, "flops": flops,
            "bytes": nbytes, "seconds": seconds}  # fmt: skip


def measure_floors(dev: torch.device) -> dict[str, float]:
    """The per-op floors: a one-element add, a view, and one op of a chain of small layers (batch 1)."""
    sync = _sync_for(dev)
    one = torch.zeros(1, device=dev)
    blocks = 40
    chain = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.GELU()) for _ in range(blocks)]).to(dev).eval()
    x = torch.randn(1, 16, device=dev)
    with torch.no_grad():
        floor = time_call(lambda: one + one, sync)
        view = time_call(lambda: one.view(1, 1), sync)
        # a Linear at batch 1 is a view of its weight (t) and one addmm: 3 kernels and 1 view per block
        chained = time_call(lambda: chain(x), sync, chunk_s=0.02)
    return {"floor_s": floor, "view_s": view, "host_per_kernel_s": max((chained - blocks * view) / (3 * blocks), floor)}


#: Output sizes (MiB) at which a fresh output's first touch is timed, largest first: fine around glibc's
#: 32 MiB, with the three largest always above any limit an allocator keeps.
TOUCH_LADDER_MIB = (128, 96, 64, 48, 36, 33, 31, 28, 24, 16, 8, 4, 1)
#: Sizes whose cost per byte is at least this share of the largest sizes' pay for their first touch.
TOUCH_SHARE = 1 / 3
#: How many times the ladder is climbed, each size's figures the median of the climbs. One climb is not enough:
#: on this 2-core virtual machine the first calibration after an idle hour read 1.35 ns a byte (and a limit of
#: 78 MiB), where three climbs in a row ten minutes later read 0.178-0.182 ns and 32 MiB (the host backing the
#: guest's pages afresh, once); each climb takes about 2 s.
TOUCH_CLIMBS = 5


def _fresh_extra(mib: float, dev: torch.device) -> tuple[float, float]:
    """Seconds an op writing ``mib`` MiB (a ``clamp_min``) takes into a fresh output over a kept one, and
    the kept one's own."""
    n = int(mib * 2**20) // 4
    x, kept = torch.randn(n, device=dev), torch.empty(n, device=dev)
    sync = _sync_for(dev)
    fresh = time_call(lambda: torch.clamp_min(x, 0.0), sync)
    reuse = time_call(lambda: torch.clamp_min(x, 0.0, out=kept), sync)
    return max(fresh - reuse, 0.0), reuse


def measure_first_touch(dev: torch.device) -> dict[str, Any]:
    """Where fresh outputs start to come from new pages, and what each byte's first touch costs there.

    One op in a loop frees its output and allocates the next: below the allocator's limit the freed block
    is re-used, above it (glibc maps such a block and unmaps it when freed) every page faults again.
    Timed at :data:`TOUCH_LADDER_MIB`, largest first, :data:`TOUCH_CLIMBS` times over (each size's median): the cost per byte is the median of the three largest
    sizes', the limit the geometric middle between the smallest size from which every larger one pays at
    least :data:`TOUCH_SHARE` of it and the next smaller. When even the largest sizes pay less than a
    tenth of the op's own time for their first touch, there is no limit (``limit_bytes`` is ``None``: an
    allocator that keeps its blocks). Run only on the CPU (a GPU's caching allocator keeps its blocks).

    With glibc the limit is at most its mmap threshold as :func:`~graphprof.measure.heap.settle_malloc` leaves
    it (32 MiB - 16 KiB): a loop of one op finds its one block a little above it at the heap's free top (here
    33 MiB paid nothing in the loop, the ladder's middle is 34.5 MiB), a forward among its live blocks mostly
    not. Counted on this 2-core machine, efficientnet_b3 at batch 8 (blocks of 34.56 MB throughout its third
    stage): 1279-1299 MB faulted a forward; the middle prices 415 MB whole and the share of 3002 MB, 547 MB in
    all; the threshold 1313 MB whole and the share of 2103 MB, 1406 MB in all (the share 4.4%). A depthwise
    convolution there faulted its output and both copies at 34.56 MB in a loop too (103.7 MB a call).
    Also records :func:`conv_copies`.
    """
    climbs = [[_fresh_extra(mib, dev) for mib in TOUCH_LADDER_MIB] for _ in range(TOUCH_CLIMBS)]
    ladder = [
        (mib * 2**20, statistics.median(c[i][0] for c in climbs), statistics.median(c[i][1] for c in climbs))
        for i, mib in enumerate(TOUCH_LADDER_MIB)
    ]
    rates = [extra / size for size, extra, _ in ladder]
    top = statistics.median(rates[:3])
    table = [[size, extra] for size, extra, _ in ladder]
    if top * ladder[0][0] < 0.1 * ladder[0][2]:
        return {"limit_bytes": None, "per_byte_s": 0.0, "ladder": table, **conv_copies()}
    paying = next((i for i in range(len(rates)) if rates[i] < TOUCH_SHARE * top), len(rates))
    lower = ladder[paying][0] if paying < len(ladder) else ladder[-1][0] / 2
    limit = (ladder[paying - 1][0] * lower) ** 0.5
    if glibc():  # at most the settled mmap threshold (see the docstring)
        limit = min(limit, float(STEADY_BLOCK_BYTES))
    return {"limit_bytes": limit, "per_byte_s": top, "ladder": table, **conv_copies()}


def conv_copies() -> dict[str, int]:
    """What a convolution's unseen blocked copies come to here (:func:`graphprof.devices.firsttouch.conv_scratch`):
    oneDNN's channel block (16 where PyTorch dispatches AVX-512 kernels, 8 for AVX2; 0 without oneDNN or
    with another instruction set: no copies priced) and the threads the calibration runs (one thread takes
    PyTorch's own 1x1 kernel)."""
    capability = torch.backends.cpu.get_cpu_capability()
    usable = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    block = 16 if capability.startswith("AVX512") else 8 if capability == "AVX2" else 0
    return {"conv_block": block if usable else 0, "threads": torch.get_num_threads()}


def measure_op_table(device: str | torch.device = "cpu", progress: Progress | None = None, full: bool | None = None) -> dict[str, Any]:
    """Measure every benchmark of :func:`benchmarks` and the floors on ``device``: the raw op table.

    Returns ``{"floors": {...}, "records": [...]}`` (each record: label, main aten op, its input shapes,
    dtype, FLOPs and bytes by graphprof's formulas, median seconds per call). A benchmark the device
    cannot run (a dtype without a kernel) is left out with its error in ``"skipped"``.
    """
    dev = torch.device(device)
    if dev.type == "cpu":
        settle_malloc()  # the grid, the first touch and the zoo's forwards all see the heap's steady state
    grid = list(benchmarks(full=dev.type == "cuda" if full is None else full))
    total = len(grid) + 1
    if progress is not None:
        progress(0, total, "per-op floors")
    floors: dict[str, Any] = {**measure_floors(dev), **({"first_touch": measure_first_touch(dev)} if dev.type == "cpu" else {})}
    records: list[dict[str, Any]] = []
    skipped: list[str] = []
    for i, bench in enumerate(grid, start=1):
        if progress is not None:
            progress(i, total, bench.label)
        try:
            records.append(_record(bench, dev))
        except RuntimeError as exc:  # e.g. no bfloat16 kernel for this op on this device
            skipped.append(f"{bench.label} {bench.dtype}: {first_line(exc)}")
    if progress is not None:
        progress(total, total, "done")
    return {"floors": floors, "records": records, "skipped": skipped}


def _norm_bench(shape: tuple[int, ...], dt: torch.dtype) -> Benchmark:
    if len(shape) == 4:
        return _image("batch_norm", shape, dt, _batch_norm)
    return _image("layer_norm", shape, dt, lambda x: F.layer_norm(x, x.shape[-1:]))


def _activation(rng: random.Random, numel: int, dt: torch.dtype) -> Benchmark:
    name, fn = rng.choice((("hardswish", F.hardswish), ("relu", torch.relu), ("hardtanh", F.relu6)))
    return _unary(name, numel, dt, fn)


def _activation_exp(rng: random.Random, numel: int, dt: torch.dtype) -> Benchmark:
    name, fn = rng.choice((("gelu", F.gelu), ("silu", F.silu), ("sigmoid", torch.sigmoid)))
    return _unary(name, numel, dt, fn)


def _kind_grid(kind: str, rng: random.Random, dt: torch.dtype) -> Benchmark:
    """One random configuration of ``kind``, in the ranges image and transformer models use at batch 1 to 8."""
    b = rng.choice((1, 2, 4, 8))
    c = rng.choice((16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768))
    hw = rng.choice((7, 14, 28, 56, 112))
    seq, dim = rng.choice((49, 64, 196, 197, 256, 512)), rng.choice((32, 64, 96, 128, 192, 384, 768))
    image = (b, c, hw, hw)
    if kind == "conv_dw":
        return _conv(image, c, rng.choice((3, 5, 7)), c, rng.choice((1, 1, 2)), dt)
    if kind == "conv_grouped":
        g = rng.choice((2, 4, 8, 16, 32))
        return _conv((b, max(g, c // g * g), hw, hw), max(g, c // g * g), 3, g, rng.choice((1, 2)), dt)
    if kind == "conv_pointwise":
        return _conv(image, rng.choice((16, 64, 128, 256, 512, 1024)), 1, 1, 1, dt)
    if kind == "conv_dense":
        return _conv(image, rng.choice((32, 64, 128, 256)), rng.choice((3, 3, 5, 7)), 1, rng.choice((1, 2)), dt)
    if kind == "linear":
        return _linear(b * rng.choice((1, 49, 197)), dim, rng.choice((256, 768, 1000, 3072)), dt)
    if kind == "bmm":
        return _bmm(b * rng.choice((3, 6, 12)), seq, rng.choice((seq, 32, 64)), rng.choice((seq, 32, 64)), dt)
    if kind == "sdpa":
        return _sdpa(b, rng.choice((3, 6, 12)), seq, rng.choice((32, 64)), dt)
    numel = b * seq * dim
    table: dict[str, Callable[[], Benchmark]] = {
        "norm": lambda: _norm_bench(rng.choice((image, (b, seq, dim))), dt),
        "softmax": lambda: _unary("softmax", numel, dt, lambda x: x.softmax(-1)),
        "activation": lambda: _activation(rng, numel, dt),
        "activation_exp": lambda: _activation_exp(rng, numel, dt),
        "pooling": lambda: _image("max_pool2d", image, dt, lambda x: F.max_pool2d(x, 3, 2, 1)),
        "reduction": lambda: _unary("mean", numel, dt, lambda x: x.mean(-1)),
        "copy": lambda: _unary("clone", numel, dt, lambda x: x.t().contiguous()),
        "gather": lambda: _unary("index_select", numel, dt, lambda x: x.index_select(0, torch.arange(0, x.shape[0], 2, device=x.device))),
    }  # fmt: skip
    return table.get(kind, lambda: _add(numel, dt))()


def kind_benchmarks(kinds: list[str], per_kind: int, seed: int = 0) -> list[Benchmark]:
    """``per_kind`` random float32 configurations of each kind (adaptive sampling's second round)."""
    rng = random.Random(seed)
    return [_kind_grid(kind, rng, torch.float32) for kind in kinds for _ in range(per_kind)]


def measure_benchmarks(grid: list[Benchmark], device: str | torch.device = "cpu", progress: Progress | None = None) -> list[dict[str, Any]]:
    """Records of ``grid`` (as :func:`measure_op_table`'s), a benchmark the device cannot run left out."""
    dev = torch.device(device)
    records = []
    for i, bench in enumerate(grid, start=1):
        if progress is not None:
            progress(i, len(grid), bench.label)
        try:
            records.append(_record(bench, dev))
        except RuntimeError:
            continue
    return records
