"""A decode step's cost as the context grows: affine in the context, checked, and summed exactly.

One decode step over a cache of ``c`` tokens costs, row by row of the profile (and op by op)::

    cost(c) = cost(c0) + (c - c0) * slope          slope = cost(c0 + 1) - cost(c0)

because the only work that depends on ``c`` reads or writes the cached tokens (attention over ``c + 1``
keys, the cache update, the mask), each linear in ``c``. :func:`fit_affine` takes profiles at
``c0``, ``c0 + 1`` and a third context and *checks* the third against the line exactly, every row and
every op; a model whose step is not affine is refused (:class:`NotAffineError`) and the caller profiles
each step instead. The total over ``n`` steps at ``c0, c0 + 1, ..., c0 + n - 1`` is then exact::

    sum = n * cost(c0) + slope * n * (n - 1) / 2

Times are not affine (each row's roofline time is a ``max``); :meth:`AffineDecode.at` gives the
profile at any context, so times are summed step by step, exactly, over the rows that change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from graphprof.cost.result import LayerRow, Profile
from graphprof.errors import ShapePropagationError
from graphprof.formulas import Cost

__all__ = ["AffineDecode", "NotAffineError", "fit_affine", "scale", "minus"]


class NotAffineError(ShapePropagationError):
    """A decode step whose cost is not affine in the context (or whose graph changes with it)."""


def minus(a: Cost, b: Cost) -> Cost:
    return Cost(a.macs - b.macs, a.flops - b.flops, a.bytes_read - b.bytes_read, a.bytes_written - b.bytes_written)


def scale(cost: Cost, factor: int) -> Cost:
    return Cost(cost.macs * factor, cost.flops * factor, cost.bytes_read * factor, cost.bytes_written * factor)


def _plus(a: Cost, b: Cost) -> Cost:
    return a + b


@dataclass(frozen=True)
class AffineDecode:
    """A decode step's profile at ``base_context``, with each row's and op's cost per extra cached token."""

    base: Profile
    base_context: int
    row_slopes: tuple[Cost, ...]
    op_slopes: tuple[tuple[Cost, ...], ...]

    @property
    def varying(self) -> tuple[int, ...]:
        """Indices of the rows whose cost grows with the context."""
        return tuple(i for i, s in enumerate(self.row_slopes) if s != Cost())

    def row_cost(self, index: int, context: int) -> Cost:
        return _plus(self.base.layers[index].cost, scale(self.row_slopes[index], context - self.base_context))

    def row_at(self, index: int, context: int) -> LayerRow:
        """Row ``index`` (forward only, as a decode step is) at ``context`` cached tokens."""
        row, extra = self.base.layers[index], context - self.base_context
        zero = Cost()
        ops = tuple(
            op if slope == zero else dataclasses.replace(op, cost=_plus(op.cost, scale(slope, extra)))
            for op, slope in zip(row.ops, self.op_slopes[index], strict=True)
        )
        return dataclasses.replace(row, forward=self.row_cost(index, context), backward=Cost(), ops=ops)

    def at(self, context: int, rows: tuple[int, ...] | None = None) -> Profile:
        """The step's profile at ``context`` (only ``rows``, when given: a partial profile for timing)."""
        chosen = range(len(self.base.layers)) if rows is None else rows
        return dataclasses.replace(self.base, layers=tuple(self.row_at(i, context) for i in chosen), measurement=None)

    def total(self, steps: int) -> Cost:
        """Exact cost of ``steps`` steps at contexts ``base_context .. base_context + steps - 1``."""
        slope = sum(self.row_slopes, Cost())
        return _plus(scale(self.base.total, steps), scale(slope, steps * (steps - 1) // 2))

    def row_total(self, index: int, steps: int) -> Cost:
        return _plus(scale(self.base.layers[index].cost, steps), scale(self.row_slopes[index], steps * (steps - 1) // 2))


def _check_same_graph(a: Profile, b: Profile) -> None:
    if len(a.layers) != len(b.layers):
        raise NotAffineError(f"the decode graph has {len(a.layers)} rows at one context and {len(b.layers)} at another")
    for ra, rb in zip(a.layers, b.layers, strict=True):
        if ra.name != rb.name or [o.op for o in ra.ops] != [o.op for o in rb.ops]:
            raise NotAffineError(f"the decode graph changes with the context at {ra.name}")


def _slopes(a: Profile, b: Profile) -> tuple[tuple[Cost, ...], tuple[tuple[Cost, ...], ...]]:
    rows = tuple(minus(rb.cost, ra.cost) for ra, rb in zip(a.layers, b.layers, strict=True))
    ops = tuple(
        tuple(minus(ob.cost, oa.cost) for oa, ob in zip(ra.ops, rb.ops, strict=True)) for ra, rb in zip(a.layers, b.layers, strict=True)
    )
    return rows, ops


def fit_affine(first: Profile, context: int, next_: Profile, far: Profile, far_context: int) -> AffineDecode:
    """The affine decode step through ``first`` (at ``context``) and ``next_`` (at ``context + 1``), checked
    exactly against ``far`` (at ``far_context``) row by row and op by op."""
    for other in (next_, far):
        _check_same_graph(first, other)
    row_slopes, op_slopes = _slopes(first, next_)
    fitted = AffineDecode(first, context, row_slopes, op_slopes)
    extra = far_context - context
    for index, row in enumerate(far.layers):
        if row.cost != fitted.row_cost(index, far_context):
            raise NotAffineError(f"{row.name}: its cost at context {far_context} is off the line through {context} and {context + 1}")
        base_ops = first.layers[index].ops
        for op, base_op, slope in zip(row.ops, base_ops, op_slopes[index], strict=True):
            if op.cost != _plus(base_op.cost, scale(slope, extra)):
                raise NotAffineError(f"{row.name}: {op.op} is not affine in the context")
    return fitted
