"""Attention kernels: every scaled-dot-product form, and the fused nn.MultiheadAttention / encoder paths.

For a query of L tokens and a key / value of S tokens, per query head:

    MACs = L x S x E   (Q K^T)   +   L x S x E_v   (softmax(.) V)

Grouped-query / multi-query attention (fewer key-value heads, ``enable_gqa``) is counted per *query* head:
every query head multiplies against its (shared) key and value. Around the products, each element of the
L x S score matrix costs ``attention_scores`` FLOPs (scale and softmax), plus an add for an explicit
mask and the dropout rate when dropout is on.

Backward: the kernels recompute the scores and run four more products: per query head,
``L x S x (3 E + 2 E_v)`` MACs (Q K^T again, dO V^T, P^T dO, dS K, dS^T Q).

Causal masking: the products are counted in full, as ``torch.utils.flop_counter`` and the math path do
(the *counted* FLOPs, graphprof's convention). Two more figures are reported beside them, under their own
names: the *executed* FLOPs, what a tiled flash-style kernel computes (it skips the key tiles entirely
above the diagonal: :func:`causal_work_fraction`), and the *useful* FLOPs, the unmasked scores alone
(:func:`causal_useful_fraction`: ``L (L + 1) / 2`` of ``L x L`` for a square causal mask, one half plus
the diagonal). A mask passed as a tensor is not read in a dry run: its attention counts as useful in full. Variable-length (nested / ``cum_seq``) inputs are counted at their
maximum lengths, an upper bound, since a formula sees shapes, not offsets.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from graphprof.formulas.common import by_name, contraction, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

aten = torch.ops.aten

__all__ = [
    "attention_cost", "attention_backward_cost", "multi_head_attention_cost", "causal_work_fraction", "causal_useful_fraction",
    "causal_lengths", "sequence_sizes",
]  # fmt: skip

#: Tile edge (queries and keys) of the flash / memory-efficient kernels on Hopper: a causal kernel
#: computes every tile that holds at least one unmasked score and skips the rest.
CAUSAL_TILE = 128


def attention_cost(
    batch_heads: int, q_len: int, kv_len: int, qk_dim: int, v_dim: int, *, masked: bool = False, dropout: bool = False
) -> Cost:
    """Both products of ``batch_heads`` attention heads, with their softmax, mask and dropout FLOPs."""
    scores = batch_heads * q_len * kv_len
    other = flops_of("attention_scores", n_input=scores)
    if masked:
        other += flops_of("add", n_output=scores)
    if dropout:
        other += flops_of("native_dropout", n_output=scores)
    return contraction(scores * qk_dim + scores * v_dim, other)


def _bhld_sizes(query: TensorMeta, key: TensorMeta, value: TensorMeta) -> tuple[int, int, int, int, int]:
    """``(batch_heads, q_len, kv_len, qk_dim, v_dim)`` of (..., heads, seq, dim) tensors: every leading
    dimension of the query is a batch."""
    return math.prod(query.shape[:-2]), query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]


def _bhld_cost(query: TensorMeta, key: TensorMeta, value: TensorMeta, masked: bool, dropout_p: float) -> Cost:
    return attention_cost(*_bhld_sizes(query, key, value), masked=masked, dropout=dropout_p > 0)


def attention_backward_cost(batch_heads: int, q_len: int, kv_len: int, qk_dim: int, v_dim: int, *, dropout: bool = False) -> Cost:
    """Backward of ``batch_heads`` attention heads (see the module docstring)."""
    scores = batch_heads * q_len * kv_len
    macs = scores * (3 * qk_dim + 2 * v_dim)
    other = flops_of("attention_scores_backward", n_input=scores, n_output=batch_heads * q_len * v_dim)
    if dropout:
        other += flops_of("native_dropout", n_output=scores)
    return contraction(macs, other)


def sequence_sizes(
    query: TensorMeta, key: TensorMeta, cum_seq_q: TensorMeta | None, max_q: int | None, max_k: int | None
) -> tuple[int, int, int]:
    """``(batch, q_len, kv_len)`` of the fused kernels' (batch, seq, heads, dim) layout; for variable-length
    sequences (``cum_seq_q``: batch + 1 offsets) every sequence is taken at the maximum lengths."""
    if cum_seq_q is not None and max_q is not None and max_k is not None:
        return cum_seq_q.numel - 1, max_q, max_k
    return query.shape[0], query.shape[1], key.shape[1]


@register(aten._scaled_dot_product_flash_attention)
def sdpa_flash_cost(query: TensorMeta, key: TensorMeta, value: TensorMeta, *args: Any, dropout_p: float = 0.0, out: Any, **_: Any) -> Cost:
    # (query, key, value, dropout_p, is_causal, return_debug_mask); the .quantized overload puts three
    # descale tensors before dropout_p, so take the first float after the tensors
    dropout_p = next((a for a in args if isinstance(a, float)), dropout_p)
    return _bhld_cost(query, key, value, False, dropout_p)


def _sdpa_cost(
    query: TensorMeta,
    key: TensorMeta,
    value: TensorMeta,
    attn_bias: TensorMeta | None = None,
    attn_mask: TensorMeta | None = None,
    dropout_p: float = 0.0,
    *,
    out: Any,
    **_: Any,
) -> Cost:
    # the kernels name their mask attn_bias, the CPU kernel and the composite op attn_mask
    return _bhld_cost(query, key, value, attn_bias is not None or attn_mask is not None, dropout_p)


# scaled_dot_product_attention is CompositeImplicit (reaches dispatch as one of the kernels); registered
# for captured graphs
for _packet in (
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_fused_attention_overrideable,
    aten.scaled_dot_product_attention,
):
    register(_packet)(by_name(_packet, _sdpa_cost))


def _sdpa_backward_cost(query: TensorMeta, key: TensorMeta, value: TensorMeta, dropout_p: Any = 0.0, *, out: Any, **_: Any) -> Cost:
    dropout = isinstance(dropout_p, float) and dropout_p > 0
    return attention_backward_cost(*_bhld_sizes(query, key, value), dropout=dropout)


for _packet in (
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_fused_attention_overrideable_backward,
):
    register(_packet)(by_name(_packet, _sdpa_backward_cost))


def _flash_cost(
    query: TensorMeta,
    key: TensorMeta,
    value: TensorMeta,
    cum_seq_q: TensorMeta | None,
    max_q: int,
    max_k: int,
    dropout_p: float = 0.0,
    *,
    out: Any,
    grad_out: TensorMeta | None = None,
    **_: Any,
) -> Cost:
    # layout (batch, seq, heads, dim); variable-length: (total, heads, dim) with cum_seq of batch + 1. The
    # backward (grad_out given) is handed the forward's cum_seq at any length: only a 3-D query is ragged
    ragged = cum_seq_q if grad_out is None or query.ndim == 3 else None
    batch, q_len, kv_len = sequence_sizes(query, key, ragged, max_q, max_k)
    sizes = (batch * query.shape[-2], q_len, kv_len, query.shape[-1], value.shape[-1])
    if grad_out is None:
        return attention_cost(*sizes, dropout=dropout_p > 0)
    return attention_backward_cost(*sizes, dropout=dropout_p > 0)


def _efficient_cost(
    query: TensorMeta,
    key: TensorMeta,
    value: TensorMeta,
    bias: TensorMeta | None,
    cu_seqlens_q: TensorMeta | None,
    max_seqlen_q: int | None,
    max_seqlen_k: int | None,
    dropout_p: float = 0.0,
    *,
    out: Any,
    grad_out_: TensorMeta | None = None,
    **_: Any,
) -> Cost:
    # layout (batch, seq, heads, dim); variable-length: batch 1 holding all sequences, cu_seqlens of b + 1;
    # the backward (grad_out_ given) does not re-add the bias
    batch, q_len, kv_len = sequence_sizes(query, key, cu_seqlens_q, max_seqlen_q, max_seqlen_k)
    sizes = (batch * query.shape[2], q_len, kv_len, query.shape[3], value.shape[3])
    if grad_out_ is None:
        return attention_cost(*sizes, masked=bias is not None, dropout=dropout_p > 0)
    return attention_backward_cost(*sizes, dropout=dropout_p > 0)


for _packet, _body in (
    (aten._flash_attention_forward, _flash_cost),
    (aten._flash_attention_backward, _flash_cost),
    (aten._efficient_attention_forward, _efficient_cost),
    (aten._efficient_attention_backward, _efficient_cost),
):
    register(_packet)(by_name(_packet, _body))


def multi_head_attention_cost(batch: int, q_len: int, kv_len: int, embed_dim: int, num_heads: int, *, masked: bool) -> Cost:
    """nn.MultiheadAttention end to end: q / k / v in-projections, both products, output projection.

    Each projection is a (tokens x D) @ (D x D) product with a bias add per output element.
    """
    d = embed_dim
    projected_tokens = batch * (q_len + 2 * kv_len + q_len)  # q, k, v in, and the output projection
    projections = contraction(projected_tokens * d * d, projected_tokens * d)
    heads = attention_cost(batch * num_heads, q_len, kv_len, d // num_heads, d // num_heads, masked=masked)
    return projections + heads


@register(aten._native_multi_head_attention)
def native_multi_head_attention_cost(
    query: TensorMeta,
    key: TensorMeta,
    value: TensorMeta,
    embed_dim: int,
    num_head: int,
    qkv_weight: TensorMeta,
    qkv_bias: TensorMeta,
    proj_weight: TensorMeta,
    proj_bias: TensorMeta,
    mask: TensorMeta | None = None,
    need_weights: bool = True,
    average_attn_weights: bool = True,
    *args: Any,
    out: Any,
    **_: Any,
) -> Cost:
    # the inference fast path of nn.MultiheadAttention (batch_first, eval, no grad)
    batch = math.prod(query.shape[:-2])
    cost = multi_head_attention_cost(batch, query.shape[-2], key.shape[-2], embed_dim, num_head, masked=mask is not None)
    weights = out[1] if isinstance(out, (tuple, list)) else None
    if need_weights and average_attn_weights and weights is not None:
        # averaging the returned weights over heads: an add per score, a divide per averaged weight
        cost += Cost(flops=batch * num_head * query.shape[-2] * key.shape[-2] + weights.numel)
    return cost


@register(aten._transform_bias_rescale_qkv)
def transform_bias_rescale_qkv_cost(qkv: TensorMeta, qkv_bias: TensorMeta, num_heads: int, *args: Any, out: Any, **_: Any) -> Cost:
    # the CPU fast path's split of the packed projection into heads: the bias added to every element, the
    # query's third scaled by 1 / sqrt(head size); the generic rule counts its bytes (qkv and bias read, q, k, v written)
    return Cost(flops=qkv.numel + qkv.numel // 3)


@register(aten._transformer_encoder_layer_fwd)
def transformer_encoder_layer_cost(
    src: TensorMeta,
    embed_dim: int,
    num_heads: int,
    qkv_weight: TensorMeta,
    qkv_bias: TensorMeta,
    proj_weight: TensorMeta,
    proj_bias: TensorMeta,
    use_gelu: bool,
    norm_first: bool,
    eps: float,
    norm_weight_1: TensorMeta,
    norm_bias_1: TensorMeta,
    norm_weight_2: TensorMeta,
    norm_bias_2: TensorMeta,
    ffn_weight_1: TensorMeta,
    ffn_bias_1: TensorMeta,
    ffn_weight_2: TensorMeta,
    ffn_bias_2: TensorMeta,
    mask: TensorMeta | None = None,
    *args: Any,
    out: Any,
    **_: Any,
) -> Cost:
    # the inference fast path of nn.TransformerEncoderLayer: self-attention block + feed-forward block,
    # each with a residual add and a layer norm (with weight and bias)
    seq = src.shape[-2]
    batch = math.prod(src.shape[:-2])
    tokens = batch * seq
    hidden = ffn_weight_1.shape[0]
    attention = multi_head_attention_cost(batch, seq, seq, embed_dim, num_heads, masked=mask is not None)
    feed_forward = contraction(2 * tokens * embed_dim * hidden, tokens * (hidden + embed_dim))
    activation = flops_of("gelu" if use_gelu else "relu", n_output=tokens * hidden)
    n = tokens * embed_dim
    norms = 2 * flops_of("layer_norm", n_input=n) + 2 * flops_of("mul", n_output=n) + 2 * flops_of("add", n_output=n)
    residuals = 2 * flops_of("add", n_output=n)
    return attention + feed_forward + Cost(flops=activation + norms + residuals)


def causal_work_fraction(q_len: int, kv_len: int, tile: int = CAUSAL_TILE, window: int | None = None) -> float:
    """Share of the L x S score square a tiled causal kernel computes (top-left aligned mask).

    Query tile ``i`` (rows ``i*t .. (i+1)*t - 1``) needs the key tiles from column ``i*t - W + 1`` (a
    sliding window of ``W`` keys; 0 without one) up to column ``(i+1)*t - 1``.
    At L = S = 8192 and t = 128: 64 query tiles, sum of 1..64 key tiles = 2080 of 64 x 64 = 0.508.
    With W = 256 as well: tiles 0 and 1 need 1 and 2 key tiles, every later one 3: 189 of 4096 = 0.046.
    """
    if q_len <= 0 or kv_len <= 0:
        return 1.0
    q_tiles, kv_tiles = math.ceil(q_len / tile), math.ceil(kv_len / tile)
    done = 0
    for i in range(q_tiles):
        last = min(kv_tiles - 1, ((i + 1) * tile - 1) // tile)
        first = 0 if window is None else max(0, i * tile - window + 1) // tile
        done += max(0, last - first + 1)
    return done / (q_tiles * kv_tiles)


def causal_useful_fraction(q_len: int, kv_len: int, window: int | None = None) -> float:
    """Share of the L x S score square a causal mask leaves unmasked (top-left aligned, as ``is_causal``).

    Query ``i`` sees keys ``max(0, i - W + 1) .. min(i, S - 1)`` (``W``: a sliding window's keys, as
    transformers' ``sliding_window``; none: all earlier keys). For L = S = 2048 without a window:
    2048 x 2049 / 2 = 2,098,176 of 4,194,304 scores, 0.500244 (a half, plus the diagonal's half). With
    W = 4 over L = S = 8: 1 + 2 + 3 + 4 x 5 = 26 of 64, about W / L = 0.5 less the first rows' triangle.
    """
    if q_len <= 0 or kv_len <= 0:
        return 1.0
    # numpy, not torch: a formula runs inside the dry run's dispatch (a FakeTensor mode), where a torch
    # tensor made here would be fake and its sum unreadable
    rows = np.arange(q_len, dtype=np.int64)
    hi = np.minimum(rows, kv_len - 1)
    lo = np.maximum(rows - window + 1, 0) if window is not None else np.zeros_like(rows)
    seen = int(np.maximum(hi - lo + 1, 0).sum())
    return seen / (q_len * kv_len)


#: (position of ``is_causal``, of the query, of the key) among each fused kernel's positional arguments,
#: forward and backward: a causal backward skips the same tiles as its forward.
_CAUSAL_ARGUMENTS = {
    "_scaled_dot_product_flash_attention": (4, 0, 1),
    "_scaled_dot_product_efficient_attention": (6, 0, 1),
    "_scaled_dot_product_cudnn_attention": (6, 0, 1),
    "_scaled_dot_product_flash_attention_for_cpu": (4, 0, 1),
    "scaled_dot_product_attention": (5, 0, 1),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (7, 1, 2),
    "_scaled_dot_product_flash_attention_backward": (11, 1, 2),
    "_scaled_dot_product_efficient_attention_backward": (11, 1, 2),
    "_scaled_dot_product_cudnn_attention_backward": (14, 1, 2),
}


#: The fused attention kernels (forward and backward) whose ``is_causal`` skips masked tiles.
CAUSAL_OPS = frozenset(_CAUSAL_ARGUMENTS)


def causal_lengths(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int] | None:
    """``(L, S)`` of a causal attention call (``is_causal=True``), forward or backward; ``None`` for any
    other call."""
    name = getattr(getattr(func, "overloadpacket", func), "__name__", "")
    positions = _CAUSAL_ARGUMENTS.get(name)
    if positions is None:
        return None
    flag, q, k = positions
    causal = kwargs.get("is_causal", args[flag] if len(args) > flag else False)
    if causal is not True:
        return None
    return args[q].shape[-2], args[k].shape[-2]
