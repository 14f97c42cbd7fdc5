"""``graphprof shard ... fsdp:64`` (``shard=`` in the API): how a training step is sharded, parsed once (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from graphprof.errors import InvalidInputError

__all__ = ["ShardSpec", "parse_shard", "check_layout", "MAX_SHARDS", "MAX_WORLD"]

#: The largest world size a dry run accepts (a fake process group has no ranks to start; the bound keeps
#: the sharded shapes sensible and the padding small).
MAX_WORLD = 65536
STRATEGIES = ("fsdp",)
#: The most (parameter tensor, rank) pairs one dry run lays out: FSDP2 works per tensor and per rank, about
#: 0.15 ms a pair on a 2-core CPU (hf:llama's 39 tensors: 10.9 s at 64 ranks, 57.7 s at 8,192), so this
#: bound keeps a step within a few minutes (Llama-3-70B's 723 tensors: up to 1,383 ranks).
MAX_SHARDS = 1_000_000


@dataclass(frozen=True)
class ShardSpec:
    """``strategy`` (``fsdp``: FSDP2's ``fully_shard``, parameters, gradients and optimizer state split
    over ``world`` data-parallel ranks) and the number of ranks."""

    strategy: str
    world: int

    def __str__(self) -> str:
        return f"{self.strategy}:{self.world}"


def parse_shard(text: str) -> ShardSpec:
    """``"fsdp:64"`` -> ``ShardSpec("fsdp", 64)``; a bad spec is one line naming what is allowed."""
    strategy, sep, count = str(text).strip().lower().partition(":")
    if strategy not in STRATEGIES or not sep:
        raise InvalidInputError(f"sharding {text!r}: write STRATEGY:RANKS with STRATEGY one of {', '.join(STRATEGIES)} (fsdp:64)")
    if not count.isascii() or not count.isdigit():
        raise InvalidInputError(f"sharding {text!r}: the number of ranks must be a whole number (fsdp:64)")
    world = int(count)
    if not 2 <= world <= MAX_WORLD:
        raise InvalidInputError(f"sharding {text!r}: between 2 and {MAX_WORLD} ranks")
    return ShardSpec(strategy, world)


def check_layout(spec: ShardSpec, tensors: int, model: str) -> None:
    """Before the sharded step: ``tensors`` parameter tensors over ``spec.world`` ranks within :data:`MAX_SHARDS`."""
    if tensors * spec.world > MAX_SHARDS:
        raise InvalidInputError(
            f"sharding {model} {spec}: {tensors:,} parameter tensors x {spec.world:,} ranks is {tensors * spec.world:,} "
            f"shards to lay out, over the bound of {MAX_SHARDS:,} (minutes each million); use at most "
            f"{max(2, MAX_SHARDS // max(tensors, 1)):,} ranks"
        )
