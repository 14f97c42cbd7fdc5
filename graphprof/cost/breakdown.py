"""Where the prediction goes: the predicted seconds by op kind and by layer, and, when a measurement ran, the
measured seconds by the same kinds beside them, so that a reader sees which ops the prediction gets wrong.

The kinds are what the predictor prices by: a calibration with kind models (``graphprof calibrate``'s ``local``
preset) prices every call by its :func:`graphprof.devices.opmodel.op_kind` (``conv_dw``, ``linear``,
``activation``, ...); one with class rates only (the shipped presets) by its
:func:`graphprof.devices.predict.op_class` (``conv``, ``matmul``, ``elementwise``, ...).
:attr:`PredictionBreakdown.taxonomy` says which. Every call has a kind (a call outside aten, ``prim.*``, is
:data:`OUTSIDE_ATEN`), so the kinds' predicted seconds sum to the predicted time, as the layers' do.

**Like for like.** The measured per-op times (``OpTime.dispatched_time_us``) are of plain forwards under
``torch.profiler`` with per-layer ranges, so they sit beside the *forward's* prediction: the whole
prediction in eval mode, the forward's own timeline in train mode (the backward is left out of both). A
measured call is given the kind of the dry run's calls of the same op in the same layer (split by their
count where they differ, a convolution's kind needing its weight's shape); a call the dry run did not
record in that layer takes the kind of the op's calls elsewhere, else the kind its name alone gives
(:attr:`MeasuredByKind.unmatched_s` counts those seconds). The time a profiled forward spends outside every
dispatched call (Python, module calls, composite ops' wrappers) is its own row,
:attr:`MeasuredByKind.between_s`: the predictor folds that time into the calls' own predictions.

Worked example, ``Linear(4, 2)`` then ``ReLU`` in eval mode with kind models: two calls, ``aten.addmm``
(kind ``linear``) and ``aten.relu`` (kind ``activation``); if they are predicted at 3 us and 1 us, the
kinds read ``linear 3 us (75%)`` and ``activation 1 us (25%)``, summing to the predicted 4 us.

Pure records and arithmetic over a profile's rows and per-call predicted seconds (computed by
:func:`graphprof.cost.roofline.classify`, which calls the predictor once); nothing here predicts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphprof.base.choices import OpStatus
from graphprof.base.names import functional_op
from graphprof.devices.opmodel import op_kind
from graphprof.devices.predict import op_class

__all__ = [
    "OUTSIDE_ATEN",
    "TAXONOMIES",
    "TOP_LAYERS",
    "PredictedFaults",
    "PredictedPart",
    "MeasuredByKind",
    "MeasuredKind",
    "PredictionBreakdown",
    "kind_of",
    "measured_by_kind",
    "predicted_faults",
    "prediction_breakdown",
]

#: The kind of a call outside aten (``prim.*``): the kind models price none, the class rates a host floor.
OUTSIDE_ATEN = "(outside aten)"
#: How many layers :attr:`PredictionBreakdown.layers` keeps, the most predicted first.
TOP_LAYERS = 10
#: The two ways the predictor groups calls, with what each names: the key of :attr:`PredictionBreakdown.taxonomy`.
TAXONOMIES: Mapping[str, str] = {
    "kind": "op_kind (graphprof.devices.opmodel), what the calibration's kind models price by",
    "class": "op_class (graphprof.devices.predict), what the calibration's class rates price by",
}


def kind_of(op: str, status: OpStatus, input_shapes: Sequence[Sequence[int]], taxonomy: str) -> str:
    """The kind a call is priced by under ``taxonomy`` (``"kind"`` or ``"class"``):
    ``kind_of("aten.addmm", COUNTED, (), "kind")`` -> ``"linear"``, under ``"class"`` -> ``"matmul"``.

    A zero-cost aten call is a ``"view"`` under both (the class rates price it at a view's host floor)."""
    if taxonomy == "kind":
        return op_kind(op, status, input_shapes) or OUTSIDE_ATEN
    if not op.startswith("aten."):
        return OUTSIDE_ATEN
    return "view" if status is OpStatus.ZERO_COST else op_class(op, input_shapes)


@dataclass(frozen=True)
class PredictedPart:
    """One part of the predicted time, a kind or a layer: its recorded calls, its seconds and its share of the
    whole; a layer (a row of :attr:`Profile.layers`) names its module's ``type`` too."""

    name: str
    calls: int
    predicted_s: float
    share: float
    type: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "calls": self.calls, "predicted_s": self.predicted_s, "share": self.share}
        return {**out, "type": self.type} if self.type else out


