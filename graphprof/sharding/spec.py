"""``graphprof shard ... fsdp:64`` (``shard=`` in the API): how a training step is sharded, parsed once (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from graphprof.errors import InvalidInputError

__all__ = ["ShardSpec", "parse_shard", "MAX_WORLD"]

#: The largest world size a dry run accepts (a fake process group has no ranks to start; the bound keeps
#: the sharded shapes sensible and the padding small).
MAX_WORLD = 65536
STRATEGIES = ("fsdp",)


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
