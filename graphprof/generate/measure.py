"""A real ``generate()``: measured prefill time, per-token decode times and peak memory.

Each forward's end is timed from inside ``generate()`` itself, with a ``LogitsProcessor`` that records
``time.perf_counter()`` each time it is called: once per new token, right after the forward that produced
its logits. So ``prefill = t[0] - start`` (time to first token, as a user waits for it) and each decode
step is ``t[k] - t[k-1]`` (its forward plus the sampling and bookkeeping ``generate()`` does between
tokens: time per output token as a user sees it). No hook goes on the model.

Peak memory is taken on one more run under ``torch.profiler``'s allocator events on the CPU
(:func:`graphprof.measure.memory.peak_during`), or ``max_memory_allocated`` on CUDA, never on the timed
runs. It counts bytes allocated on top of the weights already in memory, so the weights are added back.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import KVCache
from graphprof.base.inputs import INPUT_SEED
from graphprof.base.tied import keep_ties
from graphprof.devices.hardware import Hardware, get_hardware, match_hardware
from graphprof.errors import InvalidInputError, MeasurementError
from graphprof.generate.result import GenerationMeasurement, GenerationProfile

__all__ = ["HOST_PRESETS", "host_hardware", "measure_generation", "with_measurement"]


class _Clock:
    """A ``LogitsProcessor`` (duck-typed: ``generate()`` calls it with ids and scores) that only reads the clock."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.stamps.append(time.perf_counter())
        return scores


def _model(model: nn.Module | str, batch: int, prompt: int, device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, str]:
    if isinstance(model, str):
        from graphprof.base.limits import require_fits, weight_bytes
        from graphprof.measure.run import free_memory
        from graphprof.models import resolve_model, spec_family

        if spec_family(model) is not None:  # a catalogue model's weights, counted on the meta device: refused up front
            counted = resolve_model(model, input_shape=(batch, prompt), device="meta").model  # (a user's factory runs once)
            skip = "leave out the real run (--measure) for the dry run's estimate alone"
            require_fits(
                weight_bytes(counted, dtype), f"measuring generation of {model} on {device}", budget=free_memory(device), skip=skip
            )
        built = resolve_model(model, input_shape=(batch, prompt), device=str(device)).model
        return keep_ties(built, lambda m: m.to(dtype)).eval(), built.__class__.__name__
    tensors = [*model.parameters(), *model.buffers()]
    if any(t.is_meta for t in tensors):
        raise InvalidInputError("a model on the meta device has no weights to run; build it on the CPU to measure")
    if all(t.device == device and (t.dtype == dtype or not t.is_floating_point()) for t in tensors):
        return model, type(model).__name__
    copied = keep_ties(copy.deepcopy(model), lambda m: m.to(device=device, dtype=dtype))  # the user's model untouched
    return copied.eval(), type(model).__name__


