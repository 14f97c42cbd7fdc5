"""Classify: each layer compute-bound or memory-bound, with a roofline time estimate.

The roofline model bounds the time of a kernel from below by the slower of its two demands::

    time >= max(flops / peak, bytes / bandwidth)

so a layer is *compute-bound* when its arithmetic intensity (FLOPs per byte moved) is above the device's
ridge point ``peak / bandwidth`` and *memory-bound* otherwise. At the ridge exactly both demands take the
same time; graphprof calls that memory-bound, as the seeds do (``AI <= 10`` is memory-bound).

With no device, the seeds' fixed threshold of 10 FLOPs/byte separates the two and there is no time.

Worked example, a layer of 2 GFLOPs moving 10 MB on an H100 SXM in bfloat16 (989.5 TFLOP/s, 3.35 TB/s)::

    ridge = 989.5e12 / 3.35e12          = 295.4 FLOPs/byte
    AI    = 2e9 / 10e6                  = 200 FLOPs/byte   -> memory-bound (200 <= 295.4)
    time  = max(2e9 / 989.5e12, 10e6 / 3.35e12) = max(2.02 us, 2.99 us) = 2.99 us

The estimate is a lower bound under ideal conditions (datasheet peak rates, no launch overhead, layers
run one after the other); it is not a measurement.

**Predicted time.** Beside the lower bound, a device with a calibration table (``graphprof/calibration/
<preset>.json``, fitted by ``benchmarks/calibrate.py`` from single-kernel timings) gets a *predicted*
time, summed over kernels (every counted or unsupported aten call; views and other zero-cost ops launch
nothing)::

    kernel    = latency[class] + max(work_flops / (peak * compute_fraction[class]),
                                     bytes / (bandwidth * memory_fraction[class]))
    predicted = sum over kernels of max(host_per_kernel, kernel)

``class`` is the op's family (:func:`op_class`: matmul, attention, conv, depthwise conv, norm,
reduction, pooling, elementwise, ...), the fractions are what that family reaches of the datasheet peak
on the device, ``host_per_kernel`` is the floor an eager kernel cannot beat (the host launching it), and
``work_flops`` is the work the kernel really does: a causal flash kernel skips the tiles above the
diagonal (:attr:`~graphprof.result.OpRecord.work_fraction`), while the MACs keep their convention.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, cast

from graphprof.hardware import Hardware
from graphprof.result import Profile

__all__ = [
    "DEFAULT_THRESHOLD",
    "Bound",
    "Calibration",
    "ClassRates",
    "LayerBound",
    "load_calibration",
    "op_class",
    "kernel_seconds",
    "Roofline",
    "classify",
    "classify_layer",
    "ridge_point",
    "roofline_time",
]

#: FLOPs per byte separating compute- from memory-bound when no device is given (seeds 001 and 002).
DEFAULT_THRESHOLD = 10.0


class Bound(str, enum.Enum):
    """What limits a layer: arithmetic, memory traffic, or nothing (it neither computes nor moves bytes)."""

    COMPUTE = "compute-bound"
    MEMORY = "memory-bound"
    NONE = "none"

    @property
    def short(self) -> str:
        """``"compute"``, ``"memory"`` or ``"-"``: the word a narrow table column shows."""
        return {"compute-bound": "compute", "memory-bound": "memory"}.get(self.value, "-")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """FLOPs per byte where compute and memory time are equal: ``peak_flops / bandwidth``."""
    return peak_flops / bandwidth


def roofline_time(flops: int, nbytes: int, peak_flops: float, bandwidth: float) -> float:
    """Seconds a kernel needs at least: ``max(flops / peak_flops, nbytes / bandwidth)``."""
    return max(flops / peak_flops, nbytes / bandwidth)


def classify_layer(flops: int, nbytes: int, threshold: float) -> Bound:
    """Compute-bound when ``flops / nbytes > threshold``; a layer moving no bytes but computing is compute-bound."""
    if nbytes == 0:
        return Bound.COMPUTE if flops > 0 else Bound.NONE
    return Bound.COMPUTE if flops / nbytes > threshold else Bound.MEMORY


@dataclass(frozen=True)
class LayerBound:
    """The roofline verdict on one row of :attr:`Profile.layers` (same order, same name)."""

    name: str
    flops: int
    bytes: int
    bound: Bound
    seconds: float | None
    #: predicted time of the layer's kernels (see the module docstring); ``None`` without a calibration
    predicted_seconds: float | None = None

    @property
    def arithmetic_intensity(self) -> float | None:
        return None if self.bytes == 0 else self.flops / self.bytes


@dataclass(frozen=True)
class Roofline:
    """Every layer of a profile classified against one threshold, with time estimates when a device is known.

    ``threshold`` is the device's ridge point for the profile's dtype, or :data:`DEFAULT_THRESHOLD` when
    ``hardware`` is ``None``. ``precision`` is the dtype whose peak was used (``float32`` when the device
    lists no figure for the profile's own dtype; ``notes`` then says so).
    """

    hardware: Hardware | None
    dtype: str
    precision: str | None
    peak_flops: float | None
    bandwidth: float | None
    threshold: float
    layers: tuple[LayerBound, ...]
    notes: tuple[str, ...] = ()
    calibration: Calibration | None = None

    @property
    def fixed_threshold(self) -> bool:
        """True when no device was given and the seeds' fixed threshold was used."""
        return self.hardware is None

    @property
    def seconds(self) -> float | None:
        """The model's estimate: the sum of the layers' estimates (``None`` without a device)."""
        if self.hardware is None:
            return None
        return sum((layer.seconds or 0.0 for layer in self.layers), 0.0)

    @property
    def predicted_seconds(self) -> float | None:
        """The model's predicted time: the sum of the layers' (``None`` without a calibration table)."""
        if self.calibration is None:
            return None
        return sum((layer.predicted_seconds or 0.0 for layer in self.layers), 0.0)

    @property
    def model_bound_seconds(self) -> float | None:
        """The whole model as one kernel, ``max(total FLOPs / peak, total bytes / bandwidth)``: never above :attr:`seconds`."""
        if self.peak_flops is None or self.bandwidth is None:
            return None
        return roofline_time(self.total_flops, self.total_bytes, self.peak_flops, self.bandwidth)

    @property
    def total_flops(self) -> int:
        return sum(layer.flops for layer in self.layers)

    @property
    def total_bytes(self) -> int:
        return sum(layer.bytes for layer in self.layers)

    def of(self, bound: Bound) -> tuple[LayerBound, ...]:
        """The layers with this verdict."""
        return tuple(layer for layer in self.layers if layer.bound is bound)

    def flops_share(self, bound: Bound) -> float:
        """Share (0..1) of all FLOPs done by layers with this verdict."""
        total = self.total_flops
        return sum(layer.flops for layer in self.of(bound)) / total if total else 0.0

    def time_share(self, bound: Bound) -> float | None:
        """Share (0..1) of the estimated time spent in layers with this verdict (``None`` without a device)."""
        total = self.seconds
        if total is None:
            return None
        return sum((layer.seconds or 0.0 for layer in self.of(bound)), 0.0) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The roofline part of the JSON file (the per-layer verdicts go beside each layer)."""
        shares = {}
        for bound in (Bound.COMPUTE, Bound.MEMORY):
            layers = self.of(bound)
            shares[bound.value] = {
                "layers": len(layers),
                "flops": sum(layer.flops for layer in layers),
                "flops_share": self.flops_share(bound),
                "estimated_time_s": None
                if self.hardware is None
                else sum((layer.seconds or 0.0 for layer in layers), 0.0),
                "time_share": self.time_share(bound),
            }
        return {
            "threshold_flops_per_byte": self.threshold,
            "threshold_source": "fixed" if self.fixed_threshold else "ridge_point",
            "dtype": self.dtype,
            "precision": self.precision,
            "peak_flops_per_s": self.peak_flops,
            "bandwidth_bytes_per_s": self.bandwidth,
            "estimated_time_s": self.seconds,
            "model_bound_time_s": self.model_bound_seconds,
            "estimate": "sum over layers of max(flops / peak, bytes / bandwidth); an idealised lower bound, not a measurement",
            "lower_bound_time_s": self.seconds,
            "predicted_time_s": self.predicted_seconds,
            "prediction": None if self.calibration is None else self.calibration.summary(),
            "bounds": shares,
            "notes": list(self.notes),
        }


def classify(profile: Profile, hardware: Hardware | None = None, *, threshold: float | None = None) -> Roofline:
    """Classify every layer of ``profile`` against ``hardware``'s ridge point, or a fixed threshold.

    ``threshold`` overrides the ridge point (and defaults to :data:`DEFAULT_THRESHOLD` without a device).
    Layers are costed forward plus backward (``row.cost``), as the profile's totals are.
    """
    notes: list[str] = []
    if hardware is None:
        peak = bandwidth = None
        precision = None
        limit = DEFAULT_THRESHOLD if threshold is None else threshold
    else:
        peak, precision = hardware.peak_for(profile.dtype)
        bandwidth = hardware.bandwidth
        if precision != profile.dtype:
            notes.append(f"{hardware.label} lists no {profile.dtype} peak; its {precision} peak is used")
        limit = ridge_point(peak, bandwidth) if threshold is None else threshold
    calibration = load_calibration(hardware.name) if hardware is not None else None
    if calibration is not None and hardware is not None and calibration.bandwidth_gbs != hardware.bandwidth_gbs:
        calibration = None  # figures overridden on the command line: the table is for the preset
    layers = []
    for row in profile.layers:
        cost = row.cost
        seconds = predicted = None
        if peak is not None and bandwidth is not None:
            seconds = roofline_time(cost.flops, cost.bytes_moved, peak, bandwidth)
        if calibration is not None and hardware is not None:
            predicted = sum(
                (
                    max(calibration.host_per_kernel_s, kernel_seconds(op, profile.dtype, hardware, calibration))
                    for op in row.ops
                    if op.status != "zero_cost"
                ),
                0.0,
            )
        layers.append(
            LayerBound(
                row.name,
                cost.flops,
                cost.bytes_moved,
                classify_layer(cost.flops, cost.bytes_moved, limit),
                seconds,
                predicted,
            )
        )
    return Roofline(
        hardware=hardware,
        dtype=profile.dtype,
        precision=precision,
        peak_flops=peak,
        bandwidth=bandwidth,
        threshold=limit,
        layers=tuple(layers),
        notes=tuple(notes),
        calibration=calibration,
    )


# ---- predicted time ------------------------------------------------------------------------------

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


def op_class(op: str, input_shapes: tuple[tuple[int, ...], ...] = ()) -> str:
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


@dataclass(frozen=True)
class ClassRates:
    """What one op family reaches on a device: fractions of the datasheet peak and bandwidth, and a
    fixed latency per kernel (wave quantisation, tail, setup)."""

    compute_fraction: float
    memory_fraction: float
    latency_s: float

    def to_dict(self) -> dict[str, float]:
        return {"compute_fraction": self.compute_fraction, "memory_fraction": self.memory_fraction, "latency_s": self.latency_s}


@dataclass(frozen=True)
class Calibration:
    """A fitted table for one hardware preset (package data ``graphprof/calibration/<preset>.json``).

    ``rates[dtype][op class]``; a dtype the table lacks uses ``bfloat16`` for 2-byte types and
    ``float32`` otherwise. ``accuracy`` is the fit's error on its own records (see ``benchmarks/calibrate.py``).
    """

    preset: str
    kind: str
    bandwidth_gbs: float
    launch_s: float
    host_per_kernel_s: float
    rates: Mapping[str, Mapping[str, ClassRates]] = field(hash=False)
    accuracy: Mapping[str, Any] = field(hash=False, default_factory=dict)
    source: str = ""

    def rates_for(self, dtype: str, klass: str) -> ClassRates:
        table = self.rates.get(dtype) or self.rates.get("bfloat16" if dtype in ("float16", "bfloat16") else "float32")
        if table is None:
            table = next(iter(self.rates.values()))
        return table.get(klass) or table["elementwise"]

    def summary(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "launch_s": self.launch_s,
            "host_per_kernel_s": self.host_per_kernel_s,
            "accuracy": dict(self.accuracy),
            "source": self.source,
            "formula": "sum over kernels of max(host_per_kernel, latency[class] + max(work_flops / "
            "(peak * compute_fraction[class]), bytes / (bandwidth * memory_fraction[class])))",
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        rates = {
            dtype: {klass: ClassRates(**values) for klass, values in table.items()}
            for dtype, table in data["rates"].items()
        }
        return cls(
            preset=data["preset"],
            kind=data.get("kind", "cuda"),
            bandwidth_gbs=float(data["bandwidth_gbs"]),
            launch_s=float(data["launch_s"]),
            host_per_kernel_s=float(data["host_per_kernel_s"]),
            rates=rates,
            accuracy=data.get("accuracy", {}),
            source=data.get("source", ""),
        )


@cache
def load_calibration(preset: str) -> Calibration | None:
    """The shipped calibration table of a hardware preset, or ``None`` when it has none."""
    path = resources.files("graphprof") / "calibration" / f"{preset}.json"
    if not path.is_file():
        return None
    return Calibration.from_dict(json.loads(path.read_text()))


def kernel_seconds(op: Any, dtype: str, hardware: Hardware, calibration: Calibration) -> float:
    """Predicted device time of one kernel (an :class:`~graphprof.result.OpRecord`), launch floor excluded.

    ``latency + max(work_flops / (peak * compute_fraction), bytes / (bandwidth * memory_fraction))``.
    """
    klass = op_class(op.op, op.input_shapes)
    rates = calibration.rates_for(dtype, klass)
    peak = hardware.peak_flops(dtype)
    flops = op.cost.flops * op.work_fraction
    return rates.latency_s + cast(float, max(
        flops / (peak * rates.compute_fraction), op.cost.bytes_moved / (hardware.bandwidth * rates.memory_fraction)
    ))
