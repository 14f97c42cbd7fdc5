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
<preset>.json``, or the ``local`` preset written by ``graphprof calibrate``) gets a *predicted* time:
every recorded aten call is a host demand and a kernel demand, combined on a timeline whose overlap is
fitted per device. The model is :mod:`graphprof.predict`; each layer's predicted time is its calls'
share of the timeline, never below its roofline bound.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from graphprof.hardware import Hardware
from graphprof.predict import Calibration, ClassRates, kernel_seconds, load_calibration, op_class, predict_ops
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
    predicted: list[float | None] = [None] * len(profile.layers)
    if calibration is not None and hardware is not None:
        ops = [(i, op) for i, row in enumerate(profile.layers) for op in row.ops]
        shares = predict_ops([op for _, op in ops], profile.dtype, hardware, calibration)
        predicted = [0.0] * len(profile.layers)
        for (i, _), share in zip(ops, shares, strict=True):
            predicted[i] = (predicted[i] or 0.0) + share
    layers = []
    for row, layer_predicted in zip(profile.layers, predicted, strict=True):
        cost = row.cost
        seconds = None
        if peak is not None and bandwidth is not None:
            seconds = roofline_time(cost.flops, cost.bytes_moved, peak, bandwidth)
        bound = classify_layer(cost.flops, cost.bytes_moved, limit)
        layers.append(LayerBound(row.name, cost.flops, cost.bytes_moved, bound, seconds, layer_predicted))
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
