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

**Predicted time.** Beside the lower bound, a device with a calibration table (``graphprof/devices/calibration/
<preset>.json``, or the ``local`` preset written by ``graphprof calibrate``) gets a *predicted* time:
every recorded aten call is a host demand and a kernel demand, combined on a timeline whose overlap is
fitted per device. The model is :mod:`graphprof.devices.predict`; each layer's predicted time is its calls'
share of the timeline, never below its roofline bound.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import Any

from graphprof.base.choices import Mode, Phase
from graphprof.cost.bounds import DEFAULT_THRESHOLD, LayerBound, Roofline, classify_layer, ridge_point, roofline_time
from graphprof.cost.breakdown import PredictionBreakdown, measured_by_kind, predicted_faults, prediction_breakdown
from graphprof.cost.result import Profile
from graphprof.devices.hardware import Hardware
from graphprof.devices.predict import OutOfRange, Prediction, predict, predict_ops
from graphprof.devices.table import Calibration

__all__ = ["classify", "with_roofline", "IntensityBand", "INTENSITY_BANDS", "intensity_band"]


def classify(profile: Profile, hardware: Hardware | None = None, *, threshold: float | None = None) -> Roofline:
    """Classify every layer of ``profile`` against ``hardware``'s ridge point, or a fixed threshold.

    ``threshold`` overrides the ridge point (and defaults to :data:`DEFAULT_THRESHOLD` without a device).
    Layers are costed forward plus backward (``row.cost``), as the profile's totals are. The predicted
    times come from the calibration ``hardware`` carries (:attr:`Hardware.calibration`), with its notes:
    nothing is read here.
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
    calibration = hardware.calibration if hardware is not None else None  # read with the device, never here
    if calibration is not None and hardware is not None:
        notes += hardware.notes
    if calibration is not None and hardware is not None and calibration.bandwidth_gbs != hardware.bandwidth_gbs:
        calibration = None  # figures overridden on the command line: the table is for the preset
    predicted, said = _predicted(profile, hardware, calibration)
    shares = list(said.seconds) if said is not None else []
    notes += _out_of_range_notes(said.out_of_range if said is not None else ())
    forward = _forward_calls(profile, hardware, calibration, shares)
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
        forward_predicted=_forward_predicted(profile, forward),
        predicted_interval=said.interval if said is not None else None,
        out_of_range=said.out_of_range if said is not None else (),
        breakdown=_breakdown(profile, hardware, calibration, said, forward),
    )


def _predicted(
    profile: Profile, hardware: Hardware | None, calibration: Calibration | None
) -> tuple[list[float | None], Prediction | None]:
    """Predicted seconds per layer (``None`` each without a calibration) and the predictor's whole answer (each
    recorded call's seconds in execution order, the interval and the calls it priced out of range)."""
    if calibration is None or hardware is None:
        return [None] * len(profile.layers), None
    ops = [(i, op) for i, row in enumerate(profile.layers) for op in row.ops]
    said = predict([op for _, op in ops], profile.dtype, hardware, calibration, profile.peak_activation_bytes, profile.allocations)
    predicted: list[float | None] = [0.0] * len(profile.layers)
    for (i, _), share in zip(ops, said.seconds, strict=True):
        predicted[i] = (predicted[i] or 0.0) + share
    return predicted, said


def _out_of_range_notes(outside: tuple[OutOfRange, ...]) -> list[str]:
    """One note naming the calls priced outside their kinds' sampled range, by kind, and what the laws alone
    would have said of them (the interval takes that figure in)."""
    if not outside:
        return []
    kinds = Counter(o.kind for o in outside)
    named = ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())
    held, law = sum(o.seconds for o in outside), sum(o.law_seconds for o in outside)
    return [f"predicted: {len(outside)} call(s) lie outside the range their kind's samples cover ({named}): priced at "
            f"{held * 1e3:.3g} ms, held within their nearest samples' efficiencies, where the fitted laws alone say "
            f"{law * 1e3:.3g} ms; the interval takes both in"]  # fmt: skip


