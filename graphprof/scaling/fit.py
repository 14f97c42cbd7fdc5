"""Growth fits of a sweep's metrics: a power law on log-log axes, exact linear + quadratic terms, and the
knee where a measured sweep stops being launch-bound. Pure arithmetic on numbers (numpy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from graphprof.base.record import Record
from graphprof.errors import InvalidInputError

__all__ = ["GrowthFit", "QuadraticFit", "Knee", "find_knee", "fit_growth", "fit_quadratic", "r2"]


@dataclass(frozen=True)
class GrowthFit(Record):
    """``metric ~ coefficient * value ** exponent``: a least-squares line through (log value, log metric)."""

    metric: str
    exponent: float
    coefficient: float
    r2: float


@dataclass(frozen=True)
class QuadraticFit(Record):
    """``metric = constant + linear * S + quadratic * S**2``, least squares (exact for a count that is
    a polynomial of degree 2 in S, such as a transformer's MACs in its sequence length)."""

    metric: str
    constant: float
    linear: float
    quadratic: float
    r2: float

    def quadratic_share(self, value: float) -> float:
        """The share (0..1) of the fitted metric at ``value`` that is the quadratic term (attention, for S)."""
        total = self.constant + self.linear * value + self.quadratic * value * value
        return self.quadratic * value * value / total if total else 0.0


@dataclass(frozen=True)
class Knee(Record):
    """Where measured time stops being flat (launch-bound) and starts growing with the axis.

    Found by fitting ``log t = a + slope * max(0, log x - log knee)`` (a hinge) at each point and keeping
    the best; ``slope`` is the growth exponent past the knee.
    """

    value: float
    index: int
    slope: float


def r2(y: Any, predicted: Any) -> float:
    """The coefficient of determination of ``predicted`` against ``y``, in [0, 1] for a least-squares fit.

    A constant series has no variance to explain: its R² is 1.0 when the fit is exact and 0.0 otherwise.
    "Constant" and "exact" are judged against the series' own size (rounding of ``mean(y)`` leaves a total
    of about 1e-22 y², and dividing by it gave a negative R² for a constant series).

    >>> import numpy as np
    >>> r2(np.array([123456.789] * 5), np.array([123456.789 + 1e-10] * 5))
    1.0
    """
    import numpy as np

    residual = float(np.sum((y - predicted) ** 2))
    total = float(np.sum((y - np.mean(y)) ** 2))
    noise = len(y) * (1e-9 * float(np.max(np.abs(y)) if len(y) else 0.0)) ** 2  # float rounding, in y²
    if total <= noise:
        return 1.0 if residual <= noise else 0.0
    return 1.0 - residual / total


def fit_growth(metric: str, values: Sequence[float], ys: Sequence[float]) -> GrowthFit:
    """The least-squares line through ``(log value, log y)``, over two or more points, every one positive.

    >>> round(fit_growth("macs", [1, 2, 4], [3.0, 6.0, 12.0]).exponent, 6)   # y = 3 x: exponent 1
    1.0
    """
    import numpy as np

    if len(values) < 2:
        raise InvalidInputError(f"fitting {metric} needs at least 2 points that have it, got {len(values)}")
    if any(y <= 0 for y in ys):
        raise InvalidInputError(f"{metric} is zero at some point: no log-log fit")
    x, y = np.log(np.asarray(values, dtype=float)), np.log(np.asarray(ys, dtype=float))
    slope, intercept = np.polyfit(x, y, 1)
    return GrowthFit(metric, float(slope), float(math.exp(intercept)), r2(y, slope * x + intercept))


def fit_quadratic(metric: str, values: Sequence[float], ys: Sequence[float]) -> QuadraticFit:
    """``y = c + a * value + b * value**2`` by least squares over three or more points, the columns scaled
    to 1 first so that large counts stay exact."""
    import numpy as np

    if len(values) < 3:
        raise InvalidInputError(f"a quadratic fit of {metric} needs at least 3 points, got {len(values)}")
    x, y = np.asarray(values, dtype=float), np.asarray(ys, dtype=float)
    scale_x, scale_y = float(x.max()), float(np.abs(y).max()) or 1.0
    u = x / scale_x
    design = np.stack([np.ones_like(u), u, u * u], axis=1)
    coef, *_ = np.linalg.lstsq(design, y / scale_y, rcond=None)
    c, a, b = float(coef[0]) * scale_y, float(coef[1]) * scale_y / scale_x, float(coef[2]) * scale_y / scale_x**2
    return QuadraticFit(metric, c, a, b, r2(y, c + a * x + b * x * x))


#: Past the knee, time must grow at least this fast (log-log slope) for the flat part to count as launch-bound.
KNEE_MIN_SLOPE = 0.5
#: Before the knee, time may grow at most this fast.
KNEE_FLAT_SLOPE = 0.25


def find_knee(values: Sequence[float], seconds: Sequence[float]) -> Knee | None:
    """The point where ``seconds`` stops being flat in ``values`` (see :class:`Knee`); ``None`` when the
    sweep is launch-bound throughout or never was (fewer than 3 points, or no flat start).

    >>> find_knee([1, 2, 4, 8, 16, 32], [1.0, 1.0, 1.0, 2.0, 4.0, 8.0]).value
    4
    """
    import numpy as np

    if len(values) < 3 or len(values) != len(seconds) or any(s is None or s <= 0 for s in seconds):
        return None
    x = np.log(np.asarray(values, dtype=float))
    y = np.log(np.asarray(seconds, dtype=float))
    best: tuple[float, int, float] | None = None
    for k in range(1, len(x) - 1):  # a knee with at least one point on each side of it
        hinge = np.maximum(0.0, x - x[k])
        design = np.stack([np.ones_like(x), hinge], axis=1)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        error = float(np.sum((design @ coef - y) ** 2))
        if best is None or error < best[0] - 1e-12:
            best = (error, k, float(coef[1]))
    if best is None:
        return None
    _, k, slope = best
    flat = (y[k] - y[0]) / (x[k] - x[0])
    if slope < KNEE_MIN_SLOPE or flat > KNEE_FLAT_SLOPE:
        return None
    return Knee(values[k], k, slope)