def _generate(model: nn.Module, ids: torch.Tensor, new_tokens: int, cache: KVCache, clock: Any) -> None:
    from transformers import LogitsProcessorList

    options: dict[str, Any] = {"cache_implementation": "static"} if cache is KVCache.STATIC else {}
    with torch.no_grad():
        model.generate(  # type: ignore[operator]
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
            do_sample=False, use_cache=True, pad_token_id=0,
            logits_processor=LogitsProcessorList([clock] if clock is not None else []), **options,
        )  # fmt: skip


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def measure_generation(
    model: nn.Module | str,
    *,
    prompt_len: int,
    new_tokens: int,
    batch_size: int = 1,
    dtype: torch.dtype = torch.float32,
    cache: KVCache = KVCache.STATIC,
    device: str | torch.device = "cpu",
    runs: int = 3,
    warmup: int = 1,
) -> GenerationMeasurement:
    """Time ``runs`` real ``generate()`` calls (after ``warmup`` untimed ones) and take the peak memory of one more.

    Random weights (seeded, as the dry run's models) and random prompt tokens; ``min_new_tokens`` makes
    every run produce exactly ``new_tokens`` tokens. The user's model is not changed (a copy is moved or cast).
    """
    from graphprof.devices.local import detect_host
    from graphprof.measure.memory import peak_during

    dev = torch.device(device)
    if new_tokens < 2:
        raise InvalidInputError("measuring decode steps needs at least 2 new tokens")
    work, _ = _model(model, batch_size, prompt_len, dev, dtype)
    generator = torch.Generator().manual_seed(INPUT_SEED)
    vocab = int(getattr(work.config, "vocab_size", 2))
    ids = torch.randint(1, vocab, (batch_size, prompt_len), generator=generator).to(dev)
    prefill: list[float] = []
    steps: list[float] = []
    try:
        for index in range(warmup + runs):
            clock = _Clock()
            start = time.perf_counter()
            _generate(work, ids, new_tokens, cache, clock)
            if index >= warmup:
                prefill.append(clock.stamps[0] - start)
                steps.extend(b - a for a, b in zip(clock.stamps, clock.stamps[1:], strict=False))
        extra, _ = peak_during(lambda: _generate(work, ids, new_tokens, cache, None), dev)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise MeasurementError(f"generate() failed: {type(exc).__name__}: {exc}") from exc
    weights = sum(t.numel() * t.element_size() for t in [*work.parameters(), *work.buffers()])
    host = detect_host(dev)
    return GenerationMeasurement(
        device=str(dev), dtype=str(dtype).removeprefix("torch."), cache=cache, runs=runs,
        prefill_s=tuple(prefill), decode_step_s=tuple(steps), peak_memory_bytes=weights + extra,
        memory_method="weights + allocator peak" if dev.type == "cuda" else "weights + profiler allocator peak",
        host=f"{host.cpu}, {host.cores} cores" + (f", {host.gpu}" if host.gpu else ""), load=_load(),
    )  # fmt: skip


#: Presets tried, in order, for the estimate beside a run on the CPU when no hardware is named: a calibrated
#: ``local`` preset (from ``graphprof calibrate``) when one exists, else the generic desktop CPU.
HOST_PRESETS = ("local", "cpu")


def host_hardware(device: str | torch.device | None) -> Hardware:
    """The preset whose estimate sits beside a real run on ``device`` when no hardware is named."""
    dev = torch.device(device or "cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        matched = match_hardware(torch.cuda.get_device_name(dev))
        if matched is not None:
            return matched
    for preset in HOST_PRESETS:
        try:
            return get_hardware(preset)
        except InvalidInputError:
            continue
    raise AssertionError("unreachable: the cpu preset exists")  # pragma: no cover


def with_measurement(model: nn.Module | str, *, device: str | None = None, runs: int = 3, **options: Any) -> GenerationProfile:
    """:func:`~graphprof.generate.profile_generation` (``options``; hardware defaulting to
    :func:`host_hardware`) with a real ``generate()`` of the same model, dtype, cache and sizes beside it."""
    from graphprof.generate.estimate import profile_generation

    if options.get("hardware") is None:
        options["hardware"] = host_hardware(device)
    result = profile_generation(model, **options)
    measured = measure_generation(
        model, prompt_len=result.prompt_len, new_tokens=result.new_tokens, batch_size=result.batch,
        dtype=getattr(torch, result.dtype), cache=result.cache, device=device or "cpu", runs=runs,
    )  # fmt: skip
    notes = result.notes
    hardware = options["hardware"]
    hardware = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if isinstance(hardware, Hardware) and measured.device.startswith("cpu") and hardware.name != "local":
        notes += (
            f"the estimate is for {hardware.label} ({hardware.name}), not for this machine ({measured.host}) that ran "
            "the measurement: the two compare two machines (`graphprof calibrate`, then --hardware local, sets "
            "the run beside this CPU's own roof)",
        )
    return dataclasses.replace(result, measurement=measured, notes=notes)
