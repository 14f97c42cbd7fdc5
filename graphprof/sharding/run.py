"""A sharded training step on a dry run: tensor parallelism and FSDP2 over a fake process group, on FakeTensors.

The model is built as graphprof builds it (on the meta device, no weights), copied, its parameters made
FakeTensors (``to_empty`` inside ``FakeTensorMode``), and sharded by the wraps of
:mod:`graphprof.sharding.wraps` (DTensor's ``parallelize_module`` by the model's plan, then
``fully_shard`` on each repeated block and the root) over meshes of torch's fake process group
(``torch.testing._internal.distributed.fake_pg``: collectives that move nothing). One forward and
backward then run as rank 0 runs them: every aten call is costed by the formula registry, the
collectives included (:mod:`graphprof.formulas.collectives`), and what the forward saves for backward is
summed. Nothing real is allocated, so Llama-3-70B on 512 ranks fits on a laptop.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from graphprof.base.choices import Phase
from graphprof.base.tied import retie, tied_groups
from graphprof.cost.count import op_record
from graphprof.cost.result import OpRecord
from graphprof.errors import InvalidInputError
from graphprof.formulas.registry import to_meta
from graphprof.run.propagate import OpCall
from graphprof.sharding.tp_plan import TensorPlan
from graphprof.sharding.wraps import Fsdp, TensorParallel, local_bytes

__all__ = ["run_sharded_step", "StepRecord"]


class _Tap(TorchDispatchMode):
    """Every aten call of the step as a cost record, in order, with its phase: as each rank runs it, so a
    call on DTensors (tensor parallelism) is passed to DTensor (``NotImplemented``), whose calls on the
    local shards, and collectives, come back here."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.records: list[OpRecord] = []
        self.phase = Phase.FORWARD

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented
        out = func(*args, **kwargs)
        memo: dict[int, Any] = {}
        self.records.append(
            op_record(OpCall(func, to_meta(args, memo), to_meta(kwargs, memo), to_meta(out, {}), self.phase))
        )
        return out


class _Saved:
    """Bytes the forward saves for backward (each storage once; parameters, gathered or not, left out)."""

    def __init__(self) -> None:
        self.seen: set[StorageWeakRef] = set()
        self.bytes = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        local = getattr(t, "_local_tensor", t)  # a DTensor: the rank's shard
        if not isinstance(base, nn.Parameter) and local.layout == torch.strided:
            ref = StorageWeakRef(local.untyped_storage())
            if ref not in self.seen:
                self.seen.add(ref)
                self.bytes += local.untyped_storage().nbytes()
        return t


def _warm(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """One step untapped: DTensor works out each op's output on a fake copy of global shape the first
    time it meets the op (and caches it); those calls are not the rank's, so the tapped step comes second."""
    _loss(model(*_fake_inputs(args), **_fake_inputs(kwargs))).backward()
    model.zero_grad(set_to_none=True)


def _warm_split(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], tp: TensorParallel) -> None:
    """:func:`_warm`, where a forward that cannot run on the split layers (a view that reads the number of
    heads from the global width, as HF's attention does: ``tp:4`` over 2 key/value heads) is the user's
    choice of degree, said in one line, not an internal error."""
    try:
        _warm(model, args, kwargs)
    except RuntimeError as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise InvalidInputError(
            f"the model does not run with its linear layers split over {tp.mesh.size()} ranks ({first}): the degree must "
            "divide every split it makes, its attention heads included; try a smaller tp degree"
        ) from exc


@dataclass(frozen=True)
class StepRecord:
    """What :func:`run_sharded_step` saw: the op records, the bytes saved for backward, the rank's
    parameter bytes, each FSDP unit's bytes (empty without FSDP) and the tensor-parallel plan (empty without)."""

    records: list[OpRecord]
    saved_bytes: int
    shard_bytes: int
    unit_bytes: list[int]
    plan: TensorPlan


def _fake_inputs(value: Any) -> Any:
    return tree_map(lambda t: torch.zeros(t.shape, dtype=t.dtype) if isinstance(t, torch.Tensor) else t, value)


def _loss(out: Any) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    first = (
        logits
        if isinstance(logits, torch.Tensor)
        else next(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
    )
    return first.float().sum()


def run_sharded_step(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    wraps: tuple[TensorParallel | None, Fsdp | None],
    dtype: torch.dtype | None,
) -> StepRecord:
    """One training step of a copy of ``model`` sharded by ``wraps`` (:func:`~graphprof.sharding.wraps.sharding_wraps`), on FakeTensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from graphprof.formulas.collectives import register_collectives

    register_collectives()
    tied = tied_groups(model)  # the user's ties, put back after the conversions of the copy below
    step_model = copy.deepcopy(model)  # the user's model (or the meta build) is never wrapped itself
    if dtype is not None:
        step_model = step_model.to(dtype)  # on the copy, before its parameters become FakeTensors
    with FakeTensorMode(allow_non_fake_inputs=True):
        step_model = step_model.to_empty(device="cpu")
        retie(step_model, tied)  # to_empty unties them: FSDP would shard a second embedding
        step_model.train()
        for wrap in wraps:
            step_model = step_model if wrap is None else wrap(step_model)
        shard_bytes = sum(local_bytes(p) for p in step_model.parameters())
        if wraps[0] is not None:
            _warm_split(step_model, args, kwargs, wraps[0])
        tap, saved = _Tap(), _Saved()
        call_args, call_kwargs = _fake_inputs(args), _fake_inputs(kwargs)
        with tap, torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
            loss = _loss(step_model(*call_args, **call_kwargs))
        tap.phase = Phase.BACKWARD
        with tap:
            loss.backward()
    tp, fsdp = wraps
    return StepRecord(
        tap.records,
        saved.bytes,
        shard_bytes,
        [] if fsdp is None else fsdp.unit_bytes,
        TensorPlan(()) if tp is None else tp.plan,
    )
