"""LLM inference as users run it: prefill and decode, the KV cache, and whether it fits.

:func:`profile_generation` profiles a decoder's prefill and decode steps with a real transformers cache
on graphprof's dry run; :func:`measure_generation` times a real ``generate()`` beside it. One job per
file: ``kvcache`` (size and cache objects), ``steps`` (the two forwards), ``blocks`` (rows into decoder
layers), ``growth`` (affine in the context, summed exactly), ``reprice`` (a KV dtype of its own),
``phases`` (blocks, bounds, times), ``fit`` (will it fit), ``estimate`` (the whole estimate),
``measure`` (a real run), ``result`` (the records).
"""

from graphprof.generate.estimate import DEFAULT_DTYPE, profile_generation
from graphprof.generate.kvcache import KVCacheSpec, kv_spec
from graphprof.generate.result import BlockCost, GenerationMeasurement, GenerationProfile, Latency, MemoryFit, Phase

__all__ = [
    "DEFAULT_DTYPE",
    "BlockCost",
    "GenerationMeasurement",
    "GenerationProfile",
    "KVCacheSpec",
    "Latency",
    "MemoryFit",
    "Phase",
    "kv_spec",
    "profile_generation",
]
