"""Fit the per-kind latency models of :mod:`graphprof.devices.opmodel` to timed samples (scikit-learn).

Per kind: a ridge regression of ``log(seconds)`` on the standardised log features (scikit-learn's
``Ridge``: a log-log power law that extrapolates), then the number ``k`` of nearest neighbours whose
residuals correct it, chosen by grouped cross-validation (scikit-learn's ``GroupKFold``: a zoo model's
samples are held out together, so a kind is judged on models it never saw). The fit's own residuals give
the kind's smearing term (Duan's: ``log mean exp(residual)``; the fit predicts a median, a model's ops add
up by their means), and the held-out log errors of the chosen ``k`` its 10% and 90% quantiles. (The
smearing term corrects for the scatter of the times about the predictor, not for how far the law misses on an
unseen model: taken from the held-out errors, which hold that miss too, it shifted predictions by -15% to
+36% a kind, and, re-fitted on one set of timings, the whole forwards of held-out sample models came
out 16.8% off at the median instead of 5.5%. Nor the scatter about the law alone where neighbours correct it:
taken so, it priced the calibration's own sample models' whole forwards 7.4% (batch 1) and 8.3% (batch 8) over
their fresh-process times at the median, against 2.3% and 4.3% without it, one calibration of a 2-core VM.) Then each zoo model is held out whole, the
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

from graphprof.devices.opmodel import Z80, FirstTouch, KindModel, OpModel, Sample
from graphprof.errors import InvalidInputError

__all__ = ["distinct", "fit_kind", "fit_op_model", "held_out_summary", "model_quantiles", "smearing", "worst_kinds"]

#: Neighbour counts tried per kind (0: the linear law alone).
K_CHOICES = (0, 1, 3, 6)
#: The largest log error (a factor of e) one sample brings to its kind's smearing term.
SMEAR_BOUND = 1.0
#: A kind needs this many samples for its own model; fewer fall to ``generic``.
MIN_SAMPLES = 4


def _sklearn() -> Any:
    try:
        from sklearn import linear_model, model_selection
    except ImportError as exc:
        raise InvalidInputError("fitting the latency models needs scikit-learn: pip install 'graphprof[predict]'") from exc
    return linear_model, model_selection


def _fit_linear(x: np.ndarray, y: np.ndarray, k: int, weight: np.ndarray | None = None) -> KindModel:
    """Ridge on standardised features, each distinct configuration weighted by how often it ran; every
    configuration kept as a neighbour."""
    linear_model, _ = _sklearn()
    mean = x.mean(0)
    scale = np.where(x.std(0) > 1e-9, x.std(0), 1.0)
    z = (x - mean) / scale
    ridge = linear_model.Ridge(alpha=0.3).fit(z, y, sample_weight=weight)
    res = y - ridge.predict(z)
    return KindModel(tuple(float(c) for c in ridge.coef_), float(ridge.intercept_), tuple(float(m) for m in mean),
                     tuple(float(s) for s in scale), k, tuple(tuple(float(v) for v in row) for row in z),
                     tuple(float(r) for r in res))  # fmt: skip


def _held_out_errors(x: np.ndarray, y: np.ndarray, groups: Sequence[str], k: int, weight: np.ndarray) -> np.ndarray:
    """log(predicted / measured) of every configuration, each predicted by a fit without its group's fold."""
    _, model_selection = _sklearn()
    folds = min(5, len(set(groups)))
    errors = np.zeros(len(y))
    for train, test in model_selection.GroupKFold(n_splits=folds).split(x, y, groups):
        errors[test] = _fit_linear(x[train], y[train], k, weight[train]).log_seconds(x[test]) - y[test]
    return errors


