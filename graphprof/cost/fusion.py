"""Inductor's fusion of a run's calls, as ``torch.compile`` lowers them: element-wise chains into one kernel.

:func:`fold_chains` turns each maximal run of consecutive element-wise, norm and reduction calls (their op
class, :func:`graphprof.devices.predict.op_class`) into one fused call; matrix products, attention and
collectives stay library calls and break a chain, as they do under Inductor. The fused call reads what its
first call reads plus what each later call reads beyond its predecessor's output (kept in registers), and
writes what its last call writes. Both users price compiled code with it: the training step
(:mod:`graphprof.sharding.steptime`, ``--compile``) and the compiled decode (:mod:`graphprof.generate.regimes`).

Worked example: ``mul`` (reads 8 B, writes 4 B) then ``add`` of that output and another 4 B tensor (reads 8 B,
writes 4 B) fuse into one call reading ``8 + (8 - 4) = 12`` B and writing 4 B.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from graphprof.base.choices import OpStatus
from graphprof.cost.result import OpRecord
from graphprof.devices.predict import op_class
from graphprof.formulas import Cost

__all__ = ["FOLDABLE", "fold_chains", "fold_alongside"]

#: The op classes Inductor fuses into one kernel when they follow one another.
FOLDABLE = frozenset({"elementwise", "norm", "reduction"})

T = TypeVar("T")


def _foldable(r: OpRecord) -> bool:
    return r.status is OpStatus.COUNTED and r.op.startswith("aten.") and op_class(r.op, r.input_shapes) in FOLDABLE


def _chains(records: Sequence[OpRecord]) -> Iterable[tuple[int, int]]:
    """``(start, stop)`` of each maximal run of foldable calls (views inside a run are skipped, not breaks)."""
    start = None
    for i, r in enumerate(records):
        if _foldable(r):
            start = i if start is None else start
        elif r.status is OpStatus.ZERO_COST and start is not None and r.phase is records[start].phase:
            continue
        elif start is not None:
            yield start, i
            start = None
    if start is not None:
        yield start, len(records)


def _fused(run: Sequence[OpRecord]) -> OpRecord:
    """One kernel for a chain: reads what the first reads plus each later call's reads beyond its
    predecessor's output (kept in registers), writes what the last writes; FLOPs executed summed."""
    read = run[0].cost.bytes_read + sum(max(0, b.cost.bytes_read - a.cost.bytes_written) for a, b in zip(run, run[1:], strict=False))
    flops = sum(round(r.cost.flops * r.work_fraction) for r in run)
    head = next((r for r in run if op_class(r.op, r.input_shapes) != "elementwise"), run[0])
    cost = Cost(flops=flops, bytes_read=read, bytes_written=run[-1].cost.bytes_written)
    return replace(head, cost=cost, work_fraction=1.0, output_shapes=run[-1].output_shapes)


def fold_chains(records: Sequence[OpRecord]) -> list[OpRecord]:
    """``records`` with each chain of element-wise, norm and reduction calls (:func:`_chains`) one fused call,
    in the place of the chain's first; the views inside a chain are dropped."""
    out: list[OpRecord] = []
    last = 0
    for start, stop in _chains(records):
        out.extend(records[last:start])
        run = [r for r in records[start:stop] if r.status is OpStatus.COUNTED]
        out.append(_fused(run))
        last = stop
    out.extend(records[last:])
    return out


def fold_alongside(records: Sequence[OpRecord], values: Sequence[T]) -> list[T]:
    """The value beside each record of :func:`fold_chains`' output (a module path, say): a chain takes its
    first call's."""
    out: list[T] = []
    last = 0
    for start, stop in _chains(records):
        out.extend(values[last:start])
        out.append(values[start])
        last = stop
    out.extend(values[last:])
    return out
