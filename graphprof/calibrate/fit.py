"""Fit the prediction model of :mod:`graphprof.devices.predict` to an op table: one procedure for every device.

An op table (from :func:`graphprof.calibrate.bench.measure_op_table`, or the H100 table converted by
:func:`records_from_opbench`) is a list of single-call timings, each with its aten op, input shapes,
dtype, FLOPs, bytes and seconds, and the floors of a bare call (``floor_s``), of a view (``view_s``) and
of one eager op inside a module (``host_per_kernel_s``). The fit, in two steps, by grid search
minimising the sum of absolute log errors (robust to one odd record)::

    1. overlap, MemoryCurve   from the float32 streaming records (add, relu) across sizes:
                              t = steady(floor, bytes / bandwidth(bytes), overlap)
                              (on a GPU overlap is 1, CUDA's asynchronous launch: see _fit_streaming)
    2. per dtype and class    compute_fraction, memory_fraction, latency, half_depth, from every record:
                              t = steady(floor, kernel, overlap)   (kernel as in graphprof.devices.predict)

No parameter is set by hand for a device or a model: the same grids fit a CPU and an H100 (the GPU's overlap
is the launch queue's structure, not a number chosen for one device). A class a
dtype has no records for takes float32's rates (``accuracy["borrowed"]`` lists them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from graphprof.base.choices import Lowering
from graphprof.devices.hardware import Hardware
from graphprof.devices.predict import OP_CLASSES, op_class, reduction_depth
from graphprof.devices.table import Calibration, ClassRates, MemoryCurve
from graphprof.formulas.attention import causal_work_fraction

__all__ = ["fit_op_table", "records_from_opbench", "STREAMING_OPS"]

#: The ops whose records give the bandwidth curve: they only stream memory.
STREAMING_OPS = frozenset({"aten.add", "aten.relu"})

_F64 = torch.float64


def _geom(lo: float, hi: float, n: int) -> torch.Tensor:
    return torch.logspace(math.log10(lo), math.log10(hi), n, dtype=_F64)


def _steady(host: float, kernel: torch.Tensor, overlap: torch.Tensor | float) -> torch.Tensor:
    """:func:`graphprof.devices.predict.steady_seconds` over tensors."""
    return torch.maximum(kernel, host + (1.0 - overlap) * kernel)


def _curve_seconds(nbytes: torch.Tensor, near: torch.Tensor, far: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    """:meth:`graphprof.devices.table.MemoryCurve.seconds` over tensors (bandwidths in bytes per second)."""
    share = cache / (cache + nbytes)
    return nbytes * (share / near + (1.0 - share) / far)


def _fit_streaming(records: Sequence[Mapping[str, Any]], floor: float, kind: str) -> tuple[float, MemoryCurve]:
    """Overlap and bandwidth curve from streaming records of several sizes.

    On a GPU the overlap is not fitted: a CUDA launch is asynchronous, the host queueing the next kernel while
    the device runs this one, so a back-to-back stream takes ``max(launch, kernel)`` (overlap 1). The streaming
    records cannot tell it apart from a faster bandwidth curve (each is either launch-bound or far above the
    launch), and a free fit landed anywhere from 0 (H200) to 0.9 (H100) on equally good losses."""
    nbytes = torch.tensor([float(r["bytes"]) for r in records], dtype=_F64)
    seconds = torch.tensor([float(r["seconds"]) for r in records], dtype=_F64)
    rate = nbytes / seconds
    grid = torch.ones(1, dtype=_F64) if kind == Lowering.CUDA else torch.linspace(0.0, 1.0, 11, dtype=_F64)
    overlap = grid[:, None, None, None, None]
    near = _geom(float(rate.max()) * 0.5, float(rate.max()) * 8, 21)[None, :, None, None, None]
    far = _geom(float(rate.min()) * 0.25, float(rate.max()) * 2, 21)[None, None, :, None, None]
    cache = _geom(16 * 2**10, 2**30, 33)[None, None, None, :, None]
    pred = _steady(floor, _curve_seconds(nbytes, near, far, cache), overlap)
    loss = (pred / seconds).log().abs().sum(-1)
    loss = loss + 1e-6 * near[..., 0].log() / math.log(10)  # ties: the smallest near rate that fits
    loss = loss.masked_fill((far > near)[..., 0], math.inf)
    i, j, k, m = (int(x) for x in torch.unravel_index(torch.argmin(loss), loss.shape))
    curve = MemoryCurve(float(near.flatten()[j]) / 1e9, float(far.flatten()[k]) / 1e9, float(cache.flatten()[m]))
    return float(overlap.flatten()[i]), curve


#: compute fractions: geometric from 0.02, and every 0.025 from 0.5 up (where large products run, a 15% step is too coarse)
_CF = torch.cat([_geom(0.02, 0.5, 20), torch.linspace(0.525, 1.0, 20, dtype=_F64)])[:, None, None, None, None]
#: the classes whose rate is arithmetic: their fitted fraction never above the best one a record of theirs ran at
_COMPUTE_CLASSES = frozenset({"matmul", "attention", "conv"})
_MF = _geom(0.02, 2.0, 24)[None, :, None, None, None]
_LAT = torch.cat([torch.zeros(1, dtype=_F64), _geom(0.2e-6, 200e-6, 23)])[None, None, :, None, None]
_HALF = torch.tensor([0.0, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=_F64)[None, None, None, :, None]


def _fit_class(
    records: Sequence[Mapping[str, Any]], peak: float, hardware: Hardware, curve: MemoryCurve, floor: float, overlap: float, klass: str
) -> tuple[ClassRates, list[float]]:
    """(rates, relative error of each record) for one dtype and op class.

    In an arithmetic class the compute fraction is at most the best fraction of the peak any of its records
    ran at: a free fit traded the few large products (where a training step spends its time) for the many
    small ones, and priced an 8192 x 4096 x 16384 bf16 product at 97% of an H200's peak where it ran at 69%."""
    flops = torch.tensor([float(r["flops"]) for r in records], dtype=_F64)
    nbytes = torch.tensor([float(r["bytes"]) for r in records], dtype=_F64)
    depth = torch.tensor([reduction_depth(r["op"], r["shapes"]) for r in records], dtype=_F64)
    seconds = torch.tensor([float(r["seconds"]) for r in records], dtype=_F64)
    memory = torch.tensor([curve.seconds(float(b)) for b in nbytes], dtype=_F64)
    bound = torch.maximum(flops / peak, nbytes / hardware.bandwidth)
    compute = flops / (peak * _CF * depth / (depth + _HALF))
    kernel = torch.maximum(bound, _LAT + torch.maximum(compute, memory / _MF))
    pred = _steady(floor, kernel, overlap)
    loss = (pred / seconds).log().abs().sum(-1)
    if klass in _COMPUTE_CLASSES:
        best = float((flops / (seconds * peak)).max())
        loss = loss.masked_fill((_CF > best)[..., 0], math.inf)
    # ties (a parameter the records cannot pin down): the highest fractions, no latency, no depth effect
    loss = loss + 1e-6 * (-_CF.log() - _MF.log() + _LAT * 1e4 + (1 + _HALF).log())[..., 0]
    i, j, k, m = (int(x) for x in torch.unravel_index(torch.argmin(loss), loss.shape))
    rates = ClassRates(float(_CF.flatten()[i]), float(_MF.flatten()[j]), float(_LAT.flatten()[k]), float(_HALF.flatten()[m]))
    errors = (pred[i, j, k, m] / seconds - 1.0).tolist()
    return rates, errors