def smearing(errors: np.ndarray, bound: float = SMEAR_BOUND, weight: np.ndarray | None = None) -> float:
    """``log mean exp(-e)`` of log errors ``e`` (log predicted - log measured), each first held within
    ``+-bound`` (and weighted by ``weight``): the shift from a median prediction to a mean one, which one
    wild sample cannot blow up.

    Errors of +-0.5 in equal numbers: ``log((e^-0.5 + e^0.5) / 2) = log(1.1276) = 0.1201``.
    """
    return float(np.log(np.average(np.exp(-np.clip(errors, -bound, bound)), weights=weight)))


def distinct(samples: Sequence[Sample], generic: bool = False) -> tuple[list[Sample], np.ndarray]:
    """The distinct configurations of ``samples`` (kind, features, group: ``generic`` reads the first two
    features only), each with the mean of its seconds, and how many samples each stands for.

    A model runs the same configuration many times (a ResNet's blocks, its views): one point per
    configuration keeps the fit's cost to the configurations, and its weight keeps their share.
    """
    merged: dict[tuple[Any, ...], list[Any]] = {}
    for s in samples:
        features = s.features[:2] if generic else s.features
        slot = merged.setdefault((s.kind, features, s.group, s.source), [0.0, 0])
        slot[0] += s.seconds
        slot[1] += 1
    points = [Sample(kind, features, total / n, source, group) for (kind, features, group, source), (total, n) in merged.items()]
    return points, np.asarray([n for _, n in merged.values()], dtype=float)


def _choose_k(x: np.ndarray, y: np.ndarray, groups: list[str], weight: np.ndarray, k: int | None) -> tuple[int, np.ndarray]:
    """The neighbour count with the smallest held-out median |log error| (each configuration counted as
    often as it ran), or ``k`` when given; and its held-out errors."""
    choices = K_CHOICES if k is None else (k,)
    scored = [(float(np.median(np.repeat(np.abs(err), weight.astype(int)))), c, err)
              for c in choices for err in [_held_out_errors(x, y, groups, c, weight)]]  # fmt: skip
    _, best, err = min(scored, key=lambda item: item[0])
    return best, err


def fit_kind(samples: Sequence[Sample], generic: bool = False, k: int | None = None) -> KindModel:
    """One kind's model: ridge plus the ``k`` of :data:`K_CHOICES` (or the given one) with the smallest
    held-out median |log error|, over the distinct configurations (:func:`distinct`)."""
    points, weight = distinct(samples, generic)
    x = np.asarray([s.features for s in points], dtype=float)
    y = np.log(np.asarray([s.seconds for s in points], dtype=float))
    groups = [s.group or str(i) for i, s in enumerate(points)]
    if len(set(groups)) < 2:
        return _fit_linear(x, y, 0, weight)
    best, err = _choose_k(x, y, groups, weight, k)
    model = _fit_linear(x, y, best, weight)
    # Duan's, over the residuals the predictor leaves: the law's where it stands alone (k = 0); with neighbours, a
    # sampled configuration is priced at its own mean time already, and the law's scatter is what they correct
    smear = smearing(model.log_seconds(x.tolist()) - y, weight=weight)
    err = np.repeat(err + smear, weight.astype(int))  # the held-out errors of the smeared predictions, for the quantiles
    lo, hi = np.quantile(err, [0.1, 0.9])
    return KindModel(model.coef, model.intercept, model.mean, model.scale, best, model.points, model.residuals, float(lo), float(hi), smear)


def _fit_kinds(samples: Sequence[Sample], ks: dict[str, int] | None = None) -> dict[str, KindModel]:
    """Every kind with enough samples, and ``generic``; ``ks`` fixes each kind's neighbour count (no choice)."""
    by_kind: dict[str, list[Sample]] = {}
    for s in samples:
        by_kind.setdefault(s.kind, []).append(s)
    ks = ks or {}
    kinds = {kind: fit_kind(got, k=ks.get(kind)) for kind, got in by_kind.items() if len(got) >= MIN_SAMPLES}
    kernels = [s for s in samples if s.kind != "view"]
    if len(kernels) >= MIN_SAMPLES:
        kinds["generic"] = fit_kind(kernels, generic=True, k=ks.get("generic"))
    return kinds


