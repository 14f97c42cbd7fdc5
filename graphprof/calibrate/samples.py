"""Timed samples for the latency models: from the op table's grid and from real runs of whole models.

**Ops where they run** (:func:`samples_from_context`): a plain forward's dispatched calls, timed in
place (:func:`graphprof.measure.context.context_times`), paired in execution order with the dry run's
forward records (the longest common runs of op names: a call the dry run sees otherwise pairs with nothing
and gives no sample; a fused CPU kernel the dry run records with its parts, such as
``_native_multi_head_attention``, pairs but gives none either, since its parts are of several kinds and
the predictor prices each by its own, :mod:`graphprof.cost.parts`). Each paired call gives one
sample: its own time, scaled by ``plain forward / calls' sum`` so that the time outside every call
(module calls, Python, freeing activations; or, below 1, the profiler's own cost) is shared over the
calls in proportion to their time, and a model's samples sum to its plain forward. (Fitted as a cost
per call and per byte, that outside time varied several-fold between two quiet calibrations of this
machine: it is the difference of two noisy figures; shared in proportion it needs no fit.) What fresh
pages cost is taken out of each sample and priced apart (:class:`~graphprof.devices.opmodel.FirstTouch`):
the first touch of outputs at or above the allocator's limit, and the rest of the bytes the forward
faulted in (counted around plain forwards), shared over its calls by their outputs' bytes below the limit
(:func:`fault_split`).

**A real run** (:func:`samples_from_run`): ``--measure`` times each aten op per layer under
``torch.profiler`` (:class:`graphprof.measure.OpTime`: the calls a dispatch mode sees, their inclusive
time). Each (layer, op) whose dry-run records in that layer all share one configuration gives one sample
per call, scaled as above so that the profiled calls sum to the plain forward, and without the first-touch
time the calibration prices for those calls (the run does not count its own faults).

**The grid** (:func:`samples_from_table`): single calls timed back to back (:mod:`graphprof.calibrate.bench`),
marked :data:`~graphprof.devices.opmodel.ALONE`: what running in place adds (a fresh output, a cold
input, the module call around it) is what the context features of the fit learn from the samples above.
"""

from __future__ import annotations

import difflib
import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from graphprof.base.choices import OpStatus, Phase
from graphprof.base.names import functional_op
from graphprof.devices.opmodel import ALONE, FirstTouch, Sample, call_of, conv_scratch, op_features, op_kind

__all__ = ["context_pairs", "fault_split", "first_touch_of", "samples_from_context", "samples_from_run", "samples_from_table"]


def _forward_records(profile: Any) -> dict[tuple[str, str], list[Any]]:
    """The dry run's forward op records per (module path, functional aten name)."""
    out: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in profile.layers:
        for op in row.ops:
            if op.phase is Phase.FORWARD:
                out[(row.module or "(model)", functional_op(op.op.removeprefix("aten.")))].append(op)
    return out


def _scale(measurement: Any) -> float:
    """The factor that brings the profiled calls to the plain forward (the time outside them shared in
    proportion; below 1, the profiler's own cost taken out)."""
    inside_us = sum(t.dispatched_time_us for t in measurement.ops if t.dispatched_calls)
    forward_us = measurement.forward.mean * 1e3
    return forward_us / inside_us if inside_us > 0 else 1.0


def samples_from_run(
    profile: Any, measurement: Any, *, source: str = "run", group: str = "", first_touch: FirstTouch | None = None
) -> list[Sample]:
    """Samples of the ops of a measured forward whose configuration the dry run pins down (see above), without
    what fresh pages cost them as ``first_touch`` prices it (the calibration's term, which a prediction adds
    back: a ``--measure`` run does not count its faults, so the calibration's share stands in for them)."""
    if measurement is None or not measurement.ops or measurement.forward is None:
        return []
    records = _forward_records(profile)
    factor = _scale(measurement)
    touch = None if first_touch is None else first_touch.for_forward(profile.peak_activation_bytes)
    samples = []
    for t in measurement.ops:
        if not t.dispatched_calls:
            continue
        layer = "(model)" if t.layer in ("", "(model)") else t.layer
        mine = records.get((layer, functional_op(t.op.removeprefix("aten::"))), [])
        calls = {(c[0], tuple(c[1])) for c in (call_of(op) for op in mine) if c is not None}
        if len(mine) != t.dispatched_calls or len(calls) != 1 or any(getattr(op, "parts", ()) for op in mine):
            continue  # unmatched, several configurations sharing one measured time, or a fused kernel's parts
        kind, features = calls.pop()
        seconds = t.dispatched_time_us * 1e-6 / t.dispatched_calls * factor
        if touch is not None and seconds > 0:
            seconds = _less(seconds, sum(touch.seconds(op) for op in mine) / len(mine))
        if seconds > 0:
            samples += [Sample(kind, features, seconds, source, group)] * t.dispatched_calls
    return samples