@dataclass(frozen=True)
class PredictedFaults:
    """The page faults the prediction prices inside its calls' times (an estimate): the bytes of fresh pages one
    forward is taken to fault, at ``per_byte_s`` a byte (the calibration's :class:`~graphprof.devices.firsttouch.FirstTouch`),
    times the prediction's speed factor: ``seconds``. ``share_below``: the share of fresh blocks between 1 MiB and
    the allocator's threshold counted (every block above it is), as ``method`` found it: ``"heap replay"`` (glibc's
    heap replayed over the dry run's allocation order) or ``"share law"`` (the calibration's share, where the profile
    carries no allocation order: read back from JSON, or a training step)."""

    bytes: float
    seconds: float
    per_byte_s: float
    share_below: float
    method: str = "share law"

    @property
    def label(self) -> str:
        return (f"page faults priced inside the calls (an estimate): {self.bytes / 1e6:,.1f} MB a forward, "
                f"{self.seconds * 1e3:,.1f} ms at {self.per_byte_s * 1e9:.3f} ns a byte (every fresh block above the "
                f"allocator's threshold, {self.share_below:.1%} of those from 1 MiB to it, by the {self.method})")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "seconds": self.seconds, "per_byte_s": self.per_byte_s, "share_below": self.share_below,
                "method": self.method}  # fmt: skip


def predicted_faults(ops: Iterable[Any], touch: Any, speed: float, method: str = "share law") -> PredictedFaults | None:
    """What ``touch`` (a :class:`~graphprof.devices.firsttouch.FirstTouch` already set for the forward, by
    :func:`graphprof.devices.heapreplay.forward_touch`, or ``None``) prices for the recorded calls ``ops`` (a fused
    call by its parts, as the predictor prices it); ``method``: how its share was found."""
    if touch is None or touch.per_byte_s <= 0:
        return None
    seconds = sum(touch.seconds(part) for op in ops for part in (op.parts or (op,)))
    return PredictedFaults(seconds / touch.per_byte_s, speed * seconds, touch.per_byte_s, touch.share_below, method)


@dataclass(frozen=True)
class MeasuredKind:
    """One kind in a measured forward: the forward's predicted seconds beside the measured ones (per forward)."""

    kind: str
    predicted_s: float
    measured_s: float
    #: measured dispatched calls per forward
    calls: float

    @property
    def ratio(self) -> float | None:
        """Measured over predicted (``None`` where nothing was predicted)."""
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "calls": self.calls, "predicted_s": self.predicted_s, "measured_s": self.measured_s,
                "measured_over_predicted": self.ratio}  # fmt: skip


@dataclass(frozen=True)
class MeasuredByKind:
    """The measured forward's op time by kind beside the forward's prediction (see the module docstring); ``faults``:
    the bytes of fresh pages a plain and a profiled forward faulted in (``graphprof.measure.ForwardFaults``; CPU,
    eval; ``None`` elsewhere), named in :attr:`label`."""

    kinds: tuple[MeasuredKind, ...]
    device: str
    #: profiled forwards the per-op times are the mean of
    runs: int
    #: what the profiler and the layer ranges add to a forward: instrumented over plain forward, minus one
    profiler_overhead: float
    #: the plain forward's coefficient of variation (the run's noise; the per-op spread is not recorded)
    forward_cv: float
    #: measured seconds per forward outside every dispatched call (predicted inside the calls' own times)
    between_s: float
    #: measured seconds of calls the dry run did not record in their layer (their kind from elsewhere)
    unmatched_s: float
    faults: Any

    @property
    def predicted_s(self) -> float:
        return sum(k.predicted_s for k in self.kinds)

    @property
    def measured_s(self) -> float:
        """The measured forward's op time, between the calls included: what the profiled forward's layers sum to."""
        return sum(k.measured_s for k in self.kinds) + self.between_s

    @property
    def label(self) -> str:
        """What the measured figures are, in one line: where, how, with what overhead and noise."""
        return (
            f"measured in context on {self.device}: each dispatched aten call's inclusive time in {self.runs} profiled "
            f"forwards, mean per forward, under torch.profiler with per-layer ranges (profiler overhead "
            f"{self.profiler_overhead:+.1%} on the forward); noise: the plain forward's CV {self.forward_cv:.1%} "
            "(per-op spread not recorded); beside the forward's prediction" + self._faults_text()
        )

    def _faults_text(self) -> str:
        if self.faults is None:
            return ""
        plain, profiled = self.faults.plain_bytes / 1e6, self.faults.profiled_bytes / 1e6
        return (f"; page faults a forward: {plain:,.1f} MB plain, {profiled:,.1f} MB profiled (the plain forward pays its "
                "own, which the profiled op times leave out where they differ)")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": "forward", "label": self.label, "device": self.device, "runs": self.runs,
            "profiler_overhead": self.profiler_overhead, "forward_cv": self.forward_cv, "between_calls_s": self.between_s,
            "unmatched_s": self.unmatched_s, "predicted_time_s": self.predicted_s, "measured_time_s": self.measured_s,
            "faults": None if self.faults is None else self.faults.to_dict(),
            "by_kind": [k.to_dict() for k in self.kinds],
        }  # fmt: skip