def _accuracy(errors: list[tuple[float, Mapping[str, Any]]], dropped: list[str], borrowed: list[str]) -> dict[str, Any]:
    absolute = sorted(abs(e) for e, _ in errors)
    worst = max(errors, key=lambda item: abs(item[0]))
    classes = sorted({op_class(r["op"], r["shapes"]) for _, r in errors})
    return {
        "records": len(errors),
        "dropped": dropped,
        "borrowed": borrowed,
        "median_abs_error": statistics.median(absolute),
        "p90_abs_error": absolute[int(0.9 * (len(absolute) - 1))],
        "max_abs_error": absolute[-1],
        "worst": f"{worst[1].get('label', worst[1]['op'])} {worst[1]['dtype']}: {worst[0]:+.0%}",
        "per_class_median_abs_error": {
            c: statistics.median(abs(e) for e, r in errors if op_class(r["op"], r["shapes"]) == c) for c in classes
        },
    }


def fit_op_table(table: Mapping[str, Any], hardware: Hardware, *, preset: str, kind: str, source: str = "") -> Calibration:
    """Fit :class:`~graphprof.devices.table.Calibration` for ``hardware`` (its peaks and bandwidth) to ``table``."""
    floors = table["floors"]
    floor = float(floors["floor_s"])
    records = [r for r in table["records"] if r["seconds"] >= 0.5 * floor]
    dropped = [f"{r.get('label', r['op'])} {r['dtype']}: below half the floor (no kernel)" for r in table["records"] if r not in records]
    streaming = [r for r in records if r["op"] in STREAMING_OPS and r["dtype"] == "float32"]
    streaming = streaming or [r for r in records if r["op"] in STREAMING_OPS]
    overlap, curve = _fit_streaming(streaming, floor, kind)
    rates: dict[str, dict[str, ClassRates]] = {}
    errors: list[tuple[float, Mapping[str, Any]]] = []
    for dtype in sorted({r["dtype"] for r in records}):
        peak = hardware.peak_flops(dtype)
        for klass in OP_CLASSES:
            chosen = [r for r in records if r["dtype"] == dtype and op_class(r["op"], r["shapes"]) == klass]
            if chosen:
                fitted, errs = _fit_class(chosen, peak, hardware, curve, floor, overlap, klass)
                rates.setdefault(dtype, {})[klass] = fitted
                errors += list(zip(errs, chosen, strict=True))
    base = rates.get("float32") or next(iter(rates.values()))
    borrowed = [f"{dtype} {klass}" for dtype, got in rates.items() for klass in base if klass not in got]
    for got in rates.values():
        for klass, value in base.items():
            got.setdefault(klass, value)
    return Calibration(
        preset=preset,
        kind=kind,
        bandwidth_gbs=hardware.bandwidth_gbs,
        launch_s=floor,
        host_per_kernel_s=float(floors.get("host_per_kernel_s") or floor),
        rates=rates,
        accuracy=_accuracy(errors, dropped, borrowed),
        source=source,
        overlap=overlap,
        view_s=float(floors.get("view_s", 0.0)),
        memory=curve,
    )


