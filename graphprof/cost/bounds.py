"""The roofline's records: what limits each layer (:class:`Bound`), per layer (:class:`LayerBound`) and for a
whole profile (:class:`Roofline`), with the two formulas they rest on.

Pure records, below :class:`~graphprof.cost.result.Profile` (which carries its :class:`Roofline`); the
classification itself is :func:`graphprof.cost.roofline.classify`. See :mod:`graphprof.cost.roofline` for the model
and a worked example.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from graphprof.cost.breakdown import PredictionBreakdown
from graphprof.devices.hardware import Hardware
from graphprof.devices.opmodel import Interval
from graphprof.devices.predict import OutOfRange
from graphprof.devices.table import Calibration

__all__ = ["DEFAULT_THRESHOLD", "Bound", "LayerBound", "Roofline", "classify_layer", "ridge_point", "roofline_time"]

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
    #: predicted seconds of the *forward* ops alone per module path, in train mode with a calibration
    #: (what a measured forward is compared with; in eval mode the layers' predicted times are the forward's)
    forward_predicted: tuple[tuple[str, float], ...] = ()
    #: the 80% interval of :attr:`predicted_seconds` (a calibration with per-kind models; else ``None``)
    predicted_interval: Interval | None = None
    #: where the predicted time goes, by op kind and by layer, with the measured forward by kind beside it when
    #: the profile carried a measurement (:mod:`graphprof.cost.breakdown`); ``None`` without a calibration
    breakdown: PredictionBreakdown | None = None
    #: the calls priced outside the range their kind's samples cover (:func:`graphprof.devices.predict.out_of_range`)
    out_of_range: tuple[OutOfRange, ...] = ()

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
                "estimated_time_s": None if self.hardware is None else sum((layer.seconds or 0.0 for layer in layers), 0.0),
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
            "predicted_interval": None if self.predicted_interval is None else self.predicted_interval.to_dict(),
            "prediction": None if self.calibration is None else self.calibration.summary(),
            "prediction_breakdown": None if self.breakdown is None else self.breakdown.to_dict(),
            "predicted_out_of_range": [o.to_dict() for o in self.out_of_range],
            "bounds": shares,
            "notes": list(self.notes),
        }
