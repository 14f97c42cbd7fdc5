"""What one rank of a sharded training step holds, computes and sends, beside the analytic figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graphprof.base.display import NotebookDisplay
from graphprof.sharding.step_result import StepTime

__all__ = ["RankFigures", "ShardedProfile"]


@dataclass(frozen=True)
class RankFigures:
    """Per rank, one training step (forward, backward; the optimizer's state held, its step not counted).

    Bytes: ``param_bytes`` / ``grad_bytes`` the rank's shards (FSDP pads each parameter's first dimension
    to a multiple of the world size), ``optimizer_bytes`` AdamW's two moments of the shard in the
    parameters' dtype (torch's default), ``activation_bytes`` what the forward saves for backward,
    ``unsharded_bytes`` the largest unit's gathered parameters twice (the unit computing and the one
    prefetched). Collectives: bytes of the tensors each rank gathers / reduces in one step (FSDP's
    all-gathers and reduce-scatters; tensor parallelism's all-reduces of partial sums, one a row-wise
    layer's output in the forward, one a column-wise layer's input gradient in the backward).
    """

    flops: int
    param_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    unsharded_bytes: int
    all_gather_bytes: int
    reduce_scatter_bytes: int
    all_gather_calls: int
    reduce_scatter_calls: int
    all_reduce_bytes: int
    all_reduce_calls: int

    @property
    def memory_bytes(self) -> int:
        """The estimate of the rank's peak: shards, optimizer state, activations, two gathered units."""
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes + self.activation_bytes + self.unsharded_bytes


@dataclass(frozen=True)
class ShardedProfile(NotebookDisplay):
    """A model's training step sharded over ``world`` ranks (``shard``: ``fsdp:8``, ``tp:8``,
    ``fsdp:8,tp:8``): the figures of one rank (``rank``, counted on a dry run of DTensor's tensor
    parallelism and FSDP2's ``fully_shard`` over a fake process group) and the analytic ones
    (``analytic``: parameters / N, the all-gather of every unit forward and backward, the
    reduce-scatter of every gradient once, an all-reduce per planned row-wise layer's output and
    column-wise layer's input gradient, the unsharded model's FLOPs at the same per-rank batch, over
    ``tp``). ``colwise``/``rowwise``: the linear layers tensor parallelism split, by name."""

    model_name: str
    strategy: str
    world: int
    dtype: str
    inputs: str
    units: int
    total_params: int
    rank: RankFigures
    analytic: RankFigures
    device: str | None = None
    device_memory_bytes: int | None = None
    notes: tuple[str, ...] = field(default=())
    shard: str = ""
    colwise: tuple[str, ...] = ()
    rowwise: tuple[str, ...] = ()
    #: the step's time on ``device`` (:mod:`graphprof.sharding.steptime`); ``None`` where not priced
    step: StepTime | None = None

    @property
    def fits(self) -> bool | None:
        """Whether the rank's estimated peak fits the device's memory (``None`` without a device)."""
        return None if self.device_memory_bytes is None else self.rank.memory_bytes <= self.device_memory_bytes

    @property
    def master_memory_bytes(self) -> int | None:
        """The rank's estimated peak with the shards the priced step keeps in its master dtype (torchtitan's
        float32 parameters, gradients and AdamW moments under a bf16 step): ``rank.memory_bytes`` with those three
        scaled; ``None`` where the step is not priced or keeps them in the compute dtype. An estimate: the dry
        run itself holds the shards in the compute dtype."""
        if self.step is None or self.step.master_scale == 1.0:
            return None
        shards = self.rank.param_bytes + self.rank.grad_bytes + self.rank.optimizer_bytes
        return self.rank.memory_bytes + round((self.step.master_scale - 1.0) * shards)

    def differences(self) -> dict[str, float]:
        """Per figure: ``rank / analytic - 1`` (0.0 where both are 0)."""
        out = {}
        for name, value in asdict(self.rank).items():
            expected = getattr(self.analytic, name)
            out[name] = 0.0 if value == expected else (value / expected - 1 if expected else float("inf"))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_name": self.model_name, "shard": self.shard, "strategy": self.strategy, "world": self.world, "dtype": self.dtype,
            "inputs": self.inputs, "units": self.units, "total_params": self.total_params,
            "rank": {**asdict(self.rank), "memory_bytes": self.rank.memory_bytes},
            "analytic": {**asdict(self.analytic), "memory_bytes": self.analytic.memory_bytes},
            "difference": self.differences(), "device": self.device, "device_memory_bytes": self.device_memory_bytes,
            "fits": self.fits, "tensor_parallel": {"colwise": list(self.colwise), "rowwise": list(self.rowwise)},
            "notes": list(self.notes),
            "step": None if self.step is None else {**self.step.to_dict(), "memory_bytes_master": self.master_memory_bytes},
        }  # fmt: skip
