"""The sharding of a step's copy: tensor parallelism first, then FSDP, on a fake process group's meshes.

:func:`fake_world` makes the process group and a device mesh of ``fsdp x tp`` ranks (dimensions ``dp``
and ``tp``), this process rank 0. :func:`sharding_wraps` gives what is applied to the step's copy of the
model, in torch's order for 2-D parallelism: :class:`TensorParallel` (DTensor's ``parallelize_module``
with ``ColwiseParallel``/``RowwiseParallel`` by the plan :mod:`~graphprof.sharding.tp_plan` reads from
the model) on the ``tp`` mesh, then :class:`Fsdp` (``fully_shard`` on each repeated block, units holding
a tied weight together, and the root) on the ``dp`` mesh. Each wrap keeps what it saw (the plan; the units' bytes) for the result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from graphprof.errors import InvalidInputError
from graphprof.sharding.spec import ShardSpec
from graphprof.sharding.tp_plan import TensorPlan, check_tp_plan, derive_tp_plan

__all__ = ["Meshes", "fake_world", "shard_units", "fsdp_groups", "local_bytes", "Fsdp", "TensorParallel", "sharding_wraps"]


@dataclass(frozen=True)
class Meshes:
    """The device meshes of each parallelism (``None`` where it is not used)."""

    dp: Any
    tp: Any


@contextlib.contextmanager
def fake_world(spec: ShardSpec) -> Iterator[Meshes]:
    """A device mesh of ``spec.world`` ranks on torch's fake process group (this process is rank 0), one
    dimension per parallelism used; the group is destroyed on exit."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise InvalidInputError("a torch.distributed process group already exists in this process: shard in a fresh one")
    # fsdp:1 is FSDP2 on a one-rank group (a single GPU running FSDP2 code: its casts and copies, no traffic)
    dims = {name: size for name, size in (("dp", spec.fsdp), ("tp", spec.tp)) if size > 1 or spec.world == 1 and name == "dp"}
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=spec.world)
    try:
        mesh = init_device_mesh("cpu", tuple(dims.values()), mesh_dim_names=tuple(dims))
        yield Meshes(mesh["dp"] if "dp" in dims else None, mesh["tp"] if "tp" in dims else None)
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


def fsdp_groups(units: list[nn.Module]) -> list[list[nn.Module]]:
    """``units`` in FSDP groups, in order of their first unit: units holding one parameter between them (tied
    weights, as in a model whose units are its children, the body and the LM head) share a group, for one
    ``fully_shard([a, b])`` (FSDP2 refuses a parameter that two groups manage); every other unit is alone."""
    parent = list(range(len(units)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    first_holder: dict[int, int] = {}  # parameter id -> the first unit holding it
    for i, unit in enumerate(units):
        for p in unit.parameters():
            a, b = root(i), root(first_holder.setdefault(id(p), i))
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[nn.Module]] = {}
    for i, unit in enumerate(units):
        groups.setdefault(root(i), []).append(unit)
    return list(groups.values())


def local_bytes(t: torch.Tensor) -> int:
    """Bytes of what this rank holds of ``t``: a DTensor's local shard, else the tensor."""
    local = getattr(t, "_local_tensor", t)
    return int(local.numel() * local.element_size())


class Fsdp:
    """``fully_shard`` on each repeated block and then the root, over ``mesh``; ``unit_bytes``: each
    block's bytes as this rank holds them before FSDP (after tensor parallelism), i.e. what it gathers."""

    def __init__(self, mesh: Any, nested: bool) -> None:
        self.mesh, self.nested = mesh, nested
        self.unit_bytes: list[int] = []

    def __call__(self, model: nn.Module) -> nn.Module:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.distributed.fsdp import fully_shard

        groups = fsdp_groups(shard_units(model))
        self.unit_bytes = [sum(local_bytes(p) for p in {id(p): p for u in g for p in u.parameters()}.values()) for g in groups]
        # over a mesh of two dimensions FSDP2 joins the meshes, whose rank lookup (a nonzero) a fake mode
        # cannot run; the parameters stay FakeTensors, their own ops keep them so
        with unset_fake_temporarily() if self.nested else contextlib.nullcontext():
            for group in groups:
                fully_shard(group[0] if len(group) == 1 else group, mesh=self.mesh)
            fully_shard(model, mesh=self.mesh)
        return model


class TensorParallel:
    """DTensor's tensor parallelism on ``mesh`` by the plan read from the model (:mod:`~graphprof.sharding.tp_plan`)
    on one forward of ``args``/``kwargs``; ``plan``: the plan applied."""

    def __init__(self, mesh: Any, args: tuple[Any, ...], kwargs: dict[str, Any], model_name: str) -> None:
        self.mesh, self.args, self.kwargs, self.model_name = mesh, args, kwargs, model_name
        self.plan = TensorPlan(())

    def __call__(self, model: nn.Module) -> nn.Module:
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        args, kwargs = _zeros(self.args, dtype), _zeros(self.kwargs, dtype)
        plan = derive_tp_plan(model, shard_units(model), args, kwargs)
        check_tp_plan(plan, self.mesh.size(), self.model_name)
        styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
        parallelize_module(model, self.mesh, {p.name: styles[p.style]() for p in plan.layers})
        self.plan = plan
        return model


def _zeros(value: Any, dtype: torch.dtype | None) -> Any:
    """Zeros of each tensor's shape (FakeTensors inside a fake mode), floating-point ones in the model's dtype."""

    def convert(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        return torch.zeros(t.shape, dtype=dtype if dtype is not None and t.is_floating_point() else t.dtype)

    return tree_map(convert, value)


def sharding_wraps(
    spec: ShardSpec, meshes: Meshes, args: tuple[Any, ...], kwargs: dict[str, Any], model_name: str
) -> tuple[TensorParallel | None, Fsdp | None]:
    """What shards the step's copy, applied in this order: tensor parallelism, then FSDP (each ``None``
    where ``spec`` does not use it)."""
    tp = None if meshes.tp is None else TensorParallel(meshes.tp, args, kwargs, model_name)
    fsdp = None if meshes.dp is None else Fsdp(meshes.dp, nested=meshes.tp is not None)
    return tp, fsdp
