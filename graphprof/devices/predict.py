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
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from graphprof.base.choices import OpStatus
from graphprof.devices.hardware import Hardware
from graphprof.devices.opmodel import Interval, OpModel, Sample, call_of

__all__ = [
    "OP_CLASSES",
    "Calibration",
    "ClassRates",
    "MemoryCurve",
    "host_seconds",
    "kernel_seconds",
    "load_calibration",
    "op_class",
    "predict_interval",
    "predict_ops",
    "reduction_depth",
    "steady_seconds",
    "timeline",
]

_MATMUL = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "matmul", "linear", "_int_mm"})
_CONV = frozenset(
    {"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution", "convolution_backward"}
)
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


@dataclass(frozen=True)
class ClassRates:
    """What one op family reaches on a device: a share of the peak (by reduction depth), a share of the
    streaming bandwidth, and a fixed latency per kernel (setup, tail, wave quantisation)."""

    compute_fraction: float
    memory_fraction: float
    latency_s: float
    #: reduction depth at which the family reaches half its ``compute_fraction`` (0: independent of depth)
    half_depth: float = 0.0

    def efficiency(self, depth: float) -> float:
        """Share of the peak at this reduction depth: ``compute_fraction * depth / (depth + half_depth)``."""
        return self.compute_fraction * depth / (depth + self.half_depth)

    def to_dict(self) -> dict[str, float]:
        return {
            "compute_fraction": self.compute_fraction,
            "memory_fraction": self.memory_fraction,
            "latency_s": self.latency_s,
            "half_depth": self.half_depth,
        }


@dataclass(frozen=True)
class MemoryCurve:
    """Streaming bandwidth by working-set size: ``near`` below ``cache_bytes``, ``far`` (DRAM) above."""

    near_gbs: float
    far_gbs: float
    cache_bytes: float

    def seconds(self, nbytes: float) -> float:
        """Time to stream ``nbytes``: ``b * ((C / (C + b)) / near + (b / (C + b)) / far)``."""
        near = self.cache_bytes / (self.cache_bytes + nbytes)
        return nbytes * (near / (self.near_gbs * 1e9) + (1.0 - near) / (self.far_gbs * 1e9))

    def to_dict(self) -> dict[str, float]:
        return {"near_gbs": self.near_gbs, "far_gbs": self.far_gbs, "cache_bytes": self.cache_bytes}


@dataclass(frozen=True)
class Calibration:
    """A fitted table for one device (package data ``graphprof/devices/calibration/<preset>.json``, or the
    ``local`` preset that ``graphprof calibrate`` writes).

    ``rates[dtype][op class]``; a dtype the table lacks uses ``bfloat16`` for 2-byte types and
    ``float32`` otherwise. ``launch_s`` is the floor of a bare op call in the op table,
    ``host_per_kernel_s`` that of one eager op inside a module's forward, ``view_s`` that of an op that
    launches nothing (a view). ``accuracy`` is the fit's error on its own records.
    """

    preset: str
    kind: str
    bandwidth_gbs: float
    launch_s: float
    host_per_kernel_s: float
    rates: Mapping[str, Mapping[str, ClassRates]] = field(hash=False)
    accuracy: Mapping[str, Any] = field(hash=False, default_factory=dict)
    source: str = ""
    overlap: float = 1.0
    view_s: float = 0.0
    memory: MemoryCurve | None = None
    #: per-kind latency models (:mod:`graphprof.devices.opmodel`): when present they predict every op, in context
    op_model: OpModel | None = field(hash=False, default=None)

    def rates_for(self, dtype: str, klass: str) -> ClassRates:
        table = self.rates.get(dtype) or self.rates.get("bfloat16" if dtype in ("float16", "bfloat16") else "float32")
        if table is None:
            table = next(iter(self.rates.values()))
        return table.get(klass) or table["elementwise"]

    def memory_seconds(self, nbytes: float, hardware: Hardware) -> float:
        """Streaming time of ``nbytes`` on the fitted curve (the device's bandwidth without one)."""
        return nbytes / hardware.bandwidth if self.memory is None else self.memory.seconds(nbytes)

    def summary(self) -> dict[str, Any]:
        if self.op_model is not None:
            return self._op_model_summary(self.op_model)
        return {
            "preset": self.preset,
            "launch_s": self.launch_s,
            "host_per_kernel_s": self.host_per_kernel_s,
            "view_s": self.view_s,
            "overlap": self.overlap,
            "memory": None if self.memory is None else self.memory.to_dict(),
            "accuracy": dict(self.accuracy),
            "source": self.source,
            "formula": "timeline over ops of host (host_per_kernel; view_s for an op without a kernel) and kernel = "
            "max(roofline, latency[class] + max(work_flops / (peak * efficiency[class](depth)), "
            "bytes / (bandwidth(bytes) * memory_fraction[class]))); overlap of host and kernel fitted per device",
        }

    def _op_model_summary(self, model: OpModel) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "source": self.source,
            "records": {"calibration": model.counts.get("calibration", 0), "own_runs": model.counts.get("run", 0)},
            "interval": "80%: quantiles of log error over whole held-out models" if model.model_q is not None
            else "80%: per-kind held-out quantiles combined assuming independent op errors",
            "formula": "sum over ops of the op kind's model in context: exp(ridge on log features + k nearest "
            "neighbours' residuals), never below the op's roofline bound",
        }  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        out = self._rates_dict()
        return out if self.op_model is None else {**out, "op_model": self.op_model.to_dict()}

    def _rates_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset, "kind": self.kind, "bandwidth_gbs": self.bandwidth_gbs, "launch_s": self.launch_s,
            "host_per_kernel_s": self.host_per_kernel_s, "view_s": self.view_s, "overlap": self.overlap,
            "memory": None if self.memory is None else self.memory.to_dict(), "source": self.source,
            "accuracy": dict(self.accuracy),
            "rates": {dtype: {k: r.to_dict() for k, r in table.items()} for dtype, table in self.rates.items()},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        rates = {
            dtype: {klass: ClassRates(**values) for klass, values in table.items()}
            for dtype, table in data["rates"].items()
        }
        memory = data.get("memory")
        return cls(
            preset=data["preset"],
            kind=data.get("kind", "cuda"),
            bandwidth_gbs=float(data["bandwidth_gbs"]),
            launch_s=float(data["launch_s"]),
            host_per_kernel_s=float(data["host_per_kernel_s"]),
            rates=rates,
            accuracy=data.get("accuracy", {}),
            source=data.get("source", ""),
            overlap=float(data.get("overlap", 1.0)),
            view_s=float(data.get("view_s", 0.0)),
            memory=None if memory is None else MemoryCurve(**memory),
            op_model=OpModel.from_dict(data["op_model"]) if data.get("op_model") else None,
        )


