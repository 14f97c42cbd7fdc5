"""The result of :func:`graphprof.generate.profile_generation`: frozen records of plain numbers.

Conventions (those of :class:`graphprof.cost.result.Profile`): MACs count multiply-accumulates, FLOPs are
``2 x MACs`` plus element-wise work, bytes are read plus written. Times are estimates on a hardware
preset: ``lower_bound_s`` the roofline bound (the sum over graph rows of ``max(flops / peak, bytes /
bandwidth)``), ``predicted_s`` the calibrated prediction where the preset has a table. A real run's
figures sit apart, in :class:`GenerationMeasurement`, never mixed with them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graphprof.base.choices import KVCache
from graphprof.base.record import Record
from graphprof.cost.bounds import Bound
from graphprof.cost.result import cost_dict
from graphprof.cost.tokens import TokenFlops
from graphprof.devices.hardware import Hardware
from graphprof.formulas import Cost
from graphprof.generate.kvcache import KVCacheSpec
from graphprof.generate.regimes import DecodeRegimes

__all__ = ["BlockCost", "Phase", "Latency", "MemoryFit", "GenerationMeasurement", "GenerationProfile"]


@dataclass(frozen=True)
class BlockCost:
    """One block (a decoder layer, the embedding, the LM head, ...) or the total, in one phase.

    ``cost`` includes the KV cache traffic; ``kv_bytes_read`` / ``kv_bytes_written`` say how much of it
    is the cache (tokens cached before the step, read by attention; tokens the step adds).
    """

    name: str
    cost: Cost
    kv_bytes_read: int
    kv_bytes_written: int
    bound: Bound
    lower_bound_s: float | None
    predicted_s: float | None

    @property
    def arithmetic_intensity(self) -> float | None:
        return self.cost.arithmetic_intensity

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **cost_dict(self.cost, bytes_key="bytes"),
            "kv_bytes_read": self.kv_bytes_read,
            "kv_bytes_written": self.kv_bytes_written,
            "bound": self.bound,
            "lower_bound_s": self.lower_bound_s,
            "predicted_s": self.predicted_s,
        }


@dataclass(frozen=True)
class Phase:
    """Prefill, one decode step, or every decode step together: per block and in total.

    ``context`` is the number of tokens cached before the (first) forward; ``forwards`` how many
    forwards the phase sums (1, or the number of decode steps).
    """

    name: str
    context: int
    new_tokens: int
    forwards: int
    blocks: tuple[BlockCost, ...]
    total: BlockCost

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "context": self.context,
            "new_tokens_per_forward": self.new_tokens,
            "forwards": self.forwards,
            "total": self.total.to_dict(),
            "blocks": [b.to_dict() for b in self.blocks],
        }


@dataclass(frozen=True)
class Latency(Record):
    """Time to first token (the prefill), time per output token (mean decode step), tokens per second
    (``batch / tpot``: the decode rate over all sequences) and the whole ``generate()`` (prefill + steps)."""

    ttft_s: float
    tpot_s: float | None
    tokens_per_s: float | None
    total_s: float


@dataclass(frozen=True)
class MemoryFit:
    """Will it fit: weights + KV cache + activations against a device's memory.

    ``activation_bytes_per_token`` is the prefill's peak of live activations divided by the tokens it
    processed (batch x prompt): activations are taken to grow linearly with the tokens of a prefill.
    ``need(batch, context) = weights + batch * context * (kv_bytes_per_token + activation_bytes_per_token)``;
    ``max_context`` is the largest context at this batch (capped at the model's positions),
    ``max_batch`` the largest batch at this run's final context.
    """

    device_memory_bytes: int
    memory_source: str
    weight_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    activation_bytes_per_token: int
    fits: bool
    max_context: int
    max_positions: int | None
    max_batch: int

    @property
    def needed_bytes(self) -> int:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_memory_bytes": self.device_memory_bytes,
            "memory_source": self.memory_source,
            "weight_bytes": self.weight_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "activation_bytes": self.activation_bytes,
            "activation_bytes_per_token": self.activation_bytes_per_token,
            "needed_bytes": self.needed_bytes,
            "fits": self.fits,
            "max_context": self.max_context,
            "max_positions": self.max_positions,
            "max_batch": self.max_batch,
        }


@dataclass(frozen=True)
class GenerationMeasurement:
    """A real ``generate()`` on this machine: prefill time and per-token decode times (seconds), peak memory."""

    device: str
    dtype: str
    cache: KVCache
    runs: int
    prefill_s: tuple[float, ...]
    decode_step_s: tuple[float, ...]
    peak_memory_bytes: int | None
    memory_method: str
    host: str
    load: str

    @staticmethod
    def _mean_std(values: tuple[float, ...]) -> tuple[float, float]:
        n = len(values)
        mean = sum(values) / n
        var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
        return mean, var**0.5

    @property
    def prefill(self) -> tuple[float, float]:
        """Mean and standard deviation of the prefill time over the runs."""
        return self._mean_std(self.prefill_s)

    @property
    def decode_step(self) -> tuple[float, float]:
        """Mean and standard deviation of one decode step over every step of every run."""
        return self._mean_std(self.decode_step_s)

    def to_dict(self) -> dict[str, Any]:
        (pm, ps), (dm, ds) = self.prefill, self.decode_step
        return {
            "device": self.device, "dtype": self.dtype, "cache": self.cache, "runs": self.runs,
            "prefill_s": {"mean": pm, "std": ps, "values": list(self.prefill_s)},
            "decode_step_s": {"mean": dm, "std": ds, "values": list(self.decode_step_s)},
            "peak_memory_bytes": self.peak_memory_bytes, "memory_method": self.memory_method,
            "host": self.host, "load": self.load,
        }  # fmt: skip


@dataclass(frozen=True)
class GenerationProfile:
    """What ``generate()`` costs: the prefill, decode steps, their total, latency and whether it fits."""

    model_name: str
    dtype: str
    kv_dtype: str
    cache: KVCache
    batch: int
    prompt_len: int
    new_tokens: int
    kv: KVCacheSpec
    kv_bytes_per_token: int
    kv_cache_bytes: int
    hardware: Hardware | None
    prefill: Phase
    decode_first: Phase | None
    decode_last: Phase | None
    decode_total: Phase | None
    lower_bound: Latency | None
    predicted: Latency | None
    fit: MemoryFit | None
    summation: str
    notes: tuple[str, ...] = ()
    measurement: GenerationMeasurement | None = field(default=None)
    #: model FLOPs per token of the prefill (:mod:`graphprof.cost.tokens`: the convention), beside executed and counted
    per_token: TokenFlops | None = None
    #: decode's time per token eager and compiled (:mod:`graphprof.generate.regimes`); ``None`` without a GPU device
    regimes: DecodeRegimes | None = None

    @property
    def final_context(self) -> int:
        """Tokens in the cache at the end: the prompt and every new token but the last (never fed back)."""
        return self.prompt_len + self.new_tokens - 1

    @property
    def decode_steps(self) -> int:
        """Forwards after the prefill: the prefill gives the first new token, each step one more."""
        return self.new_tokens - 1

    def to_dict(self) -> dict[str, Any]:
        phases = (self.prefill, self.decode_first, self.decode_last, self.decode_total)
        return {
            "model": self.model_name, "dtype": self.dtype, "kv_dtype": self.kv_dtype, "cache": self.cache,
            "batch": self.batch, "prompt_len": self.prompt_len, "new_tokens": self.new_tokens,
            "decode_steps": self.decode_steps, "final_context": self.final_context,
            "kv_cache": {**self.kv.to_dict(), "bytes_per_token": self.kv_bytes_per_token, "bytes_at_end": self.kv_cache_bytes},
            "hardware": self.hardware.to_dict() if self.hardware is not None else None,
            "phases": {p.name: p.to_dict() for p in phases if p is not None},
            "lower_bound": self.lower_bound.to_dict() if self.lower_bound else None,
            "predicted": self.predicted.to_dict() if self.predicted else None,
            "fit": self.fit.to_dict() if self.fit else None,
            "summation": self.summation, "notes": list(self.notes),
            "measured": self.measurement.to_dict() if self.measurement else None,
            "per_token": self.per_token.to_dict() if self.per_token else None,
            "regimes": asdict(self.regimes) if self.regimes else None,
        }  # fmt: skip
