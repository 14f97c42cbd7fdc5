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

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

from graphprof.cost.count import op_record
from graphprof.cost.result import OpRecord
from graphprof.errors import InvalidInputError, first_line
from graphprof.run.events import Layer, Observer, OpEvent
from graphprof.run.propagate import op_call
from graphprof.run.step import StepSpec, run_step
from graphprof.sharding.tp_plan import TensorPlan
from graphprof.sharding.wraps import Fsdp, TensorParallel, local_bytes

__all__ = ["run_sharded_step", "StepRecord"]


class _RankOps(Observer):
    """Every aten call of the step as a cost record, in order, with its phase, as each rank runs it (the run
    loop hands a call on DTensors back to DTensor, whose calls on the local shards, and collectives, come
    back as events); and the bytes the forward saves for backward (each storage once; parameters, gathered
    or not, left out)."""

    wants_ops = True
    wants_saved = True

    def __init__(self) -> None:
        self.records: list[OpRecord] = []
        self.modules: list[str | None] = []  # the module each call ran in (in backward: whose autograd node ran it)
        self.seen: set[StorageWeakRef] = set()
        self.saved_bytes = 0

    def op(self, event: OpEvent) -> None:
        self.records.append(op_record(op_call(event)))
        self.modules.append(None if event.layer is None else event.layer.module)

    def saved(self, layer: Layer | None, tensor: torch.Tensor) -> None:
        base = tensor._base if tensor._base is not None else tensor
        local = getattr(tensor, "_local_tensor", tensor)  # a DTensor: the rank's shard
        if not isinstance(base, nn.Parameter) and local.layout == torch.strided:
            ref = StorageWeakRef(local.untyped_storage())
            if ref not in self.seen:
                self.seen.add(ref)
                self.saved_bytes += local.untyped_storage().nbytes()


def _warm(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """One step untapped: DTensor works out each op's output on a fake copy of global shape the first
    time it meets the op (and caches it); those calls are not the rank's, so the tapped step comes second."""
    _loss(model(*args, **kwargs)).backward()
    model.zero_grad(set_to_none=True)


def _warm_split(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], tp: TensorParallel) -> None:
    """:func:`_warm`, where a forward that cannot run on the split layers (a view that reads the number of
    heads from the global width, as HF's attention does: ``tp:4`` over 2 key/value heads) is the user's
    choice of degree, said in one line, not an internal error."""
    try:
        _warm(model, args, kwargs)
    except RuntimeError as exc:
        first = first_line(exc)
        raise InvalidInputError(
            f"the model does not run with its linear layers split over {tp.mesh.size()} ranks ({first}): the degree must "
            "divide every split it makes, its attention heads included; try a smaller tp degree"
        ) from exc


@dataclass(frozen=True)
class StepRecord:
    """What :func:`run_sharded_step` saw: the op records, the bytes saved for backward, the rank's
    parameter bytes, each FSDP unit's bytes (empty without FSDP) and the tensor-parallel plan (empty without);
    ``modules``: beside each record, the dotted path of the module it ran in (``None`` at top level)."""

    records: list[OpRecord]
    saved_bytes: int
    shard_bytes: int
    unit_bytes: list[int]
    plan: TensorPlan
    modules: list[str | None] = field(default_factory=list)


def _loss(out: Any) -> torch.Tensor:
    """A language model's logits ``[batch, seq, vocab]`` (not split by tensor parallelism): the cross-entropy
    against next-token labels in float32, as torchtitan's loss runs it (``cross_entropy(pred.flatten(0, 1).float(),
    labels)``: a float32 copy of the logits, log-softmax and its backward over the vocabulary); any other
    output: the sum of its first tensor in float32."""
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor) and logits.dim() == 3 and not isinstance(logits, DTensor):
        flat = logits.flatten(0, 1).float()
        labels = torch.zeros(flat.shape[0], dtype=torch.long, device=flat.device)
        return torch.nn.functional.cross_entropy(flat, labels)
    first = logits if isinstance(logits, torch.Tensor) else next(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
    return first.float().sum()


def run_sharded_step(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    wraps: tuple[TensorParallel | None, Fsdp | None],
    dtype: torch.dtype | None,
) -> StepRecord:
    """One forward and backward of a copy of ``model`` sharded by ``wraps``
    (:func:`~graphprof.sharding.wraps.sharding_wraps`), on FakeTensors, through the run loop's step seam
    (:func:`graphprof.run.step.run_step`): no optimizer, the inputs as they are (not cast)."""
    from graphprof.formulas.collectives import register_collectives

    register_collectives()
    tp, fsdp = wraps
    rank = _RankOps()
    spec = StepSpec(
        loss=_loss,
        wraps=tuple(w for w in wraps if w is not None),
        dtype=dtype,
        cast_inputs=False,
        warm=None if tp is None else (lambda m, a, k: _warm_split(m, a, k, tp)),
        defer=(DTensor,),
    )
    step_model = run_step(model, args, kwargs, [rank], spec)
    return StepRecord(
        rank.records,
        rank.saved_bytes,
        sum(local_bytes(p) for p in step_model.parameters()),
        [] if fsdp is None else fsdp.unit_bytes,
        TensorPlan(()) if tp is None else tp.plan,
        rank.modules,
    )
