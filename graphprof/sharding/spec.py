"""``graphprof shard ... fsdp:64``, ``tp:8``, ``fsdp:8,tp:8`` (``shard=`` in the API): how a training step
is sharded, parsed once (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from graphprof.errors import InvalidInputError

__all__ = ["ShardSpec", "parse_shard", "check_layout", "MAX_SHARDS", "MAX_WORLD"]

#: The largest world size a dry run accepts (a fake process group has no ranks to start; the bound keeps
#: the sharded shapes sensible and the padding small).
MAX_WORLD = 65536
STRATEGIES = ("fsdp", "tp")
#: The most (parameter tensor, rank) pairs one dry run lays out: FSDP2 works per tensor and per rank, about
#: 0.15 ms a pair on a 2-core CPU (hf:llama's 39 tensors: 10.9 s at 64 ranks, 57.7 s at 8,192), so this
#: bound keeps a step within a few minutes (Llama-3-70B's 723 tensors: up to 1,383 ranks).
MAX_SHARDS = 1_000_000
_EXAMPLE = "fsdp:64, tp:8 or fsdp:8,tp:8"


@dataclass(frozen=True)
class ShardSpec:
    """The degrees of each parallelism (1: not used), over ``fsdp * tp`` ranks.

    ``fsdp``: FSDP2's ``fully_shard``, parameters, gradients and optimizer state split over data-parallel
    ranks; ``tp``: DTensor's tensor parallelism, each planned linear layer split column- or row-wise.

    >>> str(ShardSpec(fsdp=4, tp=2)), ShardSpec(fsdp=4, tp=2).world, ShardSpec(tp=8).strategy, str(ShardSpec())
    ('fsdp:4,tp:2', 8, 'tp', 'fsdp:1')
    """

    fsdp: int = 1
    tp: int = 1

    @property
    def world(self) -> int:
        return self.fsdp * self.tp

    @property
    def strategy(self) -> str:
        """The parallelisms used, joined: ``fsdp``, ``tp`` or ``fsdp,tp``."""
        return ",".join(name for name in STRATEGIES if getattr(self, name) > 1)

    def __str__(self) -> str:
        if self.world == 1:  # one rank: the step unsharded, as torchtitan runs on one GPU
            return "fsdp:1"
        return ",".join(f"{name}:{getattr(self, name)}" for name in STRATEGIES if getattr(self, name) > 1)


def _degree(text: str, part: str) -> tuple[str, int]:
    strategy, sep, count = part.strip().partition(":")
    if strategy not in STRATEGIES or not sep:
        raise InvalidInputError(f"sharding {text!r}: write STRATEGY:RANKS with STRATEGY one of {', '.join(STRATEGIES)} ({_EXAMPLE})")
    if part.strip().lower() == "fsdp:auto":  # a count only the planner finds (plan_ranks)
        raise InvalidInputError(
            f"sharding {text!r}: fsdp:auto finds the fewest ranks that fit a device, a plan of its own: "
            "graphprof shard --model M fsdp:auto --fits --hardware h100 (graphprof.training.plan_ranks)"
        )
    if not count.isascii() or not count.isdigit():
        raise InvalidInputError(f"sharding {text!r}: the number of ranks must be a whole number ({_EXAMPLE})")
    if int(count) < 1 or int(count) == 1 and (strategy != "fsdp" or "," in text):
        raise InvalidInputError(f"sharding {text!r}: each parallelism over at least 2 ranks (fsdp:1 alone: one GPU, unsharded)")
    return strategy, int(count)


def parse_shard(text: str) -> ShardSpec:
    """``"fsdp:64"`` -> ``ShardSpec(fsdp=64)``, ``"fsdp:4,tp:2"`` -> ``ShardSpec(fsdp=4, tp=2)``; a bad spec
    is one line naming what is allowed."""
    degrees: dict[str, int] = {}
    for part in str(text).strip().lower().split(","):
        strategy, count = _degree(text, part)
        if strategy in degrees:
            raise InvalidInputError(f"sharding {text!r}: {strategy} is named twice")
        degrees[strategy] = count
    spec = ShardSpec(**degrees)
    if spec.world > MAX_WORLD:
        raise InvalidInputError(f"sharding {text!r}: at most {MAX_WORLD} ranks in all")
    return spec


def check_layout(spec: ShardSpec, tensors: int, model: str) -> None:
    """Before the sharded step: ``tensors`` parameter tensors over ``spec.world`` ranks within :data:`MAX_SHARDS`."""
    if tensors * spec.world > MAX_SHARDS:
        raise InvalidInputError(
            f"sharding {model} {spec}: {tensors:,} parameter tensors x {spec.world:,} ranks is {tensors * spec.world:,} "
            f"shards to lay out, over the bound of {MAX_SHARDS:,} (minutes each million); use at most "
            f"{max(2, MAX_SHARDS // max(tensors, 1)):,} ranks"
        )
