"""Activation checkpointing as a sharded step runs it: each FSDP unit wrapped, fully or by torchtitan's per-op policy.

One rule for both questions asked of a checkpointed step: how much memory it needs
(:func:`graphprof.training.plan_memory` with ``checkpoint=``, ``graphprof shard --fits --checkpoint``, and the
checkpointed candidate of ``fsdp:auto``) and how long it takes (:mod:`graphprof.sharding.steptime`'s
recomputation). The blocks are the same in both: FSDP's units (:func:`~graphprof.sharding.wraps.shard_units`, a
transformer's decoder layers), each wrapped by torch's ``checkpoint_wrapper`` (non-reentrant), as torchtitan's
``apply_ac`` wraps each ``TransformerBlock``.

* ``full``: every unit's forward is recomputed in the backward; only its inputs are kept.
* ``selective``: torchtitan's per-op policy (``torch.utils.checkpoint.create_selective_checkpoint_contexts``):
  attention's outputs and every other matrix product (the first, third, ... of each unit's forward, counted
  apart in the forward and in the recomputation) are saved, everything else is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from graphprof.base.choices import ActivationCheckpoint
from graphprof.run.step import Wrap, checkpointed
from graphprof.sharding.wraps import shard_units

__all__ = ["unit_checkpoint", "unit_names", "selective_policy"]


def unit_names(model: nn.Module) -> list[str]:
    """The module paths of ``model``'s FSDP units, in order: the blocks a checkpointed step recomputes."""
    units = {id(u) for u in shard_units(model)}
    return [name for name, m in model.named_modules() if id(m) in units]


def selective_policy(meta: dict[str, int]) -> Callable[..., Any]:
    """torchtitan's per-op policy: save attention and every other ``mm`` (odd ones), recompute the rest;
    ``meta`` counts the ``mm`` calls of one checkpointed call, forward and recomputation apart."""
    from torch.utils.checkpoint import CheckpointPolicy

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        mode = "recompute" if ctx.is_recompute else "forward"
        name = str(getattr(func, "_overloadpacket", func))
        if name == "aten.mm":
            key = f"{mode}_mm_count"
            meta[key] = meta.get(key, 0) + 1
            if meta[key] % 2 == 1:
                return CheckpointPolicy.MUST_SAVE
        elif "scaled_dot_product" in name and "attention" in name and "backward" not in name:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _contexts() -> Any:
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(selective_policy({}))  # a fresh count per checkpointed call


def unit_checkpoint(checkpoint: ActivationCheckpoint | str) -> Wrap | None:
    """The wrap that checkpoints every FSDP unit of a step's copy by ``checkpoint`` (module docstring); ``None``
    for ``none``. Applied before the sharding, as torchtitan applies AC before ``fully_shard``."""
    policy = ActivationCheckpoint.parse(checkpoint) if isinstance(checkpoint, str) else checkpoint
    if policy is ActivationCheckpoint.NONE:
        return None

    options: dict[str, Any] = (
        {"context_fn": _contexts, "respect_saved_tensors_hooks": True} if policy is ActivationCheckpoint.SELECTIVE else {}
    )

    def wrap(model: nn.Module) -> nn.Module:
        return checkpointed(set(unit_names(model)), **options)(model)

    return wrap
