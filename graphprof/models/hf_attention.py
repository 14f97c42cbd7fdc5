"""Attention of an ``hf:`` model on a dry run, as the structure of its mask says.

transformers treats FakeTensors as tracing, so on a dry run it builds the causal (or sliding-window)
mask as a tensor that the real run skips, and SDPA then runs the masked math path over the full square:
the useful FLOPs could not follow the mask, and grouped-query K / V were expanded. graphprof's models are
fed ``input_ids`` alone (no padding), so the mask's structure is known without reading it: it comes from
the **config**, through what the model passes its attention function (the module's ``is_causal``,
``sliding_window`` set per layer from ``config.sliding_window`` / ``config.layer_types``, ``softcap``).

:data:`ATTENTION` is registered with transformers' own ``AttentionInterface`` (its extension point for
attention functions; nothing is patched). On a real run it is transformers' ``sdpa`` (or, with a
``softcap``, the model's eager attention) unchanged. On a dry run:

* a causal layer (no window, or a window of at least the sequence) calls the kernel SDPA picks on the
  CPU for ``is_causal=True`` without a mask, as the real run does (``_scaled_dot_product_flash_attention_for_cpu``,
  grouped-query K / V not expanded): the fused kernel's causal credit, forward and backward, follows
  (:mod:`graphprof.formulas.fractions`);
* a sliding-window layer (``W`` < L), a soft-capped layer, or a layer whose values' head dim differs from
  the queries' (DeepSeek's latent attention: 192 and 128, which the CPU flash kernel refuses), calls
  ``flex_attention`` with a block mask built in closed form from ``W`` and the mask function transformers
  itself uses (``sliding_window_causal_mask_function``, or ``causal_mask_function`` without a window):
  useful = the band, about ``W / L`` (causal: about half); executed = the blocks the kernel visits. In
  train mode the backward is the ``flex_attention_backward`` operator, whose FakeTensor kernel gives its
  shapes, credited as the forward is (Gemma-2 at 8,192 tokens: the window layers' useful share is 0.375 in
  train mode as in eval). A real run keeps transformers' own attention.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, cast

import torch

__all__ = ["ATTENTION", "register_attention", "structured", "structured_for", "window_block_mask"]

#: The name the attention function is registered under (``attn_implementation``).
ATTENTION = "graphprof_structured"
#: flex_attention's default block edge
_BLOCK = 128


def _is_dry(t: torch.Tensor) -> bool:
    """A graphprof dry run (FakeTensors or meta tensors), not a graph capture: under Dynamo (graphprof's
    ``--capture dynamo``, ``torch.distributed.pipelining``'s tracer) the attention is transformers' own, which
    Dynamo can trace (it refuses to trace ``is_fake``)."""
    if torch.compiler.is_compiling():
        return False
    from torch._subclasses.fake_tensor import is_fake

    return bool(is_fake(t) or t.is_meta)


def _block_lists(q_len: int, kv_len: int, window: int | None, block: int) -> tuple[list[list[int]], list[list[int]]]:
    """Per query block, the key blocks the mask keeps in part and those it keeps whole."""
    partial: list[list[int]] = []
    full: list[list[int]] = []
    for i in range(-(-q_len // block)):
        r0, r1 = i * block, min((i + 1) * block, q_len) - 1
        lo = 0 if window is None else max(0, r0 - window + 1)
        partial.append([])
        full.append([])
        for j in range(lo // block, min(r1, kv_len - 1) // block + 1):
            c0, c1 = j * block, min((j + 1) * block, kv_len) - 1
            whole = c1 <= r0 and (window is None or c0 >= r1 - window + 1)
            (full if whole else partial)[-1].append(j)
    return partial, full


def _table(rows: list[list[int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(counts, indices)`` in ``BlockMask``'s layout, for one batch and one head."""
    counts = torch.tensor([[[len(row) for row in rows]]], dtype=torch.int32)
    indices = torch.tensor([[[row + [0] * (width - len(row)) for row in rows]]], dtype=torch.int32)
    return counts, indices


def window_block_mask(q_len: int, kv_len: int, window: int | None, block: int = _BLOCK) -> Any:
    """A ``BlockMask`` for a top-left causal mask of ``window`` keys (``None``: all earlier keys), its
    blocks listed in closed form (no L x S grid is evaluated), its mask function transformers' own.

    Built with every dispatch mode set aside (the dry run's FakeTensor mode and graphprof's own op tap): the
    mask is graphprof's model of the kernel, not an op of the model, so none of its construction is counted.
    """
    from torch.nn.attention.flex_attention import BlockMask
    from torch.utils._python_dispatch import _disable_current_modes
    from transformers.masking_utils import causal_mask_function, sliding_window_causal_mask_function

    partial, full = _block_lists(q_len, kv_len, window, block)
    width = -(-kv_len // block)
    with _disable_current_modes():
        partial_n, partial_i = _table(partial, width)
        full_n, full_i = _table(full, width)
        mask_mod: Any = causal_mask_function if window is None else sliding_window_causal_mask_function(window)
        return BlockMask.from_kv_blocks(
            partial_n, partial_i, full_n, full_i, BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(q_len, kv_len)
        )


def _eager_of(module: torch.nn.Module) -> Any:
    """The model file's own eager attention (Gemma-2's applies the soft cap)."""
    own = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if own is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    return own


def _real(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: Any, **kwargs: Any) -> Any:
    if kwargs.get("softcap") is not None:
        return _eager_of(module)(module, query, key, value, mask, **kwargs)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    kwargs.pop("sliding_window", None)
    return sdpa_attention_forward(module, query, key, value, mask, **kwargs)


def _identity(score: torch.Tensor, b: Any, h: Any, q: Any, kv: Any) -> torch.Tensor:
    return score


def _flex(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, window: int | None, scaling: Any, softcap: Any) -> torch.Tensor:
    """The ``flex_attention`` operator itself: torch's Python wrapper refuses the meta device a model built
    without weights runs on; the operator's FakeTensor kernel gives the output's shape (forward only)."""
    from torch._higher_order_ops.flex_attention import flex_attention

    block_mask = window_block_mask(query.shape[2], key.shape[2], window)
    score_mod = _identity
    if softcap is not None:

        def score_mod(score: torch.Tensor, b: Any, h: Any, q: Any, kv: Any) -> torch.Tensor:
            return cast(torch.Tensor, softcap * torch.tanh(score / softcap))

    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out, _, _ = flex_attention(query, key, value, score_mod, block_mask.as_tuple(), scale, {})
    return out


def structured_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: ``(B, H, L, D)`` in, ``(B, L, H, D)`` out."""
    causal = kwargs.get("is_causal")
    causal = getattr(module, "is_causal", True) if causal is None else causal
    q_len, kv_len = query.shape[2], key.shape[2]
    window, softcap = kwargs.get("sliding_window"), kwargs.get("softcap")
    if not (_is_dry(query) and causal and q_len == kv_len and q_len > 1 and dropout == 0.0):
        return _real(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)  # type: ignore[no-any-return]
    window = window if isinstance(window, int) and window < kv_len else None
    if window is None and softcap is None and value.shape[-1] == query.shape[-1]:
        # the kernel SDPA picks on the CPU for a causal call, grouped-query heads read as they are; called
        # by name because on the meta device SDPA would take its math path instead
        flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
        out = flash(query, key, value, 0.0, True, scale=scaling)[0]
    else:
        out = _flex(query, key, value, window, scaling, softcap)
    return out.transpose(1, 2).contiguous(), None


def register_attention() -> None:
    """Register :data:`ATTENTION` with transformers (idempotent): the attention function and, for the
    mask, transformers' own ``sdpa`` mask."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, structured_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)


def structured_for(model: torch.nn.Module, kwargs: dict[str, Any]) -> tuple[bool, str] | None:
    """Whether a transformers model object the user hands over counts with :data:`ATTENTION` on a dry run,
    and the note that says so or why not (``None``: not a transformers model). It does when it runs
    transformers' ``sdpa`` (the default; a model set to ``eager`` materialises the scores, and is counted as
    it runs), its class takes attention backends, and its inputs carry no padding: no ``attention_mask``, or
    one of all ones."""
    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(model, transformers.PreTrainedModel):
        return None
    implementation = getattr(model.config, "_attn_implementation", None)
    mask = kwargs.get("attention_mask")
    if implementation != "sdpa":
        why = f"its attention_implementation is {implementation!r}, which computes the masked scores in full"
    elif not getattr(model, "_supports_attention_backend", False):
        why = "its class takes no attention backends"
    elif mask is not None and not (isinstance(mask, torch.Tensor) and not mask.is_meta and bool(mask.all())):
        why = "its attention_mask pads some positions"
    else:
        return True, (
            "a transformers model: attention counted as the SDPA kernels run it without a mask tensor (causal "
            "credit, sliding windows, grouped-query K / V as they are), as for hf: names"
        )
    return False, (
        f"a transformers model counted as it runs, the attention's masked scores in full (no causal or window "
        f"credit, K / V expanded to every head where it expands them): {why}"
    )


@contextlib.contextmanager
def structured(model: torch.nn.Module) -> Iterator[None]:
    """The model's configs set to :data:`ATTENTION` for the duration (see :func:`structured_for`), each put
    back as it was found, sub-configs included."""
    register_attention()
    config: Any = model.config
    configs = _configs(config)
    before = [c.__dict__.get("_attn_implementation_internal") for c in configs]
    config._attn_implementation = ATTENTION
    try:
        yield
    finally:
        for config, value in zip(configs, before, strict=True):
            config._attn_implementation_internal = value


def _configs(config: Any) -> list[Any]:
    """``config`` and its sub-configs, depth first."""
    out = [config]
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if sub is not None:
            out += _configs(sub)
    return out
