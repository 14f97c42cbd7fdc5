"""Count cost: apply the formula registry to every recorded aten call.

Every call ends in one of three states (see :mod:`graphprof.formulas`): counted by its formula, known
to cost nothing, or unsupported. Unsupported calls contribute zero *and* are listed by name, call
count and layer in the result, so nothing is silently zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable
from typing import Any, cast

from graphprof.base.choices import OpStatus, Phase
from graphprof.cost.parts import fused_parts
from graphprof.cost.result import LayerRow, OpRecord, UnsupportedOp
from graphprof.formulas import ZERO, Cost, TensorMeta, op_cost, op_status
from graphprof.formulas.fractions import MASKABLE, kernel_useful_fraction, kernel_work_fraction
from graphprof.formulas.registry import op_name
from graphprof.run.propagate import OpCall, Trace, TraceKey, shapes_of

__all__ = ["count_costs", "op_record"]


def op_record(call: OpCall) -> OpRecord:
    """The cost record of one call: counted by its formula, zero-cost, or unsupported (cost zero, named)."""
    status = op_status(call.func)
    cost: Cost | None = ZERO
    if status is OpStatus.COUNTED:
        cost = op_cost(call.func, call.args, call.kwargs, call.out)
        if cost is None:  # a formula may decline an overload it does not understand
            status = OpStatus.UNSUPPORTED
            cost = ZERO
    name = op_name(call.func)
    masked = status is OpStatus.COUNTED and name.rpartition(".")[2] in MASKABLE
    return OpRecord(
        op=name,
        status=status,
        phase=call.phase,
        cost=cast(Cost, cost),  # None became ZERO above
        input_shapes=shapes_of((call.args, call.kwargs)),
        output_shapes=shapes_of(call.out),
        work_fraction=kernel_work_fraction(call.func, call.args, call.kwargs) if masked else 1.0,
        useful_fraction=kernel_useful_fraction(call.func, call.args, call.kwargs) if masked else 1.0,
        parts=fused_parts(call, op_record) if status is OpStatus.COUNTED else (),
    )


def _call_key(call: OpCall) -> Hashable | None:
    """What an op's record depends on: the op, its arguments' shapes and values, and which of them are one
    tensor (``add(x, x)`` reads ``x`` once, ``add(x, y)`` reads two); ``None`` for an argument that
    cannot be a key (the call is then costed on its own)."""
    ids: dict[int, int] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, TensorMeta):
            return value, ids.setdefault(id(value), len(ids))
        if isinstance(value, (list, tuple)):
            return type(value).__name__, tuple(walk(v) for v in value)
        if isinstance(value, dict):
            return tuple((k, walk(v)) for k, v in value.items())
        return value

    key = (call.func, walk(call.args), walk(call.kwargs), walk(call.out), call.phase)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _record(call: OpCall, memo: dict[Hashable, OpRecord]) -> OpRecord:
    """:func:`op_record`, once per distinct call (records are frozen, so equal calls share one)."""
    key = _call_key(call)
    if key is None:
        return op_record(call)
    record = memo.get(key)
    if record is None:
        record = memo[key] = op_record(call)
    return record


def count_costs(trace: Trace) -> tuple[list[LayerRow], list[UnsupportedOp]]:
    """One :class:`LayerRow` per trace key (in execution order) and the unsupported ops.

    Each parameter is credited to the first row that uses it, so the rows' ``params`` add up to the
    number of distinct parameters the graph reached.
    """
    rows: list[LayerRow] = []
    seen_params: set[int] = set()
    unsupported: Counter[str] = Counter()
    where: dict[str, list[str]] = defaultdict(list)
    keys: list[TraceKey] = list(trace.keys)
    if trace.unattributed.calls:
        keys.append(trace.unattributed)
    memo: dict[Hashable, OpRecord] = {}  # one record per distinct call: the layers of a stack repeat
    for key in keys:
        records = tuple(_record(call, memo) for call in key.calls)
        params = 0
        for p in key.params:
            if id(p) not in seen_params:
                seen_params.add(id(p))
                params += p.numel()
        forward = sum((r.cost for r in records if r.phase is Phase.FORWARD), Cost())
        backward = sum((r.cost for r in records if r.phase is Phase.BACKWARD), Cost())
        for r in records:
            if r.status is OpStatus.UNSUPPORTED:
                unsupported[r.op] += 1
                if key.name not in where[r.op]:
                    where[r.op].append(key.name)
        if not records and not params and not key.output_shapes:
            continue
        rows.append(
            LayerRow(
                name=key.name,
                node=key.node,
                module=key.module,
                type=key.type,
                params=params,
                output_shapes=key.output_shapes,
                forward=forward,
                backward=backward,
                ops=records,
                saved_bytes=key.saved_bytes,
            )
        )
    unsupported_ops = [UnsupportedOp(op=op, count=n, layers=tuple(where[op])) for op, n in unsupported.most_common()]
    return rows, unsupported_ops
