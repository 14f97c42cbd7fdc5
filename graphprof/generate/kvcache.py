"""The KV cache: its size from a model's config, and a cache object for a dry run of one forward.

A decoder keeps, for every layer, the keys and values of every token seen so far::

    bytes = 2 (K and V) x layers x KV heads x head dim x tokens x batch x bytes per element

Llama-3-8B (32 layers, 8 KV heads of 128) in bfloat16: ``2 * 32 * 8 * 128 * 2 = 131,072`` bytes per
token (128 KiB). Grouped-query attention is why the *KV* heads count: with the 32 attention heads the
figure would be four times larger.

:func:`make_cache` builds the transformers cache object (``StaticCache`` or ``DynamicCache``) holding
``context`` tokens on the meta device, for a dry run of one forward with ``cache=`` (no memory, no values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from graphprof.base.choices import KVCache
from graphprof.base.record import Record
from graphprof.errors import InvalidInputError, MissingDependencyError

__all__ = ["KVCacheSpec", "kv_spec", "make_cache"]


# How the decode graph keeps its cache (:class:`graphprof.base.choices.KVCache`). ``static``: a preallocated
#: cache sized to the context (transformers' ``StaticCache`` with ``max_cache_len = context + new tokens of
#: the step``): a step writes its new token's K and V in place (``index_copy_``) and attention reads the
#: cached tokens once, as a paged-attention server does. ``dynamic``: transformers' default
#: ``DynamicCache``, which grows by ``torch.cat``: every step also reads and rewrites the whole cache, as
#: eager ``generate()`` does.


@dataclass(frozen=True)
class KVCacheSpec(Record):
    """What one token costs in the cache: ``layers`` x ``kv_heads`` x ``head_dim``, for K and for V."""

    layers: int
    kv_heads: int
    head_dim: int
    attention_heads: int

    @property
    def elements_per_token(self) -> int:
        """K and V elements one token adds to the cache, over every layer: ``2 * layers * kv_heads * head_dim``."""
        return 2 * self.layers * self.kv_heads * self.head_dim

    def bytes_per_token(self, dtype: torch.dtype) -> int:
        """Bytes one token (of one sequence) adds to the cache in ``dtype``."""
        return self.elements_per_token * dtype.itemsize

    def layer_bytes(self, tokens: int, batch: int, dtype: torch.dtype) -> int:
        """Bytes of one layer's K and V for ``tokens`` tokens of ``batch`` sequences."""
        return 2 * self.kv_heads * self.head_dim * tokens * batch * dtype.itemsize

    def size(self, tokens: int, batch: int, dtype: torch.dtype) -> int:
        """Bytes of the whole cache holding ``tokens`` tokens of ``batch`` sequences."""
        return self.bytes_per_token(dtype) * tokens * batch


def _text_config(config: Any) -> Any:
    getter = getattr(config, "get_text_config", None)
    return getter(decoder=True) if callable(getter) else config


def kv_spec(config: Any) -> KVCacheSpec:
    """The cache geometry of a transformers decoder config (``num_key_value_heads`` where it has one).

    >>> from transformers import LlamaConfig
    >>> kv_spec(LlamaConfig(num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
    ...                     hidden_size=4096)).bytes_per_token(torch.bfloat16)
    131072
    """
    text = _text_config(config)
    layers, heads, hidden = (getattr(text, k, None) for k in ("num_hidden_layers", "num_attention_heads", "hidden_size"))
    if not (isinstance(layers, int) and isinstance(heads, int) and isinstance(hidden, int) and min(layers, heads, hidden) > 0):
        raise InvalidInputError(
            f"{type(config).__name__} names no layers / attention heads / hidden size: not a decoder graphprof can cache"
        )
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    return KVCacheSpec(layers=layers, kv_heads=kv_heads, head_dim=head_dim, attention_heads=heads)


def _cache_classes() -> Any:
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - the hf extra
        raise MissingDependencyError(f"profiling generation needs transformers: pip install 'graphprof[hf]' ({exc})") from exc
    return transformers


def make_cache(config: Any, kind: KVCache, *, context: int, step: int, batch: int, dtype: torch.dtype) -> Any:
    """A transformers cache holding ``context`` tokens of ``batch`` sequences, on the meta device.

    ``step`` is the number of tokens the next forward adds (the prompt length for a prefill, 1 for a
    decode step); a static cache is sized ``context + step``, so attention reads exactly the context
    and the new tokens.
    """
    transformers = _cache_classes()
    spec = kv_spec(config)
    shape = (batch, spec.kv_heads, context, spec.head_dim)
    if kind is KVCache.DYNAMIC:
        if context == 0:
            return transformers.DynamicCache(config=config)
        data = [
            (torch.empty(shape, dtype=dtype, device="meta"), torch.empty(shape, dtype=dtype, device="meta")) for _ in range(spec.layers)
        ]
        return transformers.DynamicCache(ddp_cache_data=data, config=config)
    cache = transformers.StaticCache(config=config, max_cache_len=context + step)
    one = torch.empty((batch, spec.kv_heads, 1, spec.head_dim), dtype=dtype, device="meta")
    for layer in cache.layers:
        layer.lazy_initialization(one, one)  # allocates (meta) the full buffers, outside the counted run
        layer.cumulative_length = torch.full((), context, dtype=torch.long, device="meta")
    return cache
