"""How long one rank's training step takes: the records :func:`graphprof.sharding.steptime.price_step` returns.

Conventions (stated once): *model FLOPs* per token are :mod:`graphprof.cost.tokens`' (2 x the MACs of the
weight and token-mixing products, the LM head in, causal attention over the lower triangle; train = 3 x
forward); ``mfu_full_square`` counts attention over the full square, as many published MFUs do (PaLM's
appendix B formula, torchtitan's ``12 L H Q T``). *Hardware FLOPs* (HFU) are what the rank's kernels
execute, recomputation included, causal tiles skipped. Peaks are the preset's dense datasheet figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["StepOptions", "TimeBreakdown", "StepTime"]


@dataclass(frozen=True)
class StepOptions:
    """How the step runs: ``grad_accum`` micro-batches per optimizer step (each gathers and reduce-scatters,
    FSDP2's default), ``checkpoint`` (``none``, ``selective``, ``full``), ``gpus_per_node`` (how the ranks fill
    nodes, which decides which links a collective crosses), ``compiled`` (``torch.compile``: element-wise
    chains fused, CUDA graphs: no launch cost on the host); ``reduce_dtype``: the dtype FSDP2 reduce-scatters
    gradients in (``MixedPrecisionPolicy.reduce_dtype``; torchtitan's default ``float32``); ``master_dtype``:
    the dtype the sharded parameters, their gradients and AdamW's moments are kept in (torchtitan keeps
    ``float32`` and casts to the compute dtype for the all-gather); ``None`` for either: the compute dtype;
    ``adamw``: AdamW's implementation, ``fused`` (one kernel over the shard: torchtitan's default) or ``foreach``
    (``torch.optim.AdamW``'s own default on CUDA: a pass over the shard per ``_foreach`` op)."""

    grad_accum: int = 1
    checkpoint: str = "none"
    gpus_per_node: int = 8
    compiled: bool = False
    reduce_dtype: str | None = "float32"
    master_dtype: str | None = "float32"
    adamw: str = "fused"


@dataclass(frozen=True)
class TimeBreakdown:
    """Where one step's wall time goes, seconds; the eight parts sum to the step time.

    ``compute``: the forward's and backward's kernels; ``recompute``: the kernels activation checkpointing
    runs again; ``communication``: time the GPU waits on a collective (an all-gather prefetch could not
    hide, a tensor-parallel all-reduce, the reduce-scatters left at the end); ``optimizer``: AdamW's step
    on the shard; ``host``: time the GPU waits for the host to launch the next kernel. Three estimates from
    published figures (:mod:`graphprof.sharding.physics`): ``attention_backward``: attention's backward kernels
    beyond their forward rate; ``sm_contention``: compute slowed by the SMs NCCL holds while a collective is
    hidden; ``sustained_clock``: tensor-core work at the clock held at the power limit rather than the boost."""

    compute_s: float
    recompute_s: float
    communication_s: float
    optimizer_s: float
    host_s: float
    attention_backward_s: float = 0.0
    sm_contention_s: float = 0.0
    sustained_clock_s: float = 0.0

    @property
    def total_s(self) -> float:
        return float(sum(asdict(self).values()))

    def scaled(self, factor: float) -> TimeBreakdown:
        return TimeBreakdown(*(factor * v for v in asdict(self).values()))


@dataclass(frozen=True)
class StepTime:
    """One rank's training step on ``device``: its time with an 80% interval, throughput and utilisation.

    ``tokens_per_step``: tokens one GPU's step advances the model by (batch x sequence x micro-batches,
    divided by the tensor-parallel degree, whose ranks share their tokens); ``communication_total_s``: every
    collective's own time, hidden or not; ``kernel_model``: the table that priced the kernels. A model without
    token inputs has no tokens, model FLOPs per token or MFU (``None``)."""

    device: str
    regime: str
    checkpoint: str
    grad_accum: int
    gpus_per_node: int
    time_s: float
    low_s: float
    high_s: float
    tokens_per_step: float | None
    tokens_per_s_per_gpu: float | None
    model_flops_per_token: float | None
    model_flops_per_token_full: float | None
    mfu: float | None
    mfu_full_square: float | None
    hfu: float
    breakdown: TimeBreakdown
    communication_total_s: float
    kernels: int
    kernel_model: str
    notes: tuple[str, ...] = field(default=())
    #: AdamW's implementation priced; the dtype of the sharded parameters, their gradients and AdamW's moments
    #: (``None``: the compute dtype) and its element's bytes over the compute dtype's
    adamw: str = "fused"
    master_dtype: str | None = None
    master_scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s, "interval_s": [self.low_s, self.high_s], "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "tokens_per_step_per_gpu": self.tokens_per_step, "mfu": self.mfu, "mfu_full_square": self.mfu_full_square,
            "hfu": self.hfu, "model_flops_per_token": self.model_flops_per_token,
            "model_flops_per_token_full_square": self.model_flops_per_token_full,
            "breakdown": {k.removesuffix("_s"): v for k, v in asdict(self.breakdown).items()},
            "communication_total_s": self.communication_total_s, "kernels": self.kernels, "device": self.device,
            "regime": self.regime, "checkpoint": self.checkpoint, "grad_accum": self.grad_accum,
            "gpus_per_node": self.gpus_per_node, "kernel_model": self.kernel_model, "notes": list(self.notes),
            "adamw": self.adamw, "master_dtype": self.master_dtype,
        }  # fmt: skip