#: opbench.py's record names (``../shared/calibration/opbench.py``) -> the aten op graphprof records.
_OPBENCH_OPS = {
    "mm": "aten.mm", "bmm": "aten.bmm", "sdpa": "aten._scaled_dot_product_flash_attention",
    "sdpa_causal": "aten._scaled_dot_product_flash_attention", "conv2d": "aten.convolution",
    "conv2d_dw": "aten.convolution", "add": "aten.add", "add_tiny": "aten.add", "relu": "aten.relu",
    "gelu": "aten.gelu", "silu": "aten.silu", "mul_broadcast": "aten.mul", "to_copy": "aten._to_copy",
    "softmax": "aten._softmax", "sum": "aten.sum", "layer_norm": "aten.native_layer_norm",
    "batch_norm_eval": "aten._native_batch_norm_legit_no_training", "max_pool2d": "aten.max_pool2d_with_indices",
    "adaptive_avg_pool2d": "aten._adaptive_avg_pool2d", "embedding": "aten.embedding",
}  # fmt: skip


def records_from_opbench(raw: Mapping[str, Any]) -> dict[str, Any]:
    """An op table in :func:`fit_op_table`'s form from opbench.py's file (the H100 table).

    Seconds are ``stream_s`` (back to back, launches overlapped, as in a model's forward); FLOPs are those
    the kernel executes (a causal attention record counts the full square, the kernel about half). The
    floor is the back-to-back one-element add; ``host_per_kernel_s`` the file's own, else the add's
    one-call time (launch exposed). opbench measured no view: ``view_s`` is 0.
    """
    records = []
    tiny: dict[str, Mapping[str, Any]] = {}
    for r in raw["records"]:
        if "error" in r or r["op"] not in _OPBENCH_OPS:
            continue
        if r["op"] == "add_tiny":
            tiny[r["dtype"]] = r
            continue
        flops = float(r["flops"])
        if r["op"] == "sdpa_causal":
            flops *= causal_work_fraction(r["shapes"][0][-2], r["shapes"][1][-2])
        records.append({"label": f"{r['op']} {r['shapes']}", "op": _OPBENCH_OPS[r["op"]], "shapes": r["shapes"], "dtype": r["dtype"],
                        "flops": flops, "bytes": r["bytes"], "seconds": r["stream_s"]})  # fmt: skip
    ref = tiny.get("bfloat16") or next(iter(tiny.values()))
    floors = {"floor_s": ref["stream_s"], "view_s": 0.0, "host_per_kernel_s": raw.get("host_per_kernel_s") or ref["median_s"]}
    return {"floors": floors, "records": records}