def _predict_samples(model: OpModel, samples: Sequence[Sample]) -> list[float]:
    return [t for t, _, _ in model.predict([(s.kind, s.features, s.features[:2]) for s in samples])]


def model_quantiles(
    samples: Sequence[Sample], models: Sequence[str], ks: dict[str, int] | None = None
) -> tuple[tuple[float, float] | None, dict[str, float]]:
    """10% and 90% quantiles of log(predicted / measured) of whole models, each held out of the fit
    (``ks``: each kind's neighbour count, as the full fit chose it), and each model's error; ``None``
    with fewer than 3 models.

    With few models the empirical quantiles are unstable: the normal ``mean +- 1.2816 sd sqrt(1 + 1/n)``
    (the prediction interval of one more model) is used instead.
    """
    errors: dict[str, float] = {}
    for name in models:
        rest = [s for s in samples if s.group != name]
        mine = [s for s in samples if s.group == name]
        if not mine:
            continue
        predicted = sum(_predict_samples(OpModel(_fit_kinds(rest, ks)), mine))
        errors[name] = math.log(predicted / sum(s.seconds for s in mine))
    if len(errors) < 3:
        return None, errors
    values = list(errors.values())
    mean, sd = statistics.fmean(values), statistics.stdev(values) * math.sqrt(1 + 1 / len(values))
    return (mean - Z80 * sd, mean + Z80 * sd), errors


def held_out_summary(log_errors: dict[str, float]) -> dict[str, Any]:
    """Median |error|, signed median, share within +-10% and worst of whole held-out models, from their
    log errors (``log(predicted / measured)``), as relative errors (``exp(e) - 1``).

    Log errors of ``log(1.05)``, ``log(0.8)`` and ``log(1.2)``: errors +5%, -20%, +20%; median |error| 20%,
    signed median +5%, 1 of 3 within +-10%, worst -20% (the first of equal magnitude).
    """
    errors = [math.expm1(e) for e in log_errors.values()]
    return {
        "models": len(errors),
        "median_abs_error": statistics.median(abs(e) for e in errors),
        "signed_median_error": statistics.median(errors),
        "within_10_percent": sum(abs(e) <= 0.1 for e in errors),
        "worst_error": max(errors, key=abs),
    }


def fit_op_model(samples: Sequence[Sample], models: Sequence[str] = (), first_touch: FirstTouch | None = None) -> OpModel:
    """Fit every kind with enough samples (and ``generic`` over all kernels); ``models`` names the sample
    groups that are whole models, held out one at a time for :attr:`OpModel.model_q`. ``first_touch``
    (measured, not fitted) is kept with them: the samples come without it."""
    if len(samples) < MIN_SAMPLES:
        raise InvalidInputError(f"{len(samples)} timed samples: too few to fit the latency models")
    kinds = _fit_kinds(samples)
    model_q, per_model = model_quantiles(samples, models, {k: m.k for k, m in kinds.items()}) if models else (None, {})
    accuracy = {
        "per_kind_q": {k: [m.q_low, m.q_high] for k, m in kinds.items()},
        "per_kind_samples": {k: sum(1 for s in samples if s.kind == k) for k in kinds},
        "held_out_models": per_model,
        **({"held_out_summary": held_out_summary(per_model)} if per_model else {}),
    }
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.source] = counts.get(s.source, 0) + 1
    return OpModel(kinds, model_q, counts, accuracy, first_touch)


def worst_kinds(model: OpModel, n: int = 3) -> list[str]:
    """The ``n`` kinds whose held-out 80% band (``q_high - q_low``) is widest: where to sample next."""
    ranked = sorted((k for k in model.kinds if k not in ("generic", "view")), key=lambda k: model.kinds[k].q_low - model.kinds[k].q_high)
    return ranked[:n]
