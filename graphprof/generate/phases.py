"""From profiles to phases: each block's cost, KV traffic, bound and times, and the phase's total.

A single forward (the prefill, one decode step) is classified by :func:`graphprof.cost.roofline.classify`
and its rows grouped into blocks (:mod:`graphprof.generate.blocks`). The sum over decode steps takes
each row's cost from the affine fit (:mod:`graphprof.generate.growth`) and its time summed step by step
over the rows that change with the context (a row that does not change costs ``steps`` times its time).
A block's bound is that of its summed FLOPs and bytes against the same threshold as its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graphprof.cost.bounds import LayerBound, classify_layer
from graphprof.cost.result import Profile
from graphprof.cost.roofline import classify
from graphprof.devices.hardware import Hardware
from graphprof.formulas import Cost
from graphprof.generate.blocks import group_rows
from graphprof.generate.growth import AffineDecode
from graphprof.generate.kvcache import KVCacheSpec
from graphprof.generate.result import BlockCost, Phase

__all__ = ["KVTraffic", "exact_phase", "single_phase", "summed_phase"]


@dataclass(frozen=True)
class KVTraffic:
    """Cache bytes one decoder layer reads and writes: ``read_tokens`` cached tokens read, ``written_tokens`` added."""

    spec: KVCacheSpec
    layers_path: str
    batch: int
    dtype: object

    def of(self, block: str, read_tokens: int, written_tokens: int) -> tuple[int, int]:
        if not (self.layers_path and block.startswith(self.layers_path + ".")):
            return 0, 0
        dtype = self.dtype
        return (
            self.spec.layer_bytes(read_tokens, self.batch, dtype),  # type: ignore[arg-type]
            self.spec.layer_bytes(written_tokens, self.batch, dtype),  # type: ignore[arg-type]
        )


def _seconds(bounds: Sequence[LayerBound], rows: Sequence[int], pick: Callable[[LayerBound], float | None]) -> float | None:
    values = [pick(bounds[i]) for i in rows]
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


def _block(name: str, cost: Cost, kv: tuple[int, int], threshold: float, lower: float | None, predicted: float | None) -> BlockCost:
    bound = classify_layer(cost.flops, cost.bytes_moved, threshold)
    return BlockCost(name, cost, kv[0], kv[1], bound, lower, predicted)


def _total(blocks: Sequence[BlockCost], threshold: float) -> BlockCost:
    cost = sum((b.cost for b in blocks), Cost())
    lower = None if any(b.lower_bound_s is None for b in blocks) else sum(b.lower_bound_s or 0.0 for b in blocks)
    predicted = None if any(b.predicted_s is None for b in blocks) else sum(b.predicted_s or 0.0 for b in blocks)
    kv = (sum(b.kv_bytes_read for b in blocks), sum(b.kv_bytes_written for b in blocks))
    return _block("total", cost, kv, threshold, lower, predicted)


def single_phase(name: str, profile: Profile, hardware: Hardware | None, kv: KVTraffic, *, context: int, new: int) -> Phase:
    """One forward as a phase: ``context`` tokens cached before it, ``new`` tokens per sequence added."""
    roofline = classify(profile, hardware)
    blocks = tuple(
        _block(
            b.name,
            b.cost,
            kv.of(b.name, context, new),
            roofline.threshold,
            _seconds(roofline.layers, b.rows, lambda x: x.seconds),
            _seconds(roofline.layers, b.rows, lambda x: x.predicted_seconds),
        )  # fmt: skip
        for b in group_rows(profile, kv.layers_path)
    )
    return Phase(name, context, new, 1, blocks, _total(blocks, roofline.threshold))


def _row_times(fit: AffineDecode, hardware: Hardware | None, steps: int) -> tuple[list[float | None], list[float | None], float]:
    """Each row's lower-bound and predicted time summed over ``steps`` steps, and the threshold.

    The lower bound is a sum over ops, so only the rows whose cost grows with the context are classified
    again at each step. The predicted time is not: host and kernel time overlap along the whole step
    (:mod:`graphprof.devices.predict`), so a row's share depends on its neighbours, and each step is predicted whole.
    """
    base = classify(fit.base, hardware)
    lower = [None if b.seconds is None else b.seconds * steps for b in base.layers]
    predicted = [None if b.predicted_seconds is None else b.predicted_seconds * steps for b in base.layers]
    varying = fit.varying
    if hardware is None or not varying:
        return lower, predicted, base.threshold
    for i in varying:
        lower[i] = 0.0 if lower[i] is not None else None
    predicted = [None if p is None else 0.0 for p in predicted]
    for step in range(steps):
        whole = classify(fit.at(fit.base_context + step), hardware)
        for i, bound in enumerate(whole.layers):
            if i in varying and lower[i] is not None and bound.seconds is not None:
                lower[i] = (lower[i] or 0.0) + bound.seconds
            if predicted[i] is not None and bound.predicted_seconds is not None:
                predicted[i] = (predicted[i] or 0.0) + bound.predicted_seconds
    return lower, predicted, base.threshold


def _sum_rows(values: list[float | None], rows: tuple[int, ...]) -> float | None:
    picked = [values[i] for i in rows]
    return None if any(v is None for v in picked) else sum(v or 0.0 for v in picked)


def summed_phase(name: str, fit: AffineDecode, hardware: Hardware | None, kv: KVTraffic, *, steps: int) -> Phase:
    """``steps`` decode steps at contexts ``fit.base_context`` onwards, summed exactly."""
    lower, predicted, threshold = _row_times(fit, hardware, steps)
    read_tokens = steps * fit.base_context + steps * (steps - 1) // 2  # sum of the contexts
    blocks = []
    for b in group_rows(fit.base, kv.layers_path):
        cost = sum((fit.row_total(i, steps) for i in b.rows), Cost())
        blocks.append(
            _block(b.name, cost, kv.of(b.name, read_tokens, steps), threshold, _sum_rows(lower, b.rows), _sum_rows(predicted, b.rows))
        )
    return Phase(name, fit.base_context, 1, steps, tuple(blocks), _total(blocks, threshold))


def exact_phase(name: str, profiles: Sequence[tuple[int, Profile]], hardware: Hardware | None, kv: KVTraffic) -> Phase:
    """Every decode step profiled (a step that is not affine in the context, or only a few steps), summed."""
    phases = [single_phase(name, p, hardware, kv, context=c, new=1) for c, p in profiles]
    threshold = classify(profiles[0][1], hardware).threshold
    blocks: list[BlockCost] = []
    for index, first in enumerate(phases[0].blocks):
        same = [ph.blocks[index] for ph in phases]
        lower = None if any(b.lower_bound_s is None for b in same) else sum(b.lower_bound_s or 0.0 for b in same)
        predicted = None if any(b.predicted_s is None for b in same) else sum(b.predicted_s or 0.0 for b in same)
        cost = sum((b.cost for b in same), Cost())
        kv_rw = (sum(b.kv_bytes_read for b in same), sum(b.kv_bytes_written for b in same))
        blocks.append(_block(first.name, cost, kv_rw, threshold, lower, predicted))
    return Phase(name, profiles[0][0], 1, len(profiles), tuple(blocks), _total(blocks, threshold))
