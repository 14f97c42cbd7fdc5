"""Predicted time: one model for every device, fitted from op tables (see :mod:`graphprof.calibrate.fit`).

Each aten call of a profile becomes two demands, host time ``h`` (the dispatcher and, on a GPU, the
launch) and kernel time ``k``::

    k = latency[class] + max(work_flops / (peak * efficiency[class](depth)),
                             bytes / (bandwidth(bytes) * memory_fraction[class]))
    efficiency(depth) = compute_fraction * depth / (depth + half_depth)
    1 / bandwidth(b)  = (C / (C + b)) / near + (b / (C + b)) / far

``depth`` is the reduction depth of a contraction (``K`` of a matrix product, ``C_in / groups * kh *
kw`` of a convolution): a depthwise convolution (depth 9) or an RGB stem (depth 27) reaches less of the
peak than a dense 3x3 (depth 576), on any device; ``half_depth`` is fitted per class. ``bandwidth(b)``
is the streaming rate of a working set of ``b`` bytes: near the cache's rate below ``C``, DRAM's above.
``k`` is never below the roofline's lower bound, so the prediction never is either.

**Host and kernel combine on a timeline** (:func:`timeline`): the host issues op after op; a kernel
starts when both it is issued and the device is free; after issuing, the host waits for the kernel for
a share ``1 - overlap`` of its remaining time. ``overlap`` is fitted per device: about 0 on a CPU (the
host *is* the device: times add up) and about 1 on a GPU (launches run ahead of kernels). For one op
repeated back to back this gives the steady per-op time (:func:`steady_seconds`)::

    t = max(k, h + (1 - overlap) * k)

so short kernels cost the host floor, long ones their kernel time, and on a CPU the plain sum.

Worked example (CPU, overlap 0): a 3x3 convolution of 231 MFLOPs at depth 576 on a 160 GFLOP/s core
with compute_fraction 0.95, half_depth 16: efficiency = 0.95 * 576 / 592 = 0.924, so k = 231e6 /
(160e9 * 0.924) = 1.56 ms, plus a host floor of 9 us: 1.57 ms.

**No wild points.** With kind models (:mod:`graphprof.devices.opmodel`), each call's time is held within the
efficiencies (roofline time over measured time) its three nearest samples reached: a law queried outside the
range its samples cover runs no faster than the best of them and no slower than the worst, whatever its slope
says. The calls further than :data:`OUT_OF_RANGE_SD` outside are named (:func:`out_of_range`), and the
interval widens to take in the law's own figure for them.

The fitted tables are data (:mod:`graphprof.devices.table`), carried by the device they are for
(:attr:`graphprof.devices.hardware.Hardware.calibration`): nothing here reads a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from graphprof.base.choices import OpStatus
from graphprof.base.record import Record
from graphprof.devices.firsttouch import FirstTouch
from graphprof.devices.hardware import Hardware
from graphprof.devices.heapreplay import forward_touch
from graphprof.devices.opmodel import ALONE, IN_CONTEXT, Interval, OpModel, call_of, op_kind
from graphprof.devices.table import Calibration

__all__ = [
    "OP_CLASSES",
    "OUT_OF_RANGE_SD",
    "OutOfRange",
    "Prediction",
    "host_seconds",
    "kernel_seconds",
    "op_class",
    "out_of_range",
    "predict",
    "predict_interval",
    "predict_ops",
    "reduction_depth",
    "steady_seconds",
    "timeline",
]

_MATMUL = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "matmul", "linear", "_int_mm"})
_CONV = frozenset({"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution", "convolution_backward"})
_NORM = frozenset({
    "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_group_norm", "_fused_rms_norm", "rms_norm", "layer_norm", "batch_norm", "group_norm",
    "native_layer_norm_backward", "native_batch_norm_backward", "native_group_norm_backward",
})  # fmt: skip
_REDUCTION = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "_softmax", "softmax", "_log_softmax", "log_softmax",
    "_safe_softmax", "var", "std", "var_mean", "std_mean", "norm", "linalg_vector_norm", "argmax", "argmin",
    "cumsum", "logsumexp", "prod", "all", "any", "_softmax_backward_data",
})  # fmt: skip
_GATHER = frozenset({"embedding", "index_select", "index", "gather", "embedding_bag", "_embedding_bag"})

#: The op families a calibration table lists rates for.
OP_CLASSES = ("matmul", "attention", "conv", "conv_depthwise", "norm", "reduction", "pooling", "gather", "elementwise")


def op_class(op: str, input_shapes: Sequence[Sequence[int]] = ()) -> str:
    """The family an aten op's kernel belongs to: ``"aten.addmm"`` -> ``"matmul"``.

    A convolution whose weight has one input channel per group (``(C, 1, kh, kw)``) is depthwise.
    """
    name = op.rsplit(".", 1)[-1]
    if name in _MATMUL:
        return "matmul"
    if "attention" in name:
        return "attention"
    if name in _CONV:
        weight = input_shapes[1] if len(input_shapes) > 1 else ()
        return "conv_depthwise" if len(weight) >= 3 and weight[1] == 1 and weight[0] > 1 else "conv"
    if name in _NORM:
        return "norm"
    if name in _REDUCTION:
        return "reduction"
    if "pool" in name:
        return "pooling"
    if name in _GATHER:
        return "gather"
    return "elementwise"


def reduction_depth(op: str, input_shapes: Sequence[Sequence[int]] = ()) -> float:
    """Multiply-adds per output element of a contraction; 1 for anything else.

    ``aten.mm`` of (m, k) x (k, n): k. ``aten.addmm(bias, a, b)``: a's last dimension. ``aten.convolution``
    with weight (C_out, C_in / groups, kh, kw): C_in / groups * kh * kw (9 for a depthwise 3x3).
    Attention: the head dimension (q's last).
    """
    klass = op_class(op, input_shapes)
    shapes = [tuple(s) for s in input_shapes]
    if klass in ("conv", "conv_depthwise") and len(shapes) > 1 and len(shapes[1]) >= 3:
        return float(math.prod(shapes[1][1:]))
    if klass == "matmul" and shapes:
        name = op.rsplit(".", 1)[-1]
        first = shapes[1] if name.startswith("add") or name.startswith("baddbmm") else shapes[0]
        return float(first[-1]) if first else 1.0
    if klass == "attention" and shapes and shapes[0]:
        return float(shapes[0][-1])
    return 1.0


def kernel_seconds(op: Any, dtype: str, hardware: Hardware, calibration: Calibration) -> float:
    """Predicted device time of one kernel (an :class:`~graphprof.cost.result.OpRecord`), host floor excluded.

    Never below the roofline's ``max(flops / peak, bytes / bandwidth)`` on ``hardware``.
    """
    klass = op_class(op.op, op.input_shapes)
    rates = calibration.rates_for(dtype, klass)
    peak = hardware.peak_flops(dtype)
    flops = float(op.cost.flops * op.work_fraction)
    nbytes = float(op.cost.bytes_moved)
    compute = flops / (peak * rates.efficiency(reduction_depth(op.op, op.input_shapes)))
    memory = calibration.memory_seconds(nbytes, hardware.bandwidth) / rates.memory_fraction
    bound = max(float(op.cost.flops) / peak, nbytes / hardware.bandwidth)
    return max(bound, rates.latency_s + max(compute, memory))


def host_seconds(op: Any, calibration: Calibration) -> float:
    """Host time of one recorded call: an eager kernel's floor, a view's, or nothing (``prim.*``)."""
    if op.status is OpStatus.ZERO_COST:
        return calibration.view_s if op.op.startswith("aten.") else 0.0
    return calibration.host_per_kernel_s


def steady_seconds(host: float, kernel: float, overlap: float) -> float:
    """Per-op time of one op repeated back to back on :func:`timeline`: ``max(k, h + (1 - overlap) * k)``."""
    return max(kernel, host + (1.0 - overlap) * kernel)


def timeline(demands: Iterable[tuple[float, float]], overlap: float) -> list[float]:
    """Each op's share of the wall time of a sequence of (host, kernel) demands; they sum to the total.

    The host issues each op after its own time; the kernel starts when issued and the device is free;
    then the host waits for a share ``1 - overlap`` of the kernel's remaining time. A kernel of 0 (a
    view) costs host time only. Every op's share is at least its kernel time.
    """
    host = device = end = 0.0
    shares = []
    for h, k in demands:
        host += h
        if k > 0.0:
            device = max(host, device) + k
            host += (1.0 - overlap) * max(device - host, 0.0)
        now = max(host, device)
        shares.append(now - end)
        end = now
    return shares


#: A call further than this outside its kind's sampled range (standard deviations of the furthest feature) is
#: named as priced out of range (:func:`out_of_range`).
OUT_OF_RANGE_SD = 0.25


@dataclass(frozen=True)
class OutOfRange(Record):
    """One call its kind's samples do not cover: how far outside (standard deviations), the seconds it is priced
    at (held within its nearest samples' efficiencies) and what the kind's law alone would have said."""

    index: int
    op: str
    kind: str
    excess_sd: float
    seconds: float
    law_seconds: float


def _held(t: float, own: float, near: Any, dtype: str, hardware: Hardware) -> float:
    """``t`` held between the times the nearest samples' efficiencies give this call's own work: efficiency is
    a sample's roofline time (``max(flops / peak, bytes / bandwidth)``) over its measured time, and a call the
    samples do not cover runs no faster than the best of them and no slower than the worst. Every call is held
    so, inside the range too (there the law and its neighbours already agree with the samples, mostly).

    Worked example: neighbours that ran at 40% and 60% of their roofline time bound a call whose own roofline
    time is 1 ms to 1.67-2.5 ms; a law that says 30 ms for it (run off outside the range) gives 2.5 ms. ``own`` is
    the call's own roofline time."""
    peak, bandwidth = hardware.peak_flops(dtype), hardware.bandwidth
    rates = [max(float(flops) / peak, float(nbytes) / bandwidth) / float(seconds) for flops, nbytes, seconds in near if seconds > 0]
    if own <= 0.0 or not rates or max(rates) <= 0.0:
        return t
    return min(max(t, own / max(rates)), own / max(min(rates), 1e-12))


def _op_model_seconds(
    ops: Sequence[Any], dtype: str, hardware: Hardware, model: OpModel, speed: float = 1.0, touch: FirstTouch | None = None
) -> list[tuple[float, float, float, float, float]]:
    """(seconds, q_low, q_high, the law's seconds, excess) of each call from the kind models: never below the
    call's roofline bound, held within its nearest samples' efficiencies outside its kind's sampled range, plus
    the first touch of its fresh memory (``touch``: the forward's term, :func:`forward_touch`); all of it times
    ``speed``, the machine's speed now against the calibration's
    (:attr:`~graphprof.devices.table.Calibration.speed`), the roofline bound aside."""
    # a fused CPU kernel as the calls it makes, each priced as the loop's samples ran (ALONE): back to back in one
    # kernel, on operands the call before just wrote, with no module call or Python between them
    priced = [(part, ALONE if parts else IN_CONTEXT) for op in ops for parts in [getattr(op, "parts", ())] for part in (parts or (op,))]
    calls = [call_of(op, context) for op, context in priced]
    known = [(i, c) for i, c in enumerate(calls) if c is not None]
    predicted = model.predict([c for _, c in known])
    ranges = model.beyond_range([c for _, c in known])
    out = [(0.0, 0.0, 0.0, 0.0, 0.0)] * len(priced)
    peak = hardware.peak_flops(dtype)
    for (i, _), (t, lo, hi), (far, near) in zip(known, predicted, ranges, strict=True):
        op = priced[i][0]
        bound = max(float(op.cost.flops) * float(op.work_fraction) / peak, float(op.cost.bytes_moved) / hardware.bandwidth)
        held = speed * (t if near is None else _held(t, bound, near, dtype, hardware))
        out[i] = (max(held, bound), lo, hi, max(speed * t, bound), far)
    # the first touch of fresh memory: every aten call's, one without a kind's included
    each = [
        (t + (x := speed * (0.0 if touch is None else touch.seconds(op))), lo, hi, law + x, far)
        for (op, _), (t, lo, hi, law, far) in zip(priced, out, strict=True)
    ]
    return _per_op(ops, each)


def _per_op(ops: Sequence[Any], each: list[tuple[float, float, float, float, float]]) -> list[tuple[float, float, float, float, float]]:
    """The prices of the calls :func:`_op_model_seconds` priced, one per op of ``ops``: a fused call's parts summed
    (their quantiles weighted by their seconds, the furthest out of range)."""
    out, at = [], 0
    for op in ops:
        group = each[at : at + max(len(getattr(op, "parts", ())), 1)]
        at += len(group)
        total = sum(g[0] for g in group)
        weight = [g[0] / total if total > 0 else 1.0 / len(group) for g in group]
        out.append((total, sum(w * g[1] for w, g in zip(weight, group, strict=True)), sum(w * g[2] for w, g in zip(weight, group, strict=True)),
                    sum(g[3] for g in group), max(g[4] for g in group)))  # fmt: skip
    return out


@dataclass(frozen=True)
class Prediction:
    """What the predictor says of a sequence of calls, computed once: each call's seconds, the total's 80%
    interval (kind models only) and the calls priced outside their kind's sampled range."""

    seconds: tuple[float, ...]
    interval: Interval | None = None
    out_of_range: tuple[OutOfRange, ...] = ()
    #: the page faults it priced inside the calls: the forward's first-touch term (:func:`forward_touch`)
    first_touch: FirstTouch | None = None


def predict(
    ops: Sequence[Any],
    dtype: str,
    hardware: Hardware,
    calibration: Calibration,
    peak_bytes: float | None = None,
    allocations: Sequence[Any] = (),
) -> Prediction:
    """Each call's predicted seconds (:func:`predict_ops`), the interval (:func:`predict_interval`) and the calls
    out of range (:func:`out_of_range`) of ``ops``, from one pass of the predictor. The page faults inside the
    calls (:func:`~graphprof.devices.heapreplay.forward_touch`): by the heap replayed over ``allocations``, the dry
    run's allocation order of the forward ``ops`` come from; without it, by the share law at ``peak_bytes``, the
    dry run's peak of live activation bytes (``None``: not known, the share priced)."""
    model = calibration.op_model
    if model is None:
        return Prediction(tuple(predict_ops(ops, dtype, hardware, calibration)))
    touch = None if model.first_touch is None else forward_touch(model.first_touch, ops, peak_bytes, allocations)
    parts = _op_model_seconds(ops, dtype, hardware, model, calibration.speed, touch)
    base = model.interval([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts])
    below = sum(max(t - law, 0.0) for t, _, _, law, _ in parts)
    above = sum(max(law - t, 0.0) for t, _, _, law, _ in parts)
    interval = replace(base, low=max(base.low - below, 0.0), high=base.high + above) if below or above else base
    outside = tuple(OutOfRange(i, op.op, op_kind(op.op, op.status, op.input_shapes) or "", far, t, law)
                    for i, (op, (t, _, _, law, far)) in enumerate(zip(ops, parts, strict=True)) if far > OUT_OF_RANGE_SD)  # fmt: skip
    return Prediction(tuple(p[0] for p in parts), interval, outside, touch)


def out_of_range(ops: Sequence[Any], dtype: str, hardware: Hardware, calibration: Calibration) -> list[OutOfRange]:
    """The calls of ``ops`` priced outside their kind's sampled range (further than :data:`OUT_OF_RANGE_SD`),
    in execution order; none without kind models."""
    return list(predict(ops, dtype, hardware, calibration).out_of_range)


def predict_interval(ops: Sequence[Any], dtype: str, hardware: Hardware, calibration: Calibration) -> Interval | None:
    """The 80% interval of the total of ``ops``, where the calibration has kind models (else ``None``), widened by
    what each call priced out of its kind's range would have cost at the law's own extrapolation."""
    return predict(ops, dtype, hardware, calibration).interval


def predict_ops(
    ops: Sequence[Any], dtype: str, hardware: Hardware, calibration: Calibration, peak_bytes: float | None = None
) -> list[float]:
    """Predicted seconds of each recorded call of ``ops`` (in execution order): the kind models' where the
    calibration has them (each op in context, host included), else the class rates on :func:`timeline`;
    ``peak_bytes`` as for :func:`predict` (the faults by the share law: no allocation order here)."""
    model = calibration.op_model
    if model is not None:
        touch = None if model.first_touch is None else forward_touch(model.first_touch, ops, peak_bytes)
        return [p[0] for p in _op_model_seconds(ops, dtype, hardware, model, calibration.speed, touch)]
    demands = [
        (host_seconds(op, calibration), 0.0 if op.status is OpStatus.ZERO_COST else kernel_seconds(op, dtype, hardware, calibration))
        for op in ops
    ]
    return timeline(demands, calibration.overlap)
