"""A sharded training step on a dry run: FSDP2's ``fully_shard`` over a fake process group, on FakeTensors.

The model is built as graphprof builds it (on the meta device, no weights), copied, its parameters made
FakeTensors (``to_empty`` inside ``FakeTensorMode``), each of its repeated blocks and then the root
wrapped with ``fully_shard`` over a one-dimensional mesh of ``world`` ranks of torch's fake process group
(``torch.testing._internal.distributed.fake_pg``: collectives that move nothing). One forward and
backward then run as rank 0 runs them: every aten call is costed by the formula registry, FSDP's
collectives included (:mod:`graphprof.formulas.collectives`), and what the forward saves for backward is
summed. Nothing real is allocated, so Llama-3-70B on 512 ranks fits on a laptop. The default process
group is destroyed afterwards; a process that already has one is refused (it is the user's).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from graphprof.base.choices import Phase
from graphprof.cost.count import op_record
from graphprof.cost.result import OpRecord
from graphprof.errors import InvalidInputError
from graphprof.formulas.registry import to_meta
from graphprof.run.propagate import OpCall
from graphprof.sharding.tied import retie, tied_groups

__all__ = ["fake_world", "shard_units", "run_sharded_step", "StepRecord"]


@contextlib.contextmanager
def fake_world(world: int) -> Iterator[Any]:
    """A one-dimensional device mesh of ``world`` ranks on torch's fake process group (this process is
    rank 0); the group is destroyed on exit."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise InvalidInputError("a torch.distributed process group already exists in this process: shard in a fresh one")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        yield init_device_mesh("cpu", (world,))
    finally:
        dist.destroy_process_group()


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The blocks FSDP wraps one by one: the items of the model's largest ``nn.ModuleList`` by parameter
    count (a transformer's decoder layers), else its direct children that hold parameters."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 1]
    if lists:
        best = max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))
        return list(best)
    return [c for c in model.children() if any(True for _ in c.parameters())]


class _Tap(TorchDispatchMode):
    """Every aten call of the step as a cost record, in order, with its phase."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.records: list[OpRecord] = []
        self.phase = Phase.FORWARD

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        memo: dict[int, Any] = {}
        self.records.append(op_record(OpCall(func, to_meta(args, memo), to_meta(kwargs, memo), to_meta(out, {}), self.phase)))
        return out


class _Saved:
    """Bytes the forward saves for backward (each storage once; parameters, gathered or not, left out)."""

    def __init__(self) -> None:
        self.seen: set[StorageWeakRef] = set()
        self.bytes = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if not isinstance(base, nn.Parameter) and t.layout == torch.strided:
            ref = StorageWeakRef(t.untyped_storage())
            if ref not in self.seen:
                self.seen.add(ref)
                self.bytes += t.untyped_storage().nbytes()
        return t


class StepRecord:
    """What :func:`run_sharded_step` saw: the op records, the bytes saved for backward, the shards."""

    def __init__(self, records: list[OpRecord], saved_bytes: int, shard_bytes: int, unit_bytes: list[int]) -> None:
        self.records, self.saved_bytes, self.shard_bytes, self.unit_bytes = records, saved_bytes, shard_bytes, unit_bytes


def _fake_inputs(value: Any) -> Any:
    return tree_map(lambda t: torch.zeros(t.shape, dtype=t.dtype) if isinstance(t, torch.Tensor) else t, value)


def _loss(out: Any) -> torch.Tensor:
    logits = getattr(out, "logits", None)
    first = logits if isinstance(logits, torch.Tensor) else next(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
    return first.float().sum()


def run_sharded_step(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], mesh: Any, dtype: torch.dtype | None) -> StepRecord:
    """One training step of a copy of ``model`` wrapped with ``fully_shard`` on ``mesh``, on FakeTensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.fsdp import fully_shard

    from graphprof.formulas.collectives import register_collectives

    register_collectives()
    step_model = copy.deepcopy(model)  # the user's model (or the meta build) is never wrapped itself
    if dtype is not None:
        step_model = step_model.to(dtype)  # on the copy, before its parameters become FakeTensors
    tied = tied_groups(step_model)
    with FakeTensorMode(allow_non_fake_inputs=True):
        step_model = step_model.to_empty(device="cpu")
        retie(step_model, tied)  # to_empty unties them: FSDP would shard a second embedding
        step_model.train()
        units = shard_units(step_model)
        unit_bytes = [sum(p.numel() * p.element_size() for p in u.parameters()) for u in units]
        for unit in units:
            fully_shard(unit, mesh=mesh)
        fully_shard(step_model, mesh=mesh)
        shard_bytes = sum(p.to_local().numel() * p.element_size() for p in step_model.parameters())  # type: ignore[attr-defined]
        tap, saved = _Tap(), _Saved()
        call_args, call_kwargs = _fake_inputs(args), _fake_inputs(kwargs)
        with tap, torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
            loss = _loss(step_model(*call_args, **call_kwargs))
        tap.phase = Phase.BACKWARD
        with tap:
            loss.backward()
    return StepRecord(tap.records, saved.bytes, shard_bytes, unit_bytes)
