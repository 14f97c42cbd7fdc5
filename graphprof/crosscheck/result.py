"""The records of a cross-check: per-op counts, per-group comparisons, and one :class:`CrossCheck` per model.

All are frozen dataclasses of integers and strings (picklable, so worker processes return them as they
are). Counts are in the reference's unit (:attr:`CrossCheck.unit`); renderers scale and format them.

A difference is split in two, per group of ops (see :mod:`graphprof.crosscheck.conventions`):

* **explained**: :class:`Adjustment` s, each a named op of the reference's own trace and what it falls
  short by there: an op it saw and left uncounted (``left_out``), or one it counts only approximately
  (``estimated``: fvcore's einsum, an estimate; ``broadcast``: fvcore's matmul of a broadcast operand);
* **unexplained**: what remains, where both sides count the same ops and disagree.

A model *agrees* within a tolerance when its unexplained difference is within that share of the
reference's count.

Example::

    >>> g = GroupComparison("matmul", graphprof=1_100, reference=1_000, explained=100)
    >>> g.difference, g.unexplained
    (100, 0)
    >>> c = CrossCheck("m", "fvcore", groups=(g,))
    >>> c.accuracy, c.status(tolerance=1.0).value
    (90.0, 'explained')
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from graphprof.base.record import Record

__all__ = ["OpCount", "Adjustment", "REASONS", "GroupComparison", "Explanation", "Status", "CrossCheck"]


@dataclass(frozen=True)
class OpCount(Record):
    """One op (or one of the reference's keys) with its count, its number of calls where known, and its group."""

    op: str
    count: int
    calls: int | None = None
    group: str = ""


#: Why a reference's count of an op falls short of the op's count under its own convention.
REASONS: dict[str, str] = {
    "left_out": "left out by {reference}",  # it saw the op and has no formula for it
    "estimated": "estimated by {reference}",  # fvcore's einsum: numpy's einsum_path cost estimate, printed to 4 digits
    "broadcast": "undercounted by {reference}",  # fvcore's matmul: prod(first operand) x n, blind to broadcasting
}


@dataclass(frozen=True)
class Adjustment(Record):
    """What a reference's count of one op (``calls`` calls of it) falls short by, in its own convention and
    unit, measured on the shapes it recorded: positive when it counts less than it should."""

    op: str
    amount: int
    reason: str
    group: str
    calls: int | None = None


@dataclass(frozen=True)
class GroupComparison:
    """One group of ops: graphprof under the reference's convention, the reference's own count, and the
    reference's adjustments (ops it left out or counted approximately), which explain the difference."""

    group: str
    graphprof: int
    reference: int
    explained: int = 0
    graphprof_ops: tuple[OpCount, ...] = ()
    reference_ops: tuple[OpCount, ...] = ()
    adjustments: tuple[Adjustment, ...] = ()

    @property
    def difference(self) -> int:
        """graphprof minus the reference: positive when graphprof counts more."""
        return self.graphprof - self.reference

    @property
    def unexplained(self) -> int:
        """The difference less the reference's adjustments."""
        return self.difference - self.explained

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "graphprof": self.graphprof,
            "reference": self.reference,
            "difference": self.difference,
            "explained": self.explained,
            "unexplained": self.unexplained,
            "graphprof_ops": [o.to_dict() for o in self.graphprof_ops],
            "reference_ops": [o.to_dict() for o in self.reference_ops],
            "adjustments": [a.to_dict() for a in self.adjustments],
        }


@dataclass(frozen=True)
class Explanation(Record):
    """One named cause of a difference, signed like it (positive: graphprof counts more).

    ``kind`` is an adjustment's reason (:data:`REASONS`; ``name`` is the reference's op) or
    ``"unexplained"`` (``name`` is a group both sides count, where they disagree by ``amount``).
    """

    kind: str
    name: str
    amount: int
    group: str
    calls: int | None = None


class Status(str, enum.Enum):
    """How a model's counts compare, at a given tolerance."""

    AGREES = "agrees"  # the whole difference is within the tolerance
    EXPLAINED = "explained"  # within the tolerance once the reference's adjustments are accounted for
    DIFFERS = "differs"  # an unexplained difference beyond the tolerance
    FAILED = "failed"  # graphprof or the reference could not count the model (see ``error``)


