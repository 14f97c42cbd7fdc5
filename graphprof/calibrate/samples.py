"""Timed samples for the latency models: from the op table's grid and from real runs of whole models.

**A real run** (:func:`samples_from_run`): ``--measure`` times each aten op per layer under
``torch.profiler`` (:class:`graphprof.measure.OpTime`: the calls a dispatch mode sees, their inclusive
time). Each (layer, op) whose dry-run records in that layer all share one configuration gives one sample
per call. The time between ops (the module calls, Python, the allocator) is real eager cost too: the
plain forward's time minus the profiled ops' sum, shared equally over the dispatched calls, is added to
each, so that a model's samples sum to its plain forward and predict the *eager* model, host included.

**The grid** (:func:`samples_from_table`): single calls timed back to back (:mod:`graphprof.calibrate.bench`),
each raised by the in-context host cost of one op (``host_per_kernel_s - floor_s``: a bare call's
dispatch is already in its time; a module's call around it is not).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from graphprof.base.choices import OpStatus, Phase
from graphprof.base.names import functional_op
from graphprof.devices.opmodel import Sample, call_of, op_features, op_kind

__all__ = ["samples_from_run", "samples_from_table"]


def _forward_records(profile: Any) -> dict[tuple[str, str], list[Any]]:
    """The dry run's forward op records per (module path, functional aten name)."""
    out: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in profile.layers:
        for op in row.ops:
            if op.phase is Phase.FORWARD:
                out[(row.module or "(model)", functional_op(op.op.removeprefix("aten.")))].append(op)
    return out


def _in_context(measurement: Any) -> tuple[float, float]:
    """``(seconds added per dispatched call, factor)`` that make the profiled ops sum to the plain forward:
    the time outside every op shared per call, or, where the profiled ops already exceed the plain forward
    (the profiler's own cost), a common scale below 1."""
    inside_us = sum(t.dispatched_time_us for t in measurement.ops if t.dispatched_calls)
    calls = sum(t.dispatched_calls for t in measurement.ops)
    forward_us = measurement.forward.mean * 1e3
    if calls == 0 or inside_us <= 0:
        return 0.0, 1.0
    if forward_us >= inside_us:
        return (forward_us - inside_us) / calls * 1e-6, 1.0
    return 0.0, forward_us / inside_us


def samples_from_run(profile: Any, measurement: Any, *, source: str = "run", group: str = "") -> list[Sample]:
    """Samples of the ops of a measured forward whose configuration the dry run pins down (see above)."""
    if measurement is None or not measurement.ops or measurement.forward is None:
        return []
    records = _forward_records(profile)
    gap, factor = _in_context(measurement)
    samples = []
    for t in measurement.ops:
        if not t.dispatched_calls:
            continue
        layer = "(model)" if t.layer in ("", "(model)") else t.layer
        mine = records.get((layer, functional_op(t.op.removeprefix("aten::"))), [])
        calls = {(c[0], tuple(c[1])) for c in (call_of(op) for op in mine) if c is not None}
        if len(mine) != t.dispatched_calls or len(calls) != 1:
            continue  # unmatched, or several configurations sharing one measured time
        kind, features = calls.pop()
        seconds = t.dispatched_time_us * 1e-6 / t.dispatched_calls * factor + gap
        if seconds > 0:
            samples += [Sample(kind, features, seconds, source, group)] * t.dispatched_calls
    return samples


def samples_from_table(table: Mapping[str, Any], group_prefix: str = "grid") -> list[Sample]:
    """Samples of an op table's records (float32 only: the local predictions are fp32's), in context."""
    floors = table["floors"]
    extra = max(0.0, float(floors["host_per_kernel_s"]) - float(floors["floor_s"]))
    samples = []
    for r in table["records"]:
        if r["dtype"] != "float32":
            continue
        kind = op_kind(r["op"], OpStatus.COUNTED, r["shapes"])
        if kind is None:
            continue
        features = op_features(kind, float(r["flops"]), float(r["bytes"]), r["shapes"], r.get("out_shapes", []))
        samples.append(Sample(kind, tuple(features), float(r["seconds"]) + extra, "calibration", f"{group_prefix}:{r.get('label', r['op'])}"))
    return samples