def _forward_calls(
    profile: Profile, hardware: Hardware | None, calibration: Calibration | None, shares: list[float]
) -> list[tuple[str, Any, float]]:
    """Each forward call as ``(module path, record, predicted seconds)``: in eval mode every call with its share
    of the timeline (``shares``), in train mode the forward's ops alone on a timeline of their own."""
    if calibration is None or hardware is None:
        return []
    if profile.mode is not Mode.TRAIN:
        return [(row.module or "(model)", op, t) for (row, op), t in zip(profile.iter_ops(), shares, strict=True)]
    ops = [(row.module or "(model)", op) for row in profile.layers for op in row.ops if op.phase is Phase.FORWARD]
    seconds = predict_ops([op for _, op in ops], profile.dtype, hardware, calibration, profile.peak_activation_bytes)
    return [(layer, op, t) for (layer, op), t in zip(ops, seconds, strict=True)]


def _forward_predicted(profile: Profile, forward: list[tuple[str, Any, float]]) -> tuple[tuple[str, float], ...]:
    """Predicted seconds of the forward's ops alone on the timeline, per module path (train mode only)."""
    if profile.mode is not Mode.TRAIN:
        return ()
    out: dict[str, float] = defaultdict(float)
    for layer, _, seconds in forward:
        out[layer] += seconds
    return tuple(out.items())


def _breakdown(
    profile: Profile,
    hardware: Hardware | None,
    calibration: Calibration | None,
    said: Prediction | None,
    forward: list[tuple[str, Any, float]],
) -> PredictionBreakdown | None:
    """Where the prediction ``said`` goes (:mod:`graphprof.cost.breakdown`), by the kinds the calibration prices by,
    with the page faults it priced, and the measured forward beside it when the profile carries a measurement on
    the kind of device predicted."""
    if calibration is None or hardware is None or said is None:
        return None
    taxonomy = "kind" if calibration.op_model is not None else "class"
    found = prediction_breakdown(profile.layers, list(said.seconds), taxonomy, train=profile.mode is Mode.TRAIN)
    if said.first_touch is not None and profile.mode is not Mode.TRAIN:
        ops = [op for _, op in profile.iter_ops()]
        method = "heap replay" if profile.allocations else "share law"
        found = replace(found, faults=predicted_faults(ops, said.first_touch, calibration.speed, method))
    m = profile.measurement
    if m is None or hardware.target != str(m.device).split(":")[0]:
        return found
    return replace(found, measured=measured_by_kind(m, forward, taxonomy))


def with_roofline(profile: Profile, hardware: Hardware | None = None, *, threshold: float | None = None) -> Profile:
    """``profile`` carrying its classification against ``hardware`` (:func:`classify`) as ``profile.roofline``:
    what every renderer reads, so that none classifies again."""
    return replace(profile, roofline=classify(profile, hardware, threshold=threshold))


@dataclass(frozen=True)
class IntensityBand:
    """One band: its name as seed 002 labels it, the rule, its lower edge (exclusive) and what it means."""

    name: str
    rule: str
    above: float
    meaning: str


#: The four bands, highest first: a layer belongs to the first whose ``above`` its intensity exceeds.
INTENSITY_BANDS = (
    IntensityBand("Strongly compute-bound", "AI > 100", 100.0, "good for GPUs, accelerators"),
    IntensityBand("Compute-bound", "50 < AI <= 100", 50.0, "typical CNNs"),
    IntensityBand("Balanced", "10 < AI <= 50", 10.0, "need both compute and bandwidth"),
    IntensityBand("Memory-bound", "AI <= 10", float("-inf"), "need high bandwidth"),
)


def intensity_band(intensity: float | None, *, flops: int = 1) -> IntensityBand | None:
    """The band of an arithmetic intensity (FLOPs per byte); ``None`` intensity means no bytes moved:
    strongly compute-bound when ``flops`` is positive, no band when there is no work at all."""
    if intensity is None:
        return INTENSITY_BANDS[0] if flops > 0 else None
    return next(band for band in INTENSITY_BANDS if intensity > band.above)