@dataclass(frozen=True)
class PredictionBreakdown:
    """The predicted time by kind (all of them, the most first) and by layer (the :data:`TOP_LAYERS` most of
    ``layer_count``), with the measured forward by kind when a measurement of the same kind of device ran.

    ``taxonomy`` is ``"kind"`` or ``"class"``, the grouping the predictor priced by (:data:`TAXONOMIES`);
    ``train``: the prediction covers the backward too (:attr:`passes` names the pass it covers)."""

    taxonomy: str
    train: bool
    kinds: tuple[PredictedPart, ...]
    layers: tuple[PredictedPart, ...]
    total_s: float
    layer_count: int
    measured: MeasuredByKind | None = None
    faults: PredictedFaults | None = None

    @property
    def passes(self) -> str:
        """The pass the prediction covers: ``"forward"`` (eval) or ``"forward + backward"`` (train)."""
        return "forward + backward" if self.train else "forward"

    def to_dict(self) -> dict[str, Any]:
        return {
            "taxonomy": self.taxonomy, "taxonomy_source": TAXONOMIES[self.taxonomy], "pass": self.passes,
            "label": f"predicted (an estimate) of the {self.passes}, by {TAXONOMIES[self.taxonomy]}",
            "predicted_time_s": self.total_s, "by_kind": [k.to_dict() for k in self.kinds],
            "top_layers": [layer.to_dict() for layer in self.layers], "layers": self.layer_count,
            "measured": None if self.measured is None else self.measured.to_dict(),
            "faults": None if self.faults is None else self.faults.to_dict(),
        }  # fmt: skip


def _share(part: float, total: float) -> float:
    return part / total if total > 0 else 0.0


def prediction_breakdown(
    rows: Sequence[Any], seconds: Sequence[float], taxonomy: str, *, train: bool, top: int = TOP_LAYERS
) -> PredictionBreakdown:
    """The predicted time of ``rows`` (a profile's layers) by kind and by layer; ``seconds`` is each recorded
    call's predicted time, in execution order (``row.ops`` of each row in turn)."""
    ops = [(i, op) for i, row in enumerate(rows) for op in row.ops]
    if len(ops) != len(seconds):
        raise ValueError(f"{len(seconds)} predicted times for {len(ops)} recorded calls")
    total = sum(seconds)
    by_kind: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    by_row = [0.0] * len(rows)
    for (i, op), t in zip(ops, seconds, strict=True):
        kind = kind_of(op.op, op.status, op.input_shapes, taxonomy)
        by_kind[kind] += t
        calls[kind] += 1
        by_row[i] += t
    kinds = tuple(PredictedPart(k, calls[k], t, _share(t, total)) for k, t in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0])))
    ranked = sorted(range(len(rows)), key=lambda i: -by_row[i])[: max(0, top)]
    layers = tuple(PredictedPart(rows[i].name, len(rows[i].ops), by_row[i], _share(by_row[i], total), rows[i].type) for i in ranked)
    return PredictionBreakdown(taxonomy, train, kinds, layers, total, len(rows))


def _dry_kinds(forward: Iterable[tuple[str, Any, float]], taxonomy: str) -> tuple[dict[tuple[str, str], Counter[str]], dict[str, float]]:
    """The forward's calls counted per (module path, functional op) and kind, and its predicted seconds per kind."""
    found: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    predicted: dict[str, float] = defaultdict(float)
    for module, op, t in forward:
        kind = kind_of(op.op, op.status, op.input_shapes, taxonomy)
        found[(module, functional_op(op.op))][kind] += 1
        predicted[kind] += t
    return found, predicted


def measured_by_kind(measurement: Any, forward: Sequence[tuple[str, Any, float]], taxonomy: str) -> MeasuredByKind:
    """``measurement``'s dispatched op times (``OpTime``) grouped by the kinds of the dry run's forward calls.

    ``forward`` is each forward call as ``(module path, its record, its predicted seconds)`` (see the module
    docstring for the matching)."""
    found, predicted = _dry_kinds(forward, taxonomy)
    by_name: dict[str, Counter[str]] = defaultdict(Counter)
    for (_, name), counts in found.items():
        by_name[name].update(counts)
    measured: dict[str, float] = defaultdict(float)
    calls: dict[str, float] = defaultdict(float)
    unmatched = 0.0
    for t in measurement.ops:
        if not t.dispatched_calls:
            continue
        name = functional_op("aten." + t.op.removeprefix("aten::"))
        seconds = t.dispatched_time_us * 1e-6
        counts = found.get((t.layer, name)) or by_name.get(name) or Counter()
        if not counts:  # the dry run recorded no such call: the kind its name alone gives
            counts[kind_of(name, OpStatus.COUNTED, (), taxonomy)] = 1
            unmatched += seconds
        n = sum(counts.values())
        for kind, c in counts.items():
            measured[kind] += seconds * c / n
            calls[kind] += t.dispatched_calls * c / n
    ops_s = sum(measured.values())
    names = sorted(set(measured) | set(predicted), key=lambda k: (-max(measured.get(k, 0.0), predicted.get(k, 0.0)), k))
    kinds = tuple(MeasuredKind(k, predicted.get(k, 0.0), measured.get(k, 0.0), calls.get(k, 0.0)) for k in names)
    between = max(0.0, measurement.layer_sum_us * 1e-6 - ops_s)
    return MeasuredByKind(
        kinds, measurement.device, measurement.layer_runs, measurement.overhead, measurement.forward_cv, between, unmatched,
        measurement.faults,
    )  # fmt: skip
