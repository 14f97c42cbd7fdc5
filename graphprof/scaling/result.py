"""A sweep's result: one :class:`SweepRow` per point, and the :class:`Sweep` with its fits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from graphprof.base.choices import SweepAxis
from graphprof.base.display import NotebookDisplay
from graphprof.cost.result import Profile
from graphprof.errors import InvalidInputError
from graphprof.scaling.fit import GrowthFit, Knee, QuadraticFit, find_knee, fit_growth, fit_quadratic

__all__ = ["METRICS", "SweepRow", "Sweep"]


#: The metrics of a row, in table order; ``measured_*`` are ``None`` on a dry-run sweep and
#: ``estimated_seconds`` without a hardware preset.
METRICS = ("params", "macs", "flops", "bytes", "peak_activation_bytes", "estimated_seconds", "measured_seconds", "measured_peak_bytes")


@dataclass(frozen=True)
class SweepRow:
    """One point of a sweep: its value on the axis and what the model costs there (integers, seconds)."""

    value: float
    inputs: str
    params: int
    macs: int
    flops: int
    bytes: int
    peak_activation_bytes: int
    estimated_seconds: float | None = None
    measured_seconds: float | None = None
    measured_peak_bytes: int | None = None
    capture_reused: bool = True

    def metric(self, name: str) -> float | None:
        if name not in METRICS:
            raise InvalidInputError(f"unknown sweep metric {name!r}: choose one of {', '.join(METRICS)}")
        return cast("float | None", getattr(self, name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "inputs": self.inputs,
            **{name: getattr(self, name) for name in METRICS},
            "capture_reused": self.capture_reused,
        }


@dataclass(frozen=True)
class Sweep(NotebookDisplay):
    """The rows of one sweep, with growth fits. ``stopped_at`` is the value that ran out of device memory
    (the sweep stopped there cleanly; ``last_fit`` is the largest value that fit), else ``None``."""

    model: str
    axis: SweepAxis
    key: str | None
    values: tuple[float, ...]
    rows: tuple[SweepRow, ...]
    hardware: str | None = None
    measured: bool = False
    stopped_at: float | None = None
    notes: tuple[str, ...] = ()
    profiles: tuple[Profile, ...] = field(default=(), repr=False, compare=False)

    @property
    def last_fit(self) -> float | None:
        """The largest value that ran (when the sweep stopped out of memory, the last size that fit)."""
        return self.rows[-1].value if self.rows else None

    @property
    def label(self) -> str:
        """The axis as a user would name it: ``batch``, ``seq-len``, or the factory keyword."""
        return self.key if self.axis is SweepAxis.SET and self.key else self.axis.value

    def series(self, metric: str) -> tuple[list[float], list[float]]:
        """``(values, metric values)`` for the rows that have the metric."""
        xs, ys = [], []
        for row in self.rows:
            y = row.metric(metric)
            if y is not None:
                xs.append(row.value)
                ys.append(y)
        return xs, ys

    def fit(self, metric: str) -> GrowthFit:
        """The log-log growth exponent of ``metric`` with R² (numpy least squares).

        >>> # MACs of a batch sweep: log MACs = log(MACs per sample) + 1 * log batch, so exponent 1, R² 1
        """
        return fit_growth(metric, *self.series(metric))

    def fit_quadratic(self, metric: str) -> QuadraticFit:
        """``metric = c + a * value + b * value**2`` by least squares (columns scaled, so large counts stay exact)."""
        return fit_quadratic(metric, *self.series(metric))

    def knee(self) -> Knee | None:
        """Where measured time stops being launch-bound (:func:`find_knee`); ``None`` on a dry-run sweep."""
        xs, ys = self.series("measured_seconds")
        return find_knee(xs, ys) if xs else None

    def fits(self) -> dict[str, GrowthFit]:
        """A growth fit per metric that has at least two positive values."""
        out = {}
        for metric in METRICS:
            xs, ys = self.series(metric)
            if len(xs) >= 2 and all(y > 0 for y in ys):
                out[metric] = self.fit(metric)
        return out

    def to_dict(self) -> dict[str, Any]:
        quadratic = {}
        if self.axis is SweepAxis.SEQ_LEN and len(self.rows) >= 3:
            quadratic = {m: self.fit_quadratic(m).to_dict() for m in ("macs", "flops")}
        knee = self.knee()
        return {
            "model": self.model,
            "axis": self.axis.value,
            "key": self.key,
            "values": list(self.values),
            "hardware": self.hardware,
            "measured": self.measured,
            "stopped_at": self.stopped_at,
            "last_fit": self.last_fit,
            "rows": [row.to_dict() for row in self.rows],
            "fits": {m: f.to_dict() for m, f in self.fits().items()},
            "quadratic_fits": quadratic,
            "knee": knee.to_dict() if knee else None,
            "notes": list(self.notes),
        }