@cache
def _shipped(preset: str) -> Calibration | None:
    path = resources.files("graphprof.devices") / "calibration" / f"{preset}.json"
    if not path.is_file():
        return None
    return Calibration.from_dict(json.loads(path.read_text()))


def _with_learned(calibration: Calibration, learned: Sequence[Sequence[Any]]) -> Calibration:
    """The calibration with the samples learned from the user's runs added as neighbours."""
    if calibration.op_model is None or not learned:
        return calibration
    return replace(calibration, op_model=calibration.op_model.with_samples(Sample.from_list(row) for row in learned))


def load_calibration(preset: str) -> Calibration | None:
    """The calibration table of a hardware preset (``local``: the one ``graphprof calibrate`` wrote), or ``None``."""
    if preset == "local":
        from graphprof.devices.local import read_local

        stored = read_local()
        return (
            None
            if stored is None
            else _with_learned(Calibration.from_dict(stored["calibration"]), stored.get("learned", ()))
        )
    return _shipped(preset)


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
    memory = calibration.memory_seconds(nbytes, hardware) / rates.memory_fraction
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


def _op_model_seconds(
    ops: Sequence[Any], dtype: str, hardware: Hardware, model: OpModel
) -> list[tuple[float, float, float]]:
    """(seconds, q_low, q_high) of each call from the kind models (never below the call's roofline bound),
    plus the first touch of its large outputs where the model measured it."""
    calls = [call_of(op) for op in ops]
    known = [(i, c) for i, c in enumerate(calls) if c is not None]
    predicted = model.predict([c for _, c in known])
    out = [(0.0, 0.0, 0.0)] * len(ops)
    peak = hardware.peak_flops(dtype)
    for (i, _), (t, lo, hi) in zip(known, predicted, strict=True):
        op = ops[i]
        bound = max(
            float(op.cost.flops) * float(op.work_fraction) / peak, float(op.cost.bytes_moved) / hardware.bandwidth
        )
        out[i] = (max(t, bound), lo, hi)
    # the first touch of large outputs: every aten call's, one without a kind's included
    return [(t + model.extra_seconds(op), lo, hi) for op, (t, lo, hi) in zip(ops, out, strict=True)]


def predict_interval(ops: Sequence[Any], dtype: str, hardware: Hardware, calibration: Calibration) -> Interval | None:
    """The 80% interval of the total of ``ops``, where the calibration has kind models (else ``None``)."""
    if calibration.op_model is None:
        return None
    parts = _op_model_seconds(ops, dtype, hardware, calibration.op_model)
    return calibration.op_model.interval(
        [t for t, _, _ in parts], [lo for _, lo, _ in parts], [hi for _, _, hi in parts]
    )


def predict_ops(ops: Sequence[Any], dtype: str, hardware: Hardware, calibration: Calibration) -> list[float]:
    """Predicted seconds of each recorded call of ``ops`` (in execution order): the kind models' where the
    calibration has them (each op in context, host included), else the class rates on :func:`timeline`."""
    if calibration.op_model is not None:
        return [t for t, _, _ in _op_model_seconds(ops, dtype, hardware, calibration.op_model)]
    demands = [
        (
            host_seconds(op, calibration),
            0.0 if op.status is OpStatus.ZERO_COST else kernel_seconds(op, dtype, hardware, calibration),
        )
        for op in ops
    ]
    return timeline(demands, calibration.overlap)
