"""``profile_generation``: what ``generate()`` costs, phase by phase, on a dry run.

>>> import graphprof.generate as g
>>> r = g.profile_generation("hf:llama", prompt_len=64, new_tokens=8)      # doctest: +SKIP
>>> r.kv_bytes_per_token                      # 2 x 4 layers x 2 KV heads x 64 x 2 bytes (bfloat16)
2048

The model is prepared once (:func:`graphprof.prepare`); then the prefill and decode steps at three
contexts (the first step, the next, the last) are profiled with a real transformers cache
(:mod:`graphprof.generate.steps`). The per-step cost is checked to be affine in the context and summed
exactly (:mod:`graphprof.generate.growth`); a step that is not affine, or a run of at most three steps,
has every step profiled instead. Times come from the hardware preset's roofline and, where it has a
calibration table, its prediction; the KV cache and "will it fit" from the config and the profiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import KVCache
from graphprof.base.options import parse_dtype
from graphprof.cost.result import Profile
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import InvalidInputError
from graphprof.generate.blocks import decoder_list
from graphprof.generate.fit import device_memory, memory_fit
from graphprof.generate.growth import NotAffineError, fit_affine
from graphprof.generate.kvcache import KVCacheSpec, kv_spec
from graphprof.generate.phases import KVTraffic, exact_phase, single_phase, summed_phase
from graphprof.generate.regimes import DecodeRegimes, decode_regimes
from graphprof.generate.reprice import reprice_kv
from graphprof.generate.result import GenerationProfile, Latency, MemoryFit, Phase
from graphprof.generate.steps import profile_decode, profile_prefill
from graphprof.prepared import PreparedModel, prepare

__all__ = ["DEFAULT_DTYPE", "GenerationSpec", "profile_generation", "prepare_generation"]

#: The dtype counted when none is given: what LLM inference runs in (the catalogue builds float32).
DEFAULT_DTYPE = torch.bfloat16


@dataclass(frozen=True)
class GenerationSpec:
    """The options of one estimate, checked."""

    prompt_len: int
    new_tokens: int
    batch: int
    dtype: torch.dtype
    kv_dtype: torch.dtype
    cache: KVCache
    hardware: Hardware | None


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    return value


#: KV cache dtypes beyond :func:`graphprof.base.options.parse_dtype`'s (a float8 cache with bfloat16 compute).
_KV_DTYPES = {
    "float8": torch.float8_e4m3fn,
    "fp8": torch.float8_e4m3fn,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}


def _kv_dtype(value: str | torch.dtype | None, run: torch.dtype) -> torch.dtype:
    if isinstance(value, str) and value.strip().lower() in _KV_DTYPES:
        return _KV_DTYPES[value.strip().lower()]
    return parse_dtype(value) or run


def _spec(prompt_len: Any, new_tokens: Any, batch_size: Any, dtype: Any, kv_dtype: Any, cache: Any, hardware: Any) -> GenerationSpec:
    run = parse_dtype(dtype) or DEFAULT_DTYPE
    try:
        kind = KVCache(cache)
    except ValueError as exc:
        raise InvalidInputError(f"unknown cache {cache!r}; choose from {', '.join(k.value for k in KVCache)}") from exc
    device = get_hardware(hardware) if isinstance(hardware, str) else hardware
    return GenerationSpec(
        _positive("prompt length", prompt_len), _positive("new tokens", new_tokens), _positive("batch size", batch_size),
        run, _kv_dtype(kv_dtype, run), kind, device,
    )  # fmt: skip


_NOT_A_DECODER = "generation profiles need a transformers decoder-only causal LM (one with generate())"


def prepare_generation(model: nn.Module | str, spec: GenerationSpec, **options: Any) -> PreparedModel:
    """The model prepared for the dry runs (built on the meta device when named); refuses a non-decoder."""
    target = spec.hardware.target if spec.hardware is not None else None
    if not isinstance(model, str) and not hasattr(model, "generate"):
        raise InvalidInputError(f"{type(model).__name__}: {_NOT_A_DECODER}")
    if isinstance(model, str):
        pm = prepare(model, input_shape=(spec.batch, spec.prompt_len), dtype=spec.dtype, target=target, **options)
    else:
        ids = torch.zeros((spec.batch, spec.prompt_len), dtype=torch.long, device="meta")
        pm = prepare(model, example_kwargs={"input_ids": ids}, dtype=spec.dtype, target=target, **options)
    config = getattr(pm.model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False) or not hasattr(pm.model, "generate"):
        raise InvalidInputError(f"{pm.name}: {_NOT_A_DECODER}")
    positions = getattr(config, "max_position_embeddings", None)
    context = spec.prompt_len + spec.new_tokens - 1  # the last token never enters the cache
    if isinstance(positions, int) and context > positions:
        raise InvalidInputError(
            f"{pm.name} has {positions:,} positions: --prompt-len {spec.prompt_len:,} + --new-tokens {spec.new_tokens:,}"
            f" needs a context of {context:,}; lower either"
        )
    return pm


def _decode_profiles(
    pm: PreparedModel, spec: GenerationSpec, kv: KVCacheSpec, layers_path: str, contexts: list[int]
) -> list[tuple[int, Profile]]:
    out = []
    for context in contexts:
        profile = profile_decode(pm, context=context, batch=spec.batch, kind=spec.cache, kv_dtype=spec.dtype)
        profile = reprice_kv(profile, layers_path, kv, context=context, new=1, batch=spec.batch, run=spec.dtype, kv=spec.kv_dtype)
        out.append((context, profile))
    return out


_Decode = tuple[Phase | None, Phase | None, Phase | None, str, tuple[Profile, Profile] | None]


def _decode(pm: PreparedModel, spec: GenerationSpec, kv: KVCacheSpec, traffic: KVTraffic) -> _Decode:
    """The first and last decode steps and their sum, how the sum was taken, and the first and last steps' profiles."""
    steps, first = spec.new_tokens - 1, spec.prompt_len
    if steps == 0:
        return None, None, None, "no decode step: one new token comes from the prefill", None
    last = first + steps - 1
    if steps > 3:
        (c0, p0), (_, p1), (_, pl) = _decode_profiles(pm, spec, kv, traffic.layers_path, [first, first + 1, last])
        try:
            fit = fit_affine(p0, c0, p1, pl, last)
        except NotAffineError as exc:
            why = f"every step profiled: {exc}"
            profiles = _decode_profiles(pm, spec, kv, traffic.layers_path, list(range(first, last + 1)))
        else:
            how = (
                f"decode summed exactly: the step's cost is affine in the context (checked row by row at {first}, "
                f"{first + 1} and {last}); total = n * step({first}) + slope * n(n-1)/2 with n = {steps}"
            )
            return (
                single_phase("decode_first", p0, spec.hardware, traffic, context=first, new=1),
                single_phase("decode_last", pl, spec.hardware, traffic, context=last, new=1),
                summed_phase("decode_total", fit, spec.hardware, traffic, steps=steps), how, (p0, pl),
            )  # fmt: skip
    else:
        why = f"every step profiled ({steps} steps)"
        profiles = _decode_profiles(pm, spec, kv, traffic.layers_path, list(range(first, last + 1)))
    return (
        single_phase("decode_first", profiles[0][1], spec.hardware, traffic, context=first, new=1),
        single_phase("decode_last", profiles[-1][1], spec.hardware, traffic, context=last, new=1),
        exact_phase("decode_total", profiles, spec.hardware, traffic), why, (profiles[0][1], profiles[-1][1]),
    )  # fmt: skip