@dataclass(frozen=True)
class CrossCheck:
    """graphprof against a reference counter on one model and input.

    ``macs`` / ``flops`` are graphprof's own totals; :attr:`graphprof_count` is graphprof under the
    reference's convention and :attr:`reference_count` the reference's own total, both in ``unit``.
    ``error`` is a one-line reason when the model could not be checked; the counts are then zero.
    """

    model: str
    reference: str
    unit: str = ""
    family: str = ""
    input: str = ""
    macs: int = 0
    flops: int = 0
    groups: tuple[GroupComparison, ...] = ()
    reference_unsupported: tuple[OpCount, ...] = ()
    graphprof_unsupported: tuple[OpCount, ...] = ()
    reference_version: str = ""
    capture_method: str = ""
    error: str | None = None
    seconds: float = 0.0

    @property
    def graphprof_count(self) -> int:
        return sum(g.graphprof for g in self.groups)

    @property
    def reference_count(self) -> int:
        return sum(g.reference for g in self.groups)

    @property
    def difference(self) -> int:
        return self.graphprof_count - self.reference_count

    @property
    def explained(self) -> int:
        """The part of the difference named by the reference's adjustments."""
        return sum(g.explained for g in self.groups)

    @property
    def unexplained(self) -> int:
        return self.difference - self.explained

    @property
    def accuracy(self) -> float | None:
        """``100 x (1 - |difference| / reference)``, as fvcore comparisons report it; None without a reference count."""
        return _accuracy(self.difference, self.reference_count)

    @property
    def accuracy_explained(self) -> float | None:
        """The accuracy once the explained differences are accounted for."""
        return _accuracy(self.unexplained, self.reference_count)

    def status(self, tolerance: float = 1.0) -> Status:
        """:class:`Status` at ``tolerance`` percent of the reference's count."""
        if self.error is not None:
            return Status.FAILED
        limit = tolerance / 100 * self.reference_count
        if abs(self.difference) <= limit:
            return Status.AGREES
        if abs(self.unexplained) <= limit:
            return Status.EXPLAINED
        return Status.DIFFERS

    def agrees(self, tolerance: float = 1.0) -> bool:
        """Within ``tolerance`` percent once the explained differences are accounted for."""
        return self.status(tolerance) in (Status.AGREES, Status.EXPLAINED)

    def explanations(self) -> tuple[Explanation, ...]:
        """Every named cause of the difference, largest first: the reference's adjustments, then disagreeing groups."""
        causes = [Explanation(a.reason, a.op, a.amount, g.group, a.calls) for g in self.groups for a in g.adjustments if a.amount]
        causes += [Explanation("unexplained", g.group, g.unexplained, g.group) for g in self.groups if g.unexplained]
        return tuple(sorted(causes, key=lambda e: (e.kind == "unexplained", -abs(e.amount))))

    def to_dict(self, tolerance: float = 1.0) -> dict[str, Any]:
        return {
            "model": self.model,
            "family": self.family,
            "input": self.input,
            "reference": self.reference,
            "reference_version": self.reference_version,
            "unit": self.unit,
            "status": self.status(tolerance).value,
            "tolerance_percent": tolerance,
            "macs": self.macs,
            "flops": self.flops,
            "graphprof": self.graphprof_count,
            "reference_count": self.reference_count,
            "difference": self.difference,
            "accuracy_percent": self.accuracy,
            "explained": self.explained,
            "unexplained": self.unexplained,
            "accuracy_explained_percent": self.accuracy_explained,
            "explanations": [e.to_dict() for e in self.explanations()],
            "groups": [g.to_dict() for g in self.groups],
            "reference_unsupported": [o.to_dict() for o in self.reference_unsupported],
            "graphprof_unsupported": [o.to_dict() for o in self.graphprof_unsupported],
            "capture_method": self.capture_method,
            "error": self.error,
            "seconds": round(self.seconds, 3),
        }


def _accuracy(difference: int, reference: int) -> float | None:
    if reference == 0:
        return 100.0 if difference == 0 else None
    return 100.0 * (1 - abs(difference) / reference)
