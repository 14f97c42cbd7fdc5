"""Fit the per-kind latency models of :mod:`graphprof.devices.opmodel` to timed samples (scikit-learn).

Per kind: a ridge regression of ``log(seconds)`` on the standardised log features (scikit-learn's
``Ridge``: a log-log power law that extrapolates), then the number ``k`` of nearest neighbours whose
residuals correct it, chosen by grouped cross-validation (scikit-learn's ``GroupKFold``: a zoo model's
samples are held out together, so a kind is judged on models it never saw). The held-out log errors of
the chosen ``k`` give the kind's 10% and 90% quantiles. Then each zoo model is held out whole, the
others fitted, and its total predicted: those whole-model log errors give the 80% interval of a model's
total (:attr:`graphprof.devices.opmodel.OpModel.model_q`).

scikit-learn is needed only here, to fit (``pip install graphprof[predict]``); predicting reads the
stored numbers with numpy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphprof.devices.opmodel import Z80, KindModel, OpModel, Sample
from graphprof.errors import InvalidInputError

__all__ = ["fit_kind", "fit_op_model", "model_quantiles", "worst_kinds"]

#: Neighbour counts tried per kind (0: the linear law alone).
K_CHOICES = (0, 1, 3, 6)
#: A kind needs this many samples for its own model; fewer fall to ``generic``.
MIN_SAMPLES = 4


def _sklearn() -> Any:
    try:
        from sklearn import linear_model, model_selection
    except ImportError as exc:
        raise InvalidInputError("fitting the latency models needs scikit-learn: pip install 'graphprof[predict]'") from exc
    return linear_model, model_selection


def _fit_linear(x: np.ndarray, y: np.ndarray, k: int) -> KindModel:
    """Ridge on standardised features; every sample kept as a neighbour."""
    linear_model, _ = _sklearn()
    mean = x.mean(0)
    scale = np.where(x.std(0) > 1e-9, x.std(0), 1.0)
    z = (x - mean) / scale
    ridge = linear_model.Ridge(alpha=0.3).fit(z, y)
    res = y - ridge.predict(z)
    return KindModel(tuple(float(c) for c in ridge.coef_), float(ridge.intercept_), tuple(float(m) for m in mean),
                     tuple(float(s) for s in scale), k, tuple(tuple(float(v) for v in row) for row in z),
                     tuple(float(r) for r in res))  # fmt: skip


def _held_out_errors(x: np.ndarray, y: np.ndarray, groups: Sequence[str], k: int) -> np.ndarray:
    """log(predicted / measured) of every sample, each predicted by a fit without its group's fold."""
    _, model_selection = _sklearn()
    folds = min(5, len(set(groups)))
    errors = np.zeros(len(y))
    for train, test in model_selection.GroupKFold(n_splits=folds).split(x, y, groups):
        errors[test] = _fit_linear(x[train], y[train], k).log_seconds(x[test]) - y[test]
    return errors


def fit_kind(samples: Sequence[Sample], generic: bool = False) -> KindModel:
    """One kind's model: ridge plus the ``k`` of :data:`K_CHOICES` with the smallest held-out median |log error|."""
    x = np.asarray([s.features[:2] if generic else s.features for s in samples], dtype=float)
    y = np.log(np.asarray([s.seconds for s in samples], dtype=float))
    groups = [s.group or str(i) for i, s in enumerate(samples)]
    if len(set(groups)) < 2:
        return _fit_linear(x, y, 0)
    scored = [(float(np.median(np.abs(err))), k, err) for k in K_CHOICES for err in [_held_out_errors(x, y, groups, k)]]
    _, k, err = min(scored, key=lambda item: item[0])
    lo, hi = np.quantile(err, [0.1, 0.9])
    model = _fit_linear(x, y, k)
    return KindModel(model.coef, model.intercept, model.mean, model.scale, k, model.points, model.residuals, float(lo), float(hi))


def _fit_kinds(samples: Sequence[Sample]) -> dict[str, KindModel]:
    by_kind: dict[str, list[Sample]] = {}
    for s in samples:
        by_kind.setdefault(s.kind, []).append(s)
    kinds = {kind: fit_kind(got) for kind, got in by_kind.items() if len(got) >= MIN_SAMPLES}
    kernels = [s for s in samples if s.kind != "view"]
    if len(kernels) >= MIN_SAMPLES:
        kinds["generic"] = fit_kind(kernels, generic=True)
    return kinds


def _predict_samples(model: OpModel, samples: Sequence[Sample]) -> list[float]:
    return [t for t, _, _ in model.predict([(s.kind, s.features, s.features[:2]) for s in samples])]


def model_quantiles(samples: Sequence[Sample], models: Sequence[str]) -> tuple[tuple[float, float] | None, dict[str, float]]:
    """10% and 90% quantiles of log(predicted / measured) of whole models, each held out of the fit,
    and each model's error; ``None`` with fewer than 3 models.

    With few models the empirical quantiles are unstable: the normal ``mean +- 1.2816 sd sqrt(1 + 1/n)``
    (the prediction interval of one more model) is used instead.
    """
    errors: dict[str, float] = {}
    for name in models:
        rest = [s for s in samples if s.group != name]
        mine = [s for s in samples if s.group == name]
        if not mine:
            continue
        fitted = OpModel(_fit_kinds(rest))
        errors[name] = math.log(sum(_predict_samples(fitted, mine)) / sum(s.seconds for s in mine))
    if len(errors) < 3:
        return None, errors
    values = list(errors.values())
    mean, sd = statistics.fmean(values), statistics.stdev(values) * math.sqrt(1 + 1 / len(values))
    return (mean - Z80 * sd, mean + Z80 * sd), errors


def fit_op_model(samples: Sequence[Sample], models: Sequence[str] = ()) -> OpModel:
    """Fit every kind with enough samples (and ``generic`` over all kernels); ``models`` names the sample
    groups that are whole models, held out one at a time for :attr:`OpModel.model_q`."""
    if len(samples) < MIN_SAMPLES:
        raise InvalidInputError(f"{len(samples)} timed samples: too few to fit the latency models")
    kinds = _fit_kinds(samples)
    model_q, per_model = model_quantiles(samples, models) if models else (None, {})
    accuracy = {
        "per_kind_q": {k: [m.q_low, m.q_high] for k, m in kinds.items()},
        "per_kind_samples": {k: sum(1 for s in samples if s.kind == k) for k in kinds},
        "held_out_models": per_model,
    }
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.source] = counts.get(s.source, 0) + 1
    return OpModel(kinds, model_q, counts, accuracy)


def worst_kinds(model: OpModel, n: int = 3) -> list[str]:
    """The ``n`` kinds whose held-out 80% band (``q_high - q_low``) is widest: where to sample next."""
    ranked = sorted((k for k in model.kinds if k not in ("generic", "view")), key=lambda k: model.kinds[k].q_low - model.kinds[k].q_high)
    return ranked[:n]