def _latency(prefill: Phase, total: Phase | None, batch: int, pick: str) -> Latency | None:
    ttft = getattr(prefill.total, pick)
    if ttft is None:
        return None
    steps_s = getattr(total.total, pick) if total is not None else None
    tpot = steps_s / total.forwards if total is not None and steps_s is not None else None
    rate = batch / tpot if tpot else None
    return Latency(ttft_s=ttft, tpot_s=tpot, tokens_per_s=rate, total_s=ttft + (steps_s or 0.0))


def _regime_latency(regimes: DecodeRegimes | None, steps: int, batch: int) -> Latency | None:
    """``predicted`` under ``--compile``: the compiled regime's prefill and mean step (:mod:`graphprof.generate.regimes`)."""
    if regimes is None:
        return None
    tpot, ttft = regimes.compiled.tpot_s, regimes.compiled.ttft_s
    rate = batch / tpot if tpot else None
    return Latency(ttft_s=ttft, tpot_s=tpot, tokens_per_s=rate, total_s=ttft + steps * (tpot or 0.0))


def _fit(pm: PreparedModel, prefill: Profile, spec: GenerationSpec, kv: KVCacheSpec, memory_bytes: int | None) -> MemoryFit | None:
    if spec.hardware is None:
        return None
    capacity = device_memory(spec.hardware, memory_bytes)
    if capacity is None:
        return None
    positions = getattr(getattr(pm.model, "config", None), "max_position_embeddings", None)
    return memory_fit(
        capacity=capacity, weight_bytes=prefill.param_bytes + prefill.buffer_bytes, kv_bytes_per_token=kv.bytes_per_token(spec.kv_dtype),
        activation_bytes=prefill.peak_activation_bytes, activation_tokens=spec.batch * spec.prompt_len, batch=spec.batch,
        final_context=spec.prompt_len + spec.new_tokens - 1, max_positions=positions if isinstance(positions, int) else None,
    )  # fmt: skip


