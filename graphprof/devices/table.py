"""The fitted tables of the predictor, as data: what each op family reaches on a device
(:class:`ClassRates`), streaming bandwidth by working-set size (:class:`MemoryCurve`), and the whole table
of one device (:class:`Calibration`), with the per-kind latency models (:mod:`graphprof.devices.opmodel`).

A :class:`graphprof.devices.hardware.Hardware` carries its table (:attr:`~graphprof.devices.hardware.Hardware.calibration`):
a preset the one it ships with (:func:`shipped_calibration`), the ``local`` preset the one its file holds,
with the samples learned from the user's runs (:func:`with_learned`). How the table predicts is
:mod:`graphprof.devices.predict`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from graphprof.base.record import Record
from graphprof.devices.opmodel import OpModel, Sample

__all__ = ["Calibration", "ClassRates", "MemoryCurve", "shipped_calibration", "with_learned"]


@dataclass(frozen=True)
class ClassRates(Record):
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


@dataclass(frozen=True)
class MemoryCurve(Record):
    """Streaming bandwidth by working-set size: ``near`` below ``cache_bytes``, ``far`` (DRAM) above."""

    near_gbs: float
    far_gbs: float
    cache_bytes: float

    def seconds(self, nbytes: float) -> float:
        """Time to stream ``nbytes``: ``b * ((C / (C + b)) / near + (b / (C + b)) / far)``."""
        near = self.cache_bytes / (self.cache_bytes + nbytes)
        return nbytes * (near / (self.near_gbs * 1e9) + (1.0 - near) / (self.far_gbs * 1e9))


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
    #: how much slower (above 1) or faster this machine runs now than when it was calibrated, by the probe
    #: (:mod:`graphprof.devices.probe`): the kind models' times are scaled by it; never stored in the file
    speed: float = 1.0

    def rates_for(self, dtype: str, klass: str) -> ClassRates:
        table = self.rates.get(dtype) or self.rates.get("bfloat16" if dtype in ("float16", "bfloat16") else "float32")
        if table is None:
            table = next(iter(self.rates.values()))
        return table.get(klass) or table["elementwise"]

    def memory_seconds(self, nbytes: float, bandwidth: float) -> float:
        """Streaming time of ``nbytes`` on the fitted curve (the device's ``bandwidth``, bytes per second, without one)."""
        return nbytes / bandwidth if self.memory is None else self.memory.seconds(nbytes)

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
            "speed_factor": self.speed,
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
        rates = {dtype: {klass: ClassRates(**values) for klass, values in table.items()} for dtype, table in data["rates"].items()}
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
def shipped_calibration(preset: str) -> Calibration | None:
    """The table a preset ships with (package data ``graphprof/devices/calibration/<preset>.json``), or ``None``."""
    path = resources.files("graphprof.devices") / "calibration" / f"{preset}.json"
    if not path.is_file():
        return None
    return Calibration.from_dict(json.loads(path.read_text()))


def with_learned(calibration: Calibration, learned: Sequence[Sequence[Any]]) -> Calibration:
    """The calibration with the samples learned from the user's runs added as neighbours."""
    if calibration.op_model is None or not learned:
        return calibration
    return replace(calibration, op_model=calibration.op_model.with_samples(Sample.from_list(row) for row in learned))
