"""Per-op latency models: one predictor per op kind, fitted to sampled configurations, stored as data.

Each recorded aten call (an :class:`~graphprof.cost.result.OpRecord`) falls in one *kind* (:func:`op_kind`):
a depthwise, grouped, pointwise (1x1) or dense convolution, a linear layer, a batched product, attention,
a norm, a softmax, an activation, pooling, a reduction, a gather, an element-wise op, a copy, or a view.
Its *features* (:func:`op_features`) are logarithms of what the dry run records: FLOPs actually executed
(``work_fraction`` applied), bytes, and the kind's own shape figures (a convolution's batch, channels,
output pixels, kernel area, stride and reduction depth; a product's M, K and N; attention's heads,
lengths and head size; an element-wise op's element count and inner size), then where the call was
timed: in a model's plain forward (:data:`IN_CONTEXT`, with the log of its output elements: a fresh
output's allocation and first touch) or alone in a loop (:data:`ALONE`). Every prediction is of a call
in context; the samples timed alone (the grid) extend the law to shapes no model sampled, and the
context features carry what running in place adds to them.

A kind's model (:class:`KindModel`) predicts ``log(seconds)`` in two parts::

    log t = w . z + b  +  residual of the k nearest sampled configurations (distance-weighted)  +  s
    z     = (features - mean) / scale

where ``s`` (the smearing term) turns the fit's median time into a mean: ``log t`` fitted by least
squares predicts ``exp(E[log t])``, below ``E[t]`` wherever the errors spread, and a model's ops add up
by their means; ``s = log mean(exp(r))`` over the residuals ``r`` the kind's predictor leaves at its samples (the
law, with its neighbours' correction where it has one: Duan's smearing, :mod:`graphprof.calibrate.fit_ops`).

The linear part is a log-log law (time grows as a power of the work) that extrapolates; the nearest
neighbours correct it where samples are dense (the configurations real models use). Both are plain
numbers in the calibration file (no pickles): the coefficients, the standardisation, and the samples
themselves with their residuals. A measured record added later (a user's own ``--measure`` run) becomes
one more neighbour at once, with no refit: :meth:`OpModel.with_samples`.

Every kind also carries the 10% and 90% quantiles of its held-out log errors, and the model the 10% and
90% quantiles of the log errors of *whole held-out models* (each zoo model predicted by a fit that never
saw it): the 80% interval of a model's total (:meth:`OpModel.interval`). Without whole-model residuals
the per-op quantiles are combined assuming independent errors (:func:`independent_interval`).

Worked example: a kind fitted to ``t = 1e-9 * flops`` has ``w = (1, 0, ...)`` on ``log(flops + 1)`` and
``b = log(1e-9)`` (before standardisation); a call of 2 MFLOPs predicts ``exp(log(2e6) + log(1e-9))``
= 2 ms, and a neighbour measured at 2.2 ms at the same features pulls it to 2.2 ms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from graphprof.base.choices import OpStatus
from graphprof.devices.firsttouch import CONV_NAMES as _CONV
from graphprof.devices.firsttouch import FAULT_MIN_BYTES, FirstTouch, conv_scratch, fresh_bytes, fresh_outputs
from graphprof.devices.firsttouch import packet_name as _name

__all__ = [
    "ALONE",
    "FAULT_MIN_BYTES",
    "IN_CONTEXT",
    "KINDS",
    "FirstTouch",
    "Interval",
    "KindModel",
    "OpModel",
    "Sample",
    "call_of",
    "conv_scratch",
    "fresh_bytes",
    "fresh_outputs",
    "independent_interval",
    "op_features",
    "op_kind",
]

#: The op kinds, each with its own model; ``generic`` serves a kind without samples.
KINDS = (
    "conv_dw", "conv_grouped", "conv_pointwise", "conv_dense", "linear", "bmm", "sdpa", "norm", "softmax",
    "activation", "activation_exp", "pooling", "reduction", "gather", "elementwise", "copy", "view", "generic",
)  # fmt: skip

#: Where a sample was timed (a feature of every kind): inside a model's plain forward, or alone in a loop.
#: A prediction is always of an op in context.
IN_CONTEXT, ALONE = 1.0, 0.0

#: The z-score of the 10% and 90% quantiles of a normal: an 80% interval is +-1.2816 sigma.
Z80 = 1.2815515655446004

_LINEAR = frozenset({"mm", "addmm", "linear", "mv", "addmv", "dot", "_int_mm"})
_BMM = frozenset({"bmm", "baddbmm", "addbmm", "matmul"})
_NORM = frozenset({
    "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_group_norm", "_fused_rms_norm", "rms_norm", "layer_norm", "batch_norm", "group_norm",
})  # fmt: skip
_SOFTMAX = frozenset({"_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"})
#: Piecewise-linear activations: a compare and a select (or a clamp) an element.
_ACTIVATION = frozenset({
    "relu", "hardswish", "hardsigmoid", "leaky_relu", "relu6", "hardtanh", "prelu", "_prelu_kernel", "threshold",
})  # fmt: skip
#: Activations of an exponential or an error function an element: several times a piecewise-linear one's
#: time at the same size (this machine, 2 threads: GELU on 50,000 elements about four times hardswish),
#: so a kind of their own.
_ACTIVATION_EXP = frozenset({
    "gelu", "silu", "sigmoid", "tanh", "elu", "mish", "softplus", "selu", "celu", "glu", "erf", "exp",
})  # fmt: skip
_REDUCTION = frozenset({"sum", "mean", "amax", "amin", "max", "min", "var", "std", "var_mean", "std_mean", "norm",
                        "linalg_vector_norm", "argmax", "argmin", "cumsum", "logsumexp", "prod", "all", "any"})  # fmt: skip
_GATHER = frozenset({"embedding", "index_select", "index", "gather", "embedding_bag", "_embedding_bag", "take"})
_COPY = frozenset({
    "clone", "_to_copy", "copy", "contiguous", "cat", "stack", "constant_pad_nd", "pad", "roll", "repeat",
    "flip", "expand_copy", "narrow_copy", "masked_fill", "index_put", "zeros_like", "ones_like", "new_zeros",
    "fill", "zero", "where", "tril", "triu", "full", "zeros", "ones", "empty", "arange", "scatter", "split_with_sizes_copy",
})  # fmt: skip


def _conv_kind(input_shapes: Sequence[Sequence[int]]) -> str:
    """Depthwise (one input channel per group), grouped, pointwise (1x1) or dense, from input and weight."""
    if len(input_shapes) < 2 or len(input_shapes[0]) < 3 or len(input_shapes[1]) < 3:
        return "conv_dense"
    cin, weight = input_shapes[0][1], input_shapes[1]
    groups = max(1, cin // max(1, weight[1]))
    if groups > 1 and weight[1] == 1:
        return "conv_dw"
    if groups > 1:
        return "conv_grouped"
    return "conv_pointwise" if math.prod(weight[2:]) == 1 else "conv_dense"


def op_kind(op: str, status: OpStatus = OpStatus.COUNTED, input_shapes: Sequence[Sequence[int]] = ()) -> str | None:
    """The kind of one recorded call: ``"aten.convolution"`` with a ``(C, 1, 3, 3)`` weight -> ``"conv_dw"``.

    A zero-cost aten call is a ``"view"``; a call outside aten (``prim.*``) has no kind (``None``): it costs nothing.
    """
    if not op.startswith("aten."):
        return None
    if status is OpStatus.ZERO_COST:
        return "view"
    name = _name(op)
    if name in _CONV:
        return _conv_kind(input_shapes)
    for kind, names in (("linear", _LINEAR), ("bmm", _BMM), ("norm", _NORM), ("softmax", _SOFTMAX),
                        ("activation", _ACTIVATION), ("activation_exp", _ACTIVATION_EXP), ("reduction", _REDUCTION), ("gather", _GATHER), ("copy", _COPY)):  # fmt: skip
        if name in names:
            return kind
    if "attention" in name:
        return "sdpa"
    if "pool" in name:
        return "pooling"
    return "elementwise"


def _log(x: float) -> float:
    return math.log(max(float(x), 0.0) + 1.0)


def _conv_features(inp: Sequence[Sequence[int]], out: Sequence[Sequence[int]]) -> list[float]:
    """Batch, input and output channels, output pixels, kernel area, stride, reduction depth."""
    x = inp[0] if inp else ()
    w = inp[1] if len(inp) > 1 else ()
    y = out[0] if out else ()
    if len(x) < 3 or len(w) < 3 or len(y) < 3:
        return [0.0] * 7
    stride = max(1.0, x[2] / max(1, y[2]))
    return [_log(x[0]), _log(x[1]), _log(w[0]), _log(math.prod(y[2:])), _log(math.prod(w[2:])), math.log(stride),
            _log(math.prod(w[1:]))]  # fmt: skip


def _product_features(kind: str, inp: Sequence[Sequence[int]], out: Sequence[Sequence[int]]) -> list[float]:
    """Batch, M, K, N of a product (the output's last dimension is N; K is the reduced one)."""
    y = out[0] if out else ()
    n = y[-1] if y else 1
    m = math.prod(y[:-1]) if len(y) > 1 else 1
    mats = [s for s in inp if len(s) >= 2]
    k = mats[0][-1] if mats else 1
    if kind == "linear" and len(mats) >= 2 and mats[-1][-2] != k and mats[-1][-1] == k:
        k = mats[-1][-1]
    batch = math.prod(y[:-2]) if kind == "bmm" and len(y) > 2 else 1
    return [_log(batch), _log(m / max(1, batch)), _log(k), _log(n)]


def _sdpa_features(inp: Sequence[Sequence[int]]) -> list[float]:
    """Batch x heads, query length, key length, head size."""
    q = inp[0] if inp else (1, 1, 1)
    k = inp[1] if len(inp) > 1 else q
    return [_log(math.prod(q[:-2])), _log(q[-2] if len(q) > 1 else 1), _log(k[-2] if len(k) > 1 else 1), _log(q[-1])]


def _stream_features(inp: Sequence[Sequence[int]], out: Sequence[Sequence[int]]) -> list[float]:
    """Elements out, elements in (all inputs), the inner (last) size, the number of inputs (a concatenation
    of 2 or of 40: logs, as every other feature, so that a wide one does not run the law off)."""
    y = out[0] if out else (inp[0] if inp else ())
    return [_log(math.prod(y)), _log(sum(math.prod(s) for s in inp)), _log(y[-1] if y else 1), _log(len(inp))]


def op_features(kind: str, flops: float, nbytes: float, input_shapes: Sequence[Sequence[int]],
                output_shapes: Sequence[Sequence[int]], context: float = IN_CONTEXT) -> list[float]:  # fmt: skip
    """The feature vector of one call of ``kind``: ``log(flops + 1)``, ``log(bytes + 1)``, then its own; for a
    convolution or a product ``context * log(weight elements + 1)`` (a weight read cold from memory in a
    forward, from cache in a loop: on this machine the sample models' linear layers ran 2.5-4 times the
    loop's law in place); then where it was timed: ``context`` (:data:`IN_CONTEXT` inside a model's
    forward, :data:`ALONE` in a loop) and ``context * log(output elements + 1)`` (what a fresh output
    costs grows with it). The first two are the ``generic`` kind's features."""
    base = [_log(flops), _log(nbytes)]
    if kind == "generic":
        return base
    if kind.startswith("conv"):
        own = _conv_features(input_shapes, output_shapes)
    elif kind in ("linear", "bmm"):
        own = _product_features(kind, input_shapes, output_shapes)
    elif kind == "sdpa":
        own = _sdpa_features(input_shapes)
    else:
        own = _stream_features(input_shapes, output_shapes)
    fresh = sum(math.prod(s) for s in output_shapes)
    cold = [context * _log(_weight_elements(kind, input_shapes))] if kind.startswith("conv") or kind == "linear" else []
    return base + own + cold + [context, context * _log(fresh)]


def _weight_elements(kind: str, input_shapes: Sequence[Sequence[int]]) -> int:
    """Elements of a convolution's or a product's weight (its second matrix): in a model's forward each
    weight is read once, from memory, where a call repeated in a loop finds it in cache."""
    if kind.startswith("conv"):
        return math.prod(input_shapes[1]) if len(input_shapes) > 1 else 0
    mats = [s for s in input_shapes if len(s) >= 2]
    return math.prod(mats[-1]) if len(mats) >= 2 else 0


def call_of(op: Any, context: float = IN_CONTEXT) -> tuple[str, list[float], list[float]] | None:
    """``(kind, features, generic features)`` of an :class:`~graphprof.cost.result.OpRecord` run where ``context``
    says (:func:`op_features`); ``None`` for a call that costs nothing (``prim.*``) or that no formula counted."""
    kind = op_kind(op.op, op.status, op.input_shapes)
    if kind is None or op.status is OpStatus.UNSUPPORTED:
        return None
    flops = float(op.cost.flops) * float(op.work_fraction)
    nbytes = float(op.cost.bytes_moved)
    features = op_features(kind, flops, nbytes, op.input_shapes, op.output_shapes, context)
    return kind, features, features[:2]


@dataclass(frozen=True)
class Sample:
    """One timed call: its kind, features, seconds, and where it came from (``"calibration"`` or ``"run"``)."""

    kind: str
    features: tuple[float, ...]
    seconds: float
    source: str = "calibration"
    #: the model or grid entry it was taken from (for leave-one-model-out)
    group: str = ""

    def to_list(self) -> list[Any]:
        return [self.kind, [round(f, 5) for f in self.features], self.seconds, self.source, self.group]

    @classmethod
    def from_list(cls, row: Sequence[Any]) -> Sample:
        return cls(str(row[0]), tuple(float(f) for f in row[1]), float(row[2]), str(row[3]), str(row[4]))


@dataclass(frozen=True)
class Interval:
    """An 80% interval around a prediction, and how it was formed."""

    low: float
    high: float
    level: float = 0.8
    method: str = "whole held-out models"

    def to_dict(self) -> dict[str, Any]:
        return {"low_s": self.low, "high_s": self.high, "level": self.level, "method": self.method}


@dataclass(frozen=True)
class KindModel:
    """The fitted model of one kind: ``log t = w . (x - mean) / scale + b + kNN residual``."""

    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    k: int
    #: the samples' standardised features and residuals (``log t`` minus the linear part)
    points: tuple[tuple[float, ...], ...] = field(repr=False, default=())
    residuals: tuple[float, ...] = field(repr=False, default=())
    #: 10% and 90% quantiles of the held-out log errors (log predicted - log measured)
    q_low: float = -0.2
    q_high: float = 0.2
    #: ``log`` of the mean of ``exp(residual)`` over the fit's samples: a fit of ``log t`` predicts the median
    #: time, and ops add up by their means; this shifts each prediction from the one to the other (Duan's smearing)
    smear: float = 0.0

    def standardise(self, x: Sequence[Sequence[float]]) -> np.ndarray:
        """Rows of features, standardised as the fit's were."""
        return np.asarray((np.atleast_2d(np.asarray(x, dtype=float)) - np.asarray(self.mean)) / np.asarray(self.scale))

    def linear(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(z @ np.asarray(self.coef) + self.intercept)

    @cached_property
    def _points(self) -> np.ndarray:
        return np.asarray(self.points, dtype=float)

    def box(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The standardised range each feature's samples cover (lowest, highest), or None without samples."""
        if not self.points:
            return None
        return self._points.min(0), self._points.max(0)

    def excess(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        """How far each row lies outside the sampled range, in standard deviations of the furthest feature (0 inside)."""
        z = np.atleast_2d(self.standardise(rows))
        box = self.box()
        if box is None:
            return np.zeros(len(z))
        return np.asarray(np.maximum(np.maximum(z - box[1], box[0] - z), 0.0).max(1))

    def log_seconds(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        """``log(seconds)`` predicted for each feature row by the fitted law and its neighbours, inside the
        sampled range or not (:meth:`OpModel.beyond_range` says which rows lie outside, and their samples)."""
        return self._log_seconds_z(np.atleast_2d(self.standardise(rows)))

    def neighbours(self, rows: Sequence[Sequence[float]], k: int = 3) -> np.ndarray:
        """Each row's ``k`` nearest samples as ``(flops, bytes, seconds)``: shape ``(rows, k, 3)``."""
        z = np.atleast_2d(self.standardise(rows))
        pts = self._points
        near = np.argsort(((z[:, None, :] - pts[None, :, :]) ** 2).sum(-1), axis=1)[:, : min(k, len(pts))]
        raw = pts[near][:, :, :2] * np.asarray(self.scale)[:2] + np.asarray(self.mean)[:2]  # log(flops + 1), log(bytes + 1)
        seconds = np.exp(self.linear(pts) + np.asarray(self.residuals))[near]  # each sample's own time
        return np.concatenate([np.expm1(raw), seconds[:, :, None]], axis=2)

    def _log_seconds_z(self, z: np.ndarray) -> np.ndarray:
        base = self.linear(z) + self.smear
        if not self.residuals or self.k == 0:
            return base
        pts = self._points
        res = np.asarray(self.residuals)
        k = min(self.k, len(res))
        d = np.sqrt(((z[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
        near = np.argsort(d, axis=1)[:, :k]
        dn = np.take_along_axis(d, near, axis=1)
        w = 1.0 / (dn + 1e-3)
        # a query far from every sample (beyond ~1 standard deviation) leans on the linear law
        reach = np.exp(-((dn[:, 0] / 1.0) ** 2))
        return np.asarray(base + reach * (w * res[near]).sum(1) / w.sum(1))

    def with_points(self, rows: Sequence[Sequence[float]], seconds: Sequence[float]) -> KindModel:
        """This model with more samples as neighbours (their residuals against the linear law)."""
        if not rows:
            return self
        z = np.atleast_2d(self.standardise(rows))
        res = np.log(np.asarray(seconds, dtype=float)) - self.linear(z)
        points = self.points + tuple(tuple(float(v) for v in row) for row in z)
        return replace(self, points=points, residuals=self.residuals + tuple(float(r) for r in res), k=max(self.k, 1))

    def to_dict(self) -> dict[str, Any]:
        return {
            "coef": list(self.coef), "intercept": self.intercept, "mean": list(self.mean), "scale": list(self.scale),
            "k": self.k, "q_low": self.q_low, "q_high": self.q_high, "smear": self.smear,
            "points": [[round(v, 4) for v in p] for p in self.points], "residuals": [round(r, 5) for r in self.residuals],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KindModel:
        return cls(
            tuple(data["coef"]), float(data["intercept"]), tuple(data["mean"]), tuple(data["scale"]), int(data["k"]),
            tuple(tuple(p) for p in data.get("points", ())), tuple(data.get("residuals", ())),
            float(data.get("q_low", -0.2)), float(data.get("q_high", 0.2)), float(data.get("smear", 0.0)),
        )  # fmt: skip


def independent_interval(seconds: Sequence[float], q_low: Sequence[float], q_high: Sequence[float]) -> Interval:
    """The 80% interval of a sum of per-op predictions whose log errors are independent.

    Each op's spread is read off its quantiles as ``sigma = (q_high - q_low) / (2 * 1.2816)`` (relative);
    the total's variance is ``sum((t_i * sigma_i)^2)``, and its median shift the time-weighted mean of
    the ops' midpoints. Narrower than summing per-op bounds, which assumes every op errs the same way.
    """
    total = float(sum(seconds))
    if total <= 0:
        return Interval(0.0, 0.0, method="independent per-op errors")
    mid = sum(t * (lo + hi) / 2 for t, lo, hi in zip(seconds, q_low, q_high, strict=True)) / total
    var = sum((t * (hi - lo) / (2 * Z80)) ** 2 for t, lo, hi in zip(seconds, q_low, q_high, strict=True))
    rel = math.sqrt(var) / total
    # q = log(pred / measured): the truth is pred * exp(-q), so the interval flips the quantiles
    return Interval(total * math.exp(-mid - Z80 * rel), total * math.exp(-mid + Z80 * rel), method="independent per-op errors")


@dataclass(frozen=True)
class OpModel:
    """Every kind's :class:`KindModel`, the whole-model residual quantiles, and how many samples came from where."""

    kinds: Mapping[str, KindModel] = field(hash=False)
    #: 10% and 90% quantiles of log(predicted / measured) over whole held-out models (None: not measured)
    model_q: tuple[float, float] | None = None
    counts: Mapping[str, int] = field(hash=False, default_factory=dict)
    #: how each kind's held-out error went (median |error| per kind), for the report
    accuracy: Mapping[str, Any] = field(hash=False, default_factory=dict)
    #: the first touch of large fresh outputs (None: not measured; the kinds' samples then hold it)
    first_touch: FirstTouch | None = None

    def model_for(self, kind: str) -> tuple[str, KindModel] | None:
        if kind in self.kinds:
            return kind, self.kinds[kind]
        return ("generic", self.kinds["generic"]) if "generic" in self.kinds else None

    def predict(self, calls: Sequence[tuple[str, Sequence[float], Sequence[float]]]) -> list[tuple[float, float, float]]:
        """(seconds, q_low, q_high) of each ``(kind, features, generic features)`` call, batched per kind."""
        out: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * len(calls)
        for _, idx, model, rows in self._batches(calls):
            for i, logt in zip(idx, model.log_seconds(rows), strict=True):
                out[i] = (float(math.exp(logt)), model.q_low, model.q_high)
        return out

    def beyond_range(
        self, calls: Sequence[tuple[str, Sequence[float], Sequence[float]]], k: int = 3
    ) -> list[tuple[float, np.ndarray | None]]:
        """For each call, how far it lies outside its kind's sampled range (standard deviations of the furthest
        feature, 0 inside) and its ``k`` nearest samples (:meth:`KindModel.neighbours`; None for a call whose
        kind keeps no samples)."""
        out: list[tuple[float, np.ndarray | None]] = [(0.0, None)] * len(calls)
        for _, idx, model, rows in self._batches(calls):
            if model.points:
                for i, far, near in zip(idx, model.excess(rows), model.neighbours(rows, k), strict=True):
                    out[i] = (float(far), near)
        return out

    def _batches(
        self, calls: Sequence[tuple[str, Sequence[float], Sequence[float]]]
    ) -> list[tuple[str, list[int], KindModel, list[Sequence[float]]]]:
        """The calls grouped by the model that prices them: (kind, indices, model, feature rows)."""
        by_kind: dict[str, list[int]] = {}
        for i, (kind, _, _) in enumerate(calls):
            found = self.model_for(kind)
            if found is not None:
                by_kind.setdefault(found[0], []).append(i)
        return [
            (kind, idx, self.kinds[kind], [calls[i][2] if kind == "generic" else calls[i][1] for i in idx]) for kind, idx in by_kind.items()
        ]

    def interval(self, seconds: Sequence[float], q_low: Sequence[float], q_high: Sequence[float]) -> Interval:
        """The 80% interval of a model whose ops predict ``seconds``: whole-model quantiles when fitted, else independence."""
        if self.model_q is None:
            return independent_interval(seconds, q_low, q_high)
        total = float(sum(seconds))
        return Interval(total * math.exp(-self.model_q[1]), total * math.exp(-self.model_q[0]))

    def with_samples(self, samples: Iterable[Sample]) -> OpModel:
        """This model with measured samples added as neighbours of their kinds (of ``generic`` for a kind
        without its own model; none at all without one)."""
        grouped: dict[str, list[Sample]] = {}
        for s in samples:
            if s.kind in self.kinds:
                grouped.setdefault(s.kind, []).append(s)
            elif "generic" in self.kinds:  # a kind without its own model is predicted by generic's: learn there
                grouped.setdefault("generic", []).append(replace(s, kind="generic", features=s.features[:2]))
        kinds = dict(self.kinds)
        counts = dict(self.counts)
        for kind, got in grouped.items():
            kinds[kind] = kinds[kind].with_points([s.features for s in got], [s.seconds for s in got])
            for s in got:
                counts[s.source] = counts.get(s.source, 0) + 1
        return replace(self, kinds=kinds, counts=counts)

    def to_dict(self) -> dict[str, Any]:
        return {"kinds": {k: m.to_dict() for k, m in self.kinds.items()}, "model_q": None if self.model_q is None else list(self.model_q),
                "counts": dict(self.counts), "accuracy": dict(self.accuracy),
                "first_touch": None if self.first_touch is None else self.first_touch.to_dict()}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpModel:
        q, touch = data.get("model_q"), data.get("first_touch")
        return cls({k: KindModel.from_dict(v) for k, v in data["kinds"].items()}, None if q is None else (float(q[0]), float(q[1])),
                   dict(data.get("counts", {})), dict(data.get("accuracy", {})),
                   None if touch is None else FirstTouch.from_dict(touch))  # fmt: skip
