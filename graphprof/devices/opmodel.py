"""Per-op latency models: one predictor per op kind, fitted to sampled configurations, stored as data.

Each recorded aten call (an :class:`~graphprof.cost.result.OpRecord`) falls in one *kind* (:func:`op_kind`):
a depthwise, grouped, pointwise (1x1) or dense convolution, a linear layer, a batched product, attention,
a norm, a softmax, an activation, pooling, a reduction, a gather, an element-wise op, a copy, or a view.
Its *features* (:func:`op_features`) are logarithms of what the dry run records: FLOPs actually executed
(``work_fraction`` applied), bytes, and the kind's own shape figures (a convolution's batch, channels,
output pixels, kernel area, stride and reduction depth; a product's M, K and N; attention's heads,
lengths and head size; an element-wise op's element count and inner size).

A kind's model (:class:`KindModel`) predicts ``log(seconds)`` in two parts::

    log t = w . z + b  +  residual of the k nearest sampled configurations (distance-weighted)
    z     = (features - mean) / scale

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
from typing import Any

import numpy as np

from graphprof.base.choices import OpStatus

__all__ = [
    "KINDS",
    "Interval",
    "KindModel",
    "OpModel",
    "Sample",
    "call_of",
    "independent_interval",
    "op_features",
    "op_kind",
]

#: The op kinds, each with its own model; ``generic`` serves a kind without samples.
KINDS = (
    "conv_dw", "conv_grouped", "conv_pointwise", "conv_dense", "linear", "bmm", "sdpa", "norm", "softmax",
    "activation", "pooling", "reduction", "gather", "elementwise", "copy", "view", "generic",
)  # fmt: skip

#: The z-score of the 10% and 90% quantiles of a normal: an 80% interval is +-1.2816 sigma.
Z80 = 1.2815515655446004

_CONV = frozenset({"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution", "mkldnn_convolution"})
_LINEAR = frozenset({"mm", "addmm", "linear", "mv", "addmv", "dot", "_int_mm"})
_BMM = frozenset({"bmm", "baddbmm", "addbmm", "matmul"})
_NORM = frozenset({
    "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_group_norm", "_fused_rms_norm", "rms_norm", "layer_norm", "batch_norm", "group_norm",
})  # fmt: skip
_SOFTMAX = frozenset({"_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"})
_ACTIVATION = frozenset({
    "relu", "gelu", "silu", "hardswish", "hardsigmoid", "sigmoid", "tanh", "elu", "leaky_relu", "relu6",
    "hardtanh", "mish", "softplus", "selu", "celu", "glu", "prelu", "_prelu_kernel", "erf", "exp",
})  # fmt: skip
_REDUCTION = frozenset({"sum", "mean", "amax", "amin", "max", "min", "var", "std", "var_mean", "std_mean", "norm",
                        "linalg_vector_norm", "argmax", "argmin", "cumsum", "logsumexp", "prod", "all", "any"})  # fmt: skip
_GATHER = frozenset({"embedding", "index_select", "index", "gather", "embedding_bag", "_embedding_bag", "take"})
_COPY = frozenset({
    "clone", "_to_copy", "copy", "contiguous", "cat", "stack", "constant_pad_nd", "pad", "roll", "repeat",
    "flip", "expand_copy", "narrow_copy", "masked_fill", "index_put", "zeros_like", "ones_like", "new_zeros",
    "fill", "zero", "where", "tril", "triu", "full", "zeros", "ones", "empty", "arange", "scatter", "split_with_sizes_copy",
})  # fmt: skip


def _name(op: str) -> str:
    """``"aten.relu_"`` -> ``"relu"``: the op's packet name without its in-place underscore."""
    name = op.rsplit(".", 1)[-1]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


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
                        ("activation", _ACTIVATION), ("reduction", _REDUCTION), ("gather", _GATHER), ("copy", _COPY)):  # fmt: skip
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
    """Elements out, elements in (all inputs), the inner (last) size, the number of inputs."""
    y = out[0] if out else (inp[0] if inp else ())
    return [_log(math.prod(y)), _log(sum(math.prod(s) for s in inp)), _log(y[-1] if y else 1), float(len(inp))]


