"""The two kinds of forward ``generate()`` runs, each profiled on graphprof's own dry run.

* **prefill**: the prompt, ``input_ids`` of ``batch x prompt`` tokens, into an empty cache; with
  ``logits_to_keep=1`` where the model takes it, as ``generate()`` passes it (only the last position's
  logits are needed to pick the first new token).
* **decode step**: one new token per sequence, ``input_ids`` of ``batch x 1``, with a cache already
  holding ``context`` tokens (:func:`graphprof.generate.kvcache.make_cache`).

Both are ``prepared.profile(example_kwargs=...)``: the real transformers forward with a real cache
object, run on FakeTensors, so attention's cost over the cached keys, the cache update and everything
else come from the graph, not from a formula.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from graphprof.base.choices import KVCache
from graphprof.cost.result import Profile
from graphprof.generate.kvcache import make_cache
from graphprof.prepared import PreparedModel

__all__ = ["decode_kwargs", "prefill_kwargs", "profile_decode", "profile_prefill"]


def _takes(model: torch.nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
        return False


def _cache_keyword(model: torch.nn.Module) -> str:
    """``cache`` on transformers 5.x (``past_key_values`` is its deprecated name), else ``past_key_values``."""
    return "cache" if _takes(model, "cache") else "past_key_values"


def _ids(batch: int, length: int) -> torch.Tensor:
    return torch.zeros((batch, length), dtype=torch.long, device="meta")


def prefill_kwargs(pm: PreparedModel, *, prompt: int, batch: int, kind: KVCache, kv_dtype: torch.dtype) -> dict[str, Any]:
    """The keyword inputs of the prefill forward."""
    config = pm.model.config
    kwargs: dict[str, Any] = {
        "input_ids": _ids(batch, prompt),
        _cache_keyword(pm.model): make_cache(config, kind, context=0, step=prompt, batch=batch, dtype=kv_dtype),
        "use_cache": True,
    }
    if _takes(pm.model, "logits_to_keep"):
        kwargs["logits_to_keep"] = 1
    return kwargs


def decode_kwargs(pm: PreparedModel, *, context: int, batch: int, kind: KVCache, kv_dtype: torch.dtype) -> dict[str, Any]:
    """The keyword inputs of one decode step over a cache of ``context`` tokens."""
    config = pm.model.config
    return {
        "input_ids": _ids(batch, 1),
        _cache_keyword(pm.model): make_cache(config, kind, context=context, step=1, batch=batch, dtype=kv_dtype),
        "use_cache": True,
    }


def profile_prefill(pm: PreparedModel, *, prompt: int, batch: int, kind: KVCache, kv_dtype: torch.dtype) -> Profile:
    """The dry-run profile of the prefill forward."""
    return pm.profile(example_kwargs=prefill_kwargs(pm, prompt=prompt, batch=batch, kind=kind, kv_dtype=kv_dtype))


def profile_decode(pm: PreparedModel, *, context: int, batch: int, kind: KVCache, kv_dtype: torch.dtype) -> Profile:
    """The dry-run profile of one decode step with ``context`` tokens already cached."""
    return pm.profile(example_kwargs=decode_kwargs(pm, context=context, batch=batch, kind=kind, kv_dtype=kv_dtype))
