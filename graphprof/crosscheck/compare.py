"""Compare a :class:`~graphprof.cost.result.Profile` with a reference's counts, group by group.

A pure function of its inputs: graphprof's forward op records are mapped onto the reference's convention
(:class:`~graphprof.crosscheck.conventions.Convention`), the reference's keys onto the same groups, and
each group keeps the ops of both sides, named, with their counts.
"""

from __future__ import annotations

from collections import defaultdict

from graphprof.base.choices import OpStatus, Phase
from graphprof.base.inputs import format_inputs
from graphprof.cost.result import Profile
from graphprof.crosscheck.conventions import GROUP_ORDER, Convention
from graphprof.crosscheck.references import ReferenceCounts
from graphprof.crosscheck.result import Adjustment, CrossCheck, GroupComparison, OpCount

__all__ = ["compare_counts", "graphprof_groups"]


def graphprof_groups(profile: Profile, convention: Convention) -> dict[str, dict[str, list[int]]]:
    """group -> graphprof op -> [calls, count] under ``convention``, over the forward records."""
    groups: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for row, record in profile.iter_ops():
        if record.phase is not Phase.FORWARD or record.status is not OpStatus.COUNTED:
            continue
        for group, value in convention.graphprof_counts(row, record).items():
            entry = groups[group].setdefault(record.op, [0, 0])
            entry[0] += 1
            entry[1] += value
    return groups


def _order(group: str) -> tuple[int, str]:
    return (GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER), group)


def compare_counts(
    profile: Profile, counts: ReferenceCounts, convention: Convention, *, family: str = "", seconds: float = 0.0
) -> CrossCheck:
    """One :class:`CrossCheck` from graphprof's ``profile`` and the reference's ``counts`` of the same model and input."""
    ours = graphprof_groups(profile, convention)
    theirs: dict[str, list[OpCount]] = defaultdict(list)
    for op in counts.counted:
        theirs[convention.reference_group(op.op)].append(op)
    adjustments: dict[str, list[Adjustment]] = defaultdict(list)
    for adjustment in counts.adjustments:
        adjustments[adjustment.group].append(adjustment)

    groups = []
    for group in sorted(set(ours) | set(theirs) | set(adjustments), key=_order):
        graphprof_ops = tuple(
            OpCount(op, value, calls, group) for op, (calls, value) in sorted(ours.get(group, {}).items(), key=lambda kv: -kv[1][1])
        )
        reference_ops = tuple(sorted((OpCount(o.op, o.count, o.calls, group) for o in theirs.get(group, [])), key=lambda o: -o.count))
        explained = tuple(sorted(adjustments.get(group, []), key=lambda a: -abs(a.amount)))
        comparison = GroupComparison(
            group=group,
            graphprof=sum(o.count for o in graphprof_ops),
            reference=sum(o.count for o in reference_ops),
            explained=sum(a.amount for a in explained),
            graphprof_ops=graphprof_ops,
            reference_ops=reference_ops,
            adjustments=explained,
        )
        if comparison.graphprof or comparison.reference or comparison.explained:
            groups.append(comparison)

    return CrossCheck(
        model=profile.model_name,
        reference=counts.reference,
        unit=convention.unit,
        family=family or profile.family,
        input=format_inputs(profile.inputs),
        macs=profile.total_macs,
        flops=profile.total_flops,
        groups=tuple(groups),
        reference_unsupported=counts.unsupported,
        graphprof_unsupported=tuple(OpCount(u.op, 0, u.count) for u in profile.unsupported),
        reference_version=counts.version,
        capture_method=profile.capture_method,
        seconds=seconds,
    )