def _notes(
    spec: GenerationSpec, how: str, fit: MemoryFit | None, hardware: Hardware | None, regimes: DecodeRegimes | None
) -> tuple[str, ...]:
    notes = [
        f"counted as {str(spec.dtype).removeprefix('torch.')}; KV cache in {str(spec.kv_dtype).removeprefix('torch.')}",
        f"cache: {spec.cache.value} ({'K/V written in place, the context read once per step' if spec.cache is KVCache.STATIC else 'transformers DynamicCache: torch.cat re-reads and rewrites the cache every step'})",
        how,
        "the prefill gives the first new token; each decode step one more; the last token never enters the cache",
    ]
    if spec.kv_dtype != spec.dtype:
        notes.append("the dry run keeps the cache in the compute dtype; its reads and writes are re-priced at the KV dtype")
    if regimes is not None:
        notes.append(
            f"predicted: the {regimes.regime} regime (eager: a host launch per kernel; compiled: torch.compile with CUDA graphs, "
            "element-wise chains fused, no launch cost); both in 'regimes', kernels priced by " + regimes.kernel_model
        )
    if hardware is not None and fit is None:
        notes.append(f"will it fit: no memory figure for {hardware.label} (pass memory_bytes)")
    return tuple(notes)


def profile_generation(
    model: nn.Module | str,
    *,
    prompt_len: int = 1024,
    new_tokens: int = 256,
    batch_size: int = 1,
    dtype: str | torch.dtype | None = None,
    kv_dtype: str | torch.dtype | None = None,
    cache: KVCache | str = KVCache.STATIC,
    hardware: Hardware | str | None = None,
    memory_bytes: int | None = None,
    compiled: bool = False,
    **prepare_options: Any,
) -> GenerationProfile:
    """The cost of ``generate()`` with a prompt of ``prompt_len`` tokens and ``new_tokens`` new ones.

    ``model``: a name (``"hf:llama-3-8b"``, ``"pkg.mod:factory"``) or a transformers causal LM.
    ``dtype`` defaults to bfloat16; ``kv_dtype`` to ``dtype``. ``hardware`` (a preset name or a
    :class:`~graphprof.devices.hardware.Hardware`) gives times, bounds and "will it fit" (``memory_bytes``
    overrides the device's memory). ``compiled``: ``predicted`` is the compiled regime (``torch.compile`` with
    CUDA graphs, :mod:`graphprof.generate.regimes`), else eager; ``regimes`` gives both. The user's model is
    left as found.
    """
    spec = _spec(prompt_len, new_tokens, batch_size, dtype, kv_dtype, cache, hardware)
    pm = prepare_generation(model, spec, **prepare_options)
    kv = kv_spec(pm.model.config)
    layers_path = decoder_list(pm.model)
    traffic = KVTraffic(kv, layers_path, spec.batch, spec.kv_dtype)
    prefill_profile = profile_prefill(pm, prompt=spec.prompt_len, batch=spec.batch, kind=spec.cache, kv_dtype=spec.dtype)
    prefill_profile = reprice_kv(
        prefill_profile, layers_path, kv, context=0, new=spec.prompt_len, batch=spec.batch, run=spec.dtype, kv=spec.kv_dtype
    )
    prefill = single_phase("prefill", prefill_profile, spec.hardware, traffic, context=0, new=spec.prompt_len)
    first, last, total, how, ends = _decode(pm, spec, kv, traffic)
    fit = _fit(pm, prefill_profile, spec, kv, memory_bytes)
    regimes = decode_regimes(prefill_profile, ends, spec.hardware, compiled)
    predicted = (
        _regime_latency(regimes, spec.new_tokens - 1, spec.batch) if compiled else _latency(prefill, total, spec.batch, "predicted_s")
    )
    return GenerationProfile(
        model_name=pm.name, dtype=str(spec.dtype).removeprefix("torch."), kv_dtype=str(spec.kv_dtype).removeprefix("torch."),
        cache=spec.cache, batch=spec.batch, prompt_len=spec.prompt_len, new_tokens=spec.new_tokens, kv=kv,
        kv_bytes_per_token=kv.bytes_per_token(spec.kv_dtype), kv_cache_bytes=kv.size(spec.prompt_len + spec.new_tokens - 1, spec.batch, spec.kv_dtype),
        hardware=spec.hardware, prefill=prefill, decode_first=first, decode_last=last, decode_total=total,
        lower_bound=_latency(prefill, total, spec.batch, "lower_bound_s"), predicted=predicted,
        fit=fit, summation=how, notes=_notes(spec, how, fit, spec.hardware, regimes), per_token=prefill_profile.per_token, regimes=regimes,
    )  # fmt: skip