def op_features(kind: str, flops: float, nbytes: float, input_shapes: Sequence[Sequence[int]],
                output_shapes: Sequence[Sequence[int]]) -> list[float]:  # fmt: skip
    """The feature vector of one call of ``kind``: ``log(flops + 1)``, ``log(bytes + 1)``, then its own
    (the first two are the ``generic`` kind's features)."""
    base = [_log(flops), _log(nbytes)]
    if kind.startswith("conv"):
        return base + _conv_features(input_shapes, output_shapes)
    if kind in ("linear", "bmm"):
        return base + _product_features(kind, input_shapes, output_shapes)
    if kind == "sdpa":
        return base + _sdpa_features(input_shapes)
    if kind == "generic":
        return base
    return base + _stream_features(input_shapes, output_shapes)


def call_of(op: Any) -> tuple[str, list[float], list[float]] | None:
    """``(kind, features, generic features)`` of an :class:`~graphprof.cost.result.OpRecord`; ``None`` for a call
    that costs nothing (``prim.*``) or that no formula counted."""
    kind = op_kind(op.op, op.status, op.input_shapes)
    if kind is None or op.status is OpStatus.UNSUPPORTED:
        return None
    flops = float(op.cost.flops) * float(op.work_fraction)
    nbytes = float(op.cost.bytes_moved)
    features = op_features(kind, flops, nbytes, op.input_shapes, op.output_shapes)
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

    def standardise(self, x: Sequence[Sequence[float]]) -> np.ndarray:
        """Rows of features, standardised as the fit's were."""
        return np.asarray((np.atleast_2d(np.asarray(x, dtype=float)) - np.asarray(self.mean)) / np.asarray(self.scale))

    def linear(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(z @ np.asarray(self.coef) + self.intercept)

    def log_seconds(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        """``log(seconds)`` predicted for each feature row."""
        z = np.atleast_2d(self.standardise(rows))
        base = self.linear(z)
        if not self.residuals or self.k == 0:
            return base
        pts = np.asarray(self.points)
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
            "k": self.k, "q_low": self.q_low, "q_high": self.q_high,
            "points": [[round(v, 4) for v in p] for p in self.points], "residuals": [round(r, 5) for r in self.residuals],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KindModel:
        return cls(
            tuple(data["coef"]), float(data["intercept"]), tuple(data["mean"]), tuple(data["scale"]), int(data["k"]),
            tuple(tuple(p) for p in data.get("points", ())), tuple(data.get("residuals", ())),
            float(data.get("q_low", -0.2)), float(data.get("q_high", 0.2)),
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

    def model_for(self, kind: str) -> tuple[str, KindModel] | None:
        if kind in self.kinds:
            return kind, self.kinds[kind]
        return ("generic", self.kinds["generic"]) if "generic" in self.kinds else None

    def predict(self, calls: Sequence[tuple[str, Sequence[float], Sequence[float]]]) -> list[tuple[float, float, float]]:
        """(seconds, q_low, q_high) of each ``(kind, features, generic features)`` call, batched per kind."""
        out: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * len(calls)
        by_kind: dict[str, list[int]] = {}
        for i, (kind, _, _) in enumerate(calls):
            found = self.model_for(kind)
            if found is not None:
                by_kind.setdefault(found[0], []).append(i)
        for kind, idx in by_kind.items():
            model = self.kinds[kind]
            rows = [calls[i][2] if kind == "generic" else calls[i][1] for i in idx]
            for i, logt in zip(idx, model.log_seconds(rows), strict=True):
                out[i] = (float(math.exp(logt)), model.q_low, model.q_high)
        return out

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
                "counts": dict(self.counts), "accuracy": dict(self.accuracy)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpModel:
        q = data.get("model_q")
        return cls({k: KindModel.from_dict(v) for k, v in data["kinds"].items()}, None if q is None else (float(q[0]), float(q[1])),
                   dict(data.get("counts", {})), dict(data.get("accuracy", {})))  # fmt: skip