def _forward_calls(profile: Any) -> list[Any]:
    """The dry run's forward records of aten calls, in execution order (``prim.*`` records are Python-level
    facts, not calls)."""
    return [op for row in profile.layers for op in row.ops if op.phase is Phase.FORWARD and op.op.startswith("aten.")]


def context_pairs(profile: Any, times: Any) -> list[tuple[Any, float]]:
    """``(dry-run record, in-place seconds)`` of every forward call the two runs share, in execution order,
    each call's time scaled so that the calls sum to the plain forward (see the module docstring)."""
    if not times.ops:
        return []
    records = _forward_calls(profile)
    names = [functional_op(op.op.removeprefix("aten.")) for op in records]
    ran = [functional_op(name.removeprefix("aten::")) for name, _ in times.ops]
    factor = times.forward_s / times.ops_s if times.ops_s > 0 else 1.0
    blocks = difflib.SequenceMatcher(None, names, ran, autojunk=False).get_matching_blocks()
    return [(records[b.a + i], times.ops[b.b + i][1] * factor) for b in blocks for i in range(b.size)]


def first_touch_of(table: Mapping[str, Any]) -> FirstTouch | None:
    """The :class:`~graphprof.devices.opmodel.FirstTouch` an op table measured (None: not measured, or no limit found)."""
    touch = table.get("floors", {}).get("first_touch")
    if not touch or touch.get("limit_bytes") is None:
        return None
    return FirstTouch.from_dict(touch)


def _less(seconds: float, touch: float) -> float:
    """A call's time without its first touch, never below a quarter of it (the allocator may have had the
    block at hand this time)."""
    return max(seconds - touch, 0.25 * seconds)


def fault_split(profile: Any, fault_bytes: float, first_touch: FirstTouch) -> tuple[float, float]:
    """``(faulted, exposed)`` of one plain forward that faulted ``fault_bytes`` in all: the bytes its pages faulted in
    beyond its fresh blocks (outputs and convolutions' copies, :meth:`~graphprof.devices.firsttouch.FirstTouch.fresh`)
    at or above the first-touch limit (those fault whole, and are priced apart), and its fresh blocks' bytes between
    :attr:`~graphprof.devices.opmodel.FirstTouch.min_bytes` and the limit, where the rest faulted."""
    above = exposed = 0.0
    for op in _forward_calls(profile):
        a, b = first_touch.split(first_touch.fresh(op))
        above, exposed = above + a, exposed + b
    return max(float(fault_bytes) - above, 0.0), exposed


def samples_from_context(
    profile: Any, times: Any, *, source: str = "calibration", group: str = "", first_touch: FirstTouch | None = None
) -> list[Sample]:
    """Samples of a plain forward's calls timed in place, paired with the dry run's records, without what fresh
    pages cost them: the first touch of outputs at or above the limit, and the forward's other faulted bytes
    (:func:`fault_split`) shared over its calls by their outputs' bytes below the limit."""
    per_byte = 0.0
    if first_touch is not None:
        faulted, exposed = fault_split(profile, times.fault_bytes, first_touch)
        per_byte = faulted / exposed if exposed > 0 else 0.0
    samples = []
    for op, seconds in context_pairs(profile, times):
        call = None if getattr(op, "parts", ()) else call_of(op)
        if call is not None and seconds > 0:
            own = seconds
            if first_touch is not None:
                above, between = first_touch.split(first_touch.fresh(op))
                own = _less(seconds, first_touch.per_byte_s * (above + min(per_byte, 1.0) * between))
            samples.append(Sample(call[0], tuple(call[1]), own, source, group))
    return samples


def samples_from_table(table: Mapping[str, Any], group_prefix: str = "grid") -> list[Sample]:
    """Samples of an op table's records (float32 only: the local predictions are fp32's), timed alone; the
    first touch of large outputs (a loop pays it too) taken out."""
    touch = first_touch_of(table)
    samples = []
    for r in table["records"]:
        if r["dtype"] != "float32":
            continue
        kind = op_kind(r["op"], OpStatus.COUNTED, r["shapes"])
        if kind is None:
            continue
        features = op_features(kind, float(r["flops"]), float(r["bytes"]), r["shapes"], r.get("out_shapes", []), ALONE)
        seconds = float(r["seconds"])
        if touch is not None:  # float32: 4 bytes an element
            outputs = [4.0 * math.prod(shape) for shape in r.get("out_shapes", [])]
            copies = conv_scratch(r["op"], r["shapes"], r.get("out_shapes", []), 4.0, touch.conv_block, touch.threads)
            seconds = _less(seconds, touch.of_outputs(outputs + copies))
        samples.append(Sample(kind, tuple(features), seconds, "calibration", f"{group_prefix}:{r.get('label', r['op'])}"))
    return samples
