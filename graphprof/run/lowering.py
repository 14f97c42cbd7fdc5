"""Lowering: cost a model as its *target* runs it, not as the profiling machine's dispatcher decomposes it.

The dry run records whatever aten ops the dispatcher picks on the machine doing the profiling. For
scaled-dot-product attention on a machine with no GPU that is the CPU "math" path (``bmm``, softmax,
copies over the whole L x S score matrix), even for FakeTensors that claim to be on CUDA. A GPU runs a
fused flash or memory-efficient kernel that reads q, k, v (and the mask) and writes only the output.

For a CUDA target, :func:`lowering_context` returns a ``TorchFunctionMode`` that intercepts
``torch.nn.functional.scaled_dot_product_attention`` *before* the dispatcher decomposes it and calls the
fused aten kernel CUDA's backend selection would choose:

* ``aten._scaled_dot_product_flash_attention`` for float16 / bfloat16 without an explicit mask and a
  head dimension of at most 256 (causal, dropout and grouped-query attention included: the flash kernel
  reads the fewer key / value heads directly);
* ``aten._scaled_dot_product_efficient_attention`` otherwise (float32, or an explicit mask; a boolean mask
  is first turned into an additive one, and grouped-query key / value heads are repeated, as the CUDA
  backend does).

Their meta kernels give the output's shape on FakeTensors (CPU fakes and the meta device alike), so the
recorder sees one fused op. ``nn.MultiheadAttention``: while a ``TorchFunctionMode`` is active its fused
fast path (``torch._native_multi_head_attention``) is not taken and the module calls
``F.multi_head_attention_forward``, whose inner calls a mode does not see; so that function is lowered
itself when called without weights (``need_weights=False``). Where the module's CUDA fast path would run
(batch-first self-attention, no mask, no grad) it is costed as that path runs: one packed projection,
fused attention on views of its chunks, the output projection. Otherwise as the functional path runs on
a GPU: projections, fused attention with the masks merged into one additive mask, out-projection.
``torch._native_multi_head_attention`` called directly is lowered the same way. With weights, the GPU too
computes the score matrix, and the decomposition is kept.

Inputs the fused kernels do not accept (3-d inputs, nested tensors, mismatched head dimensions) keep the
decomposition, as on the GPU.

A CPU target keeps the decomposition it really runs, except for two fused calls the CPU makes that the dry run's
meta tensors do not reach by themselves (:class:`NativeAttentionMode`); the op list, the
tables and the predictor then see the call the CPU runs, and the MACs are the same:

* ``nn.MultiheadAttention``'s fast path, one ``aten._native_multi_head_attention`` call. The meta device fails the
  module's device check, so without help the dry run records its slow path (projections, ``bmm``,
  ``_safe_softmax``, copies). The mode calls the fused op where the module's own checks would have taken it
  (self-attention, batched, batch first, even heads, eval, no grad, packed projection with a bias, no mask). With a
  mask the decomposition is kept.
* ``F.scaled_dot_product_attention``: the CPU runs its flash kernel, ``aten._scaled_dot_product_flash_attention_for_cpu``,
  where torch's backend choice (``torch._fused_sdp_choice``, asked with stand-ins of the same dtypes and flags) picks
  it, in training as in eval; the meta device always gives the math path (``bmm``, softmax over the whole score
  matrix).
MACs and FLOPs of attention do not depend on the lowering (one formula, :mod:`graphprof.formulas.attention`);
bytes and the peak of live activations do.

Example::

    >>> with lowering_context("cuda"):           # inside the dry run's FakeTensorMode
    ...     out = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # records one flash op
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

from graphprof.base.choices import Lowering, Phase
from graphprof.errors import InvalidInputError

__all__ = [
    "parse_lowering",
    "lowering_context",
    "FusedAttentionMode",
    "NativeAttentionMode",
    "GROUPED_MM",
    "grouped_mm_any_dtype",
    "moe_note",
]

aten = torch.ops.aten


_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_FLASH_MAX_HEAD_DIM = 256


def parse_lowering(target: str | Lowering | None) -> Lowering:
    """``"cuda"``/``"gpu"``/``"cuda:1"`` -> :attr:`Lowering.CUDA`; ``None``/``"cpu"``/``"meta"`` -> :attr:`Lowering.CPU`."""
    if isinstance(target, Lowering):
        return target
    if target is None:
        return Lowering.CPU
    key = str(target).strip().lower().split(":")[0]
    if key in ("cuda", "gpu"):
        return Lowering.CUDA
    if key in ("cpu", "meta"):
        return Lowering.CPU
    raise InvalidInputError(f"unknown target {target!r}; choose cpu or cuda")


def _fused_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor | None:
    """The fused CUDA kernel's output for these inputs, or ``None`` where CUDA would decompose too."""
    tensors = (query, key, value)
    if any(t.dim() != 4 or t.is_nested for t in tensors) or query.shape[-1] != key.shape[-1]:
        return None
    if attn_mask is not None and (is_causal or not isinstance(attn_mask, torch.Tensor)):
        return None  # an invalid combination: let torch raise its own error
    heads, kv_heads = query.shape[1], key.shape[1]
    if heads != kv_heads and (not enable_gqa or heads % kv_heads or value.shape[1] != kv_heads):
        return None
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    head_dim = query.shape[-1]
    if attn_mask is None and query.dtype in _FLASH_DTYPES and head_dim <= _FLASH_MAX_HEAD_DIM and value.shape[-1] == head_dim:
        return cast(torch.Tensor, aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False, scale=scale)[0])
    if heads != kv_heads:  # the efficient kernel needs one key / value head per query head
        key = key.repeat_interleave(heads // kv_heads, dim=1)
        value = value.repeat_interleave(heads // kv_heads, dim=1)
    bias = None
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:  # CUDA turns a boolean mask into an additive one
            bias = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device)
            bias = bias.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            bias = attn_mask
        bias = bias.expand(query.shape[0], heads, query.shape[-2], key.shape[-2])
    return cast(
        torch.Tensor, aten._scaled_dot_product_efficient_attention(query, key, value, bias, grad, dropout_p, is_causal, scale=scale)[0]
    )


def _packed_self_attention(
    x: torch.Tensor,
    num_heads: int,
    qkv_weight: torch.Tensor,
    qkv_bias: torch.Tensor | None,
    proj_weight: torch.Tensor,
    proj_bias: torch.Tensor | None,
) -> torch.Tensor | None:
    """The CUDA fast path of self-attention on a batch-first ``x`` (B, T, D): one packed projection,
    fused attention on strided views of its three chunks, and the output projection on the fused
    kernel's (already token-major) output; no copies in between."""
    batch, tokens, embed_dim = x.shape
    head_dim = embed_dim // num_heads
    chunks = F.linear(x, qkv_weight, qkv_bias).chunk(3, -1)
    q, k, v = (c.view(batch, tokens, num_heads, head_dim).transpose(1, 2) for c in chunks)
    out = _fused_sdpa(q, k, v)
    if out is None:
        return None
    return F.linear(out.transpose(1, 2).reshape(batch, tokens, embed_dim), proj_weight, proj_bias)


def _fast_path_applies(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, embed_dim: int, num_heads: int) -> bool:
    """Self-attention with a head dimension that is a multiple of 8: the fused branch of the CUDA fast path."""
    return query is key and key is value and query.dim() == 3 and (embed_dim // num_heads) % 8 == 0


def _fused_native_mha(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    embed_dim: int,
    num_head: int,
    qkv_weight: torch.Tensor,
    qkv_bias: torch.Tensor,
    proj_weight: torch.Tensor,
    proj_bias: torch.Tensor,
    mask: torch.Tensor | None = None,
    need_weights: bool = True,
    average_attn_weights: bool = True,
    mask_type: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """``torch._native_multi_head_attention`` as CUDA runs it. Only its fused branch (self-attention, no
    mask, no weights) differs from the decomposition: with a mask, CUDA too computes the score matrix."""
    if need_weights or mask is not None or not _fast_path_applies(query, key, value, embed_dim, num_head):
        return None
    out = _packed_self_attention(query, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias)
    return None if out is None else (out, None)


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A mask in nn.MultiheadAttention's sense (``True`` = masked out) as an additive float mask."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    return mask.to(dtype)


def _mha_projections(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    embed_dim: int,
    in_proj_weight: torch.Tensor | None,
    in_proj_bias: torch.Tensor | None,
    separate: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None] | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The query, key and value projections of ``F.multi_head_attention_forward`` (sequence first).

    ``separate`` holds the three weights of ``use_separate_proj_weight``; else ``in_proj_weight`` packs
    them, as one projection split by a copy for self-attention, or three for cross-attention.
    """
    if separate is not None:
        q_proj_weight, k_proj_weight, v_proj_weight = separate
        assert q_proj_weight is not None and k_proj_weight is not None and v_proj_weight is not None
        b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        return (F.linear(query, q_proj_weight, b_q), F.linear(key, k_proj_weight, b_k), F.linear(value, v_proj_weight, b_v))
    assert in_proj_weight is not None
    if query is key and key is value:  # self-attention: one packed projection, split by a copy
        packed = F.linear(query, in_proj_weight, in_proj_bias)
        packed = packed.unflatten(-1, (3, embed_dim)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        return packed[0], packed[1], packed[2]
    w_q, w_k, w_v = in_proj_weight.chunk(3)
    b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
    return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)


def _mha_mask(
    attn_mask: torch.Tensor | None, key_padding_mask: torch.Tensor | None, dtype: torch.dtype, shape: tuple[int, int, int, int]
) -> torch.Tensor | None:
    """One additive mask for SDPA from ``attn_mask`` and ``key_padding_mask``; ``shape`` is
    ``(batch, heads, query length, key length)``."""
    batch, num_heads, q_len, kv_len = shape
    mask = None
    if attn_mask is not None:
        mask = _additive(attn_mask, dtype)
        mask = mask.view(batch, num_heads, q_len, kv_len) if mask.dim() == 3 else mask
    if key_padding_mask is not None:
        padding = _additive(key_padding_mask, dtype).view(batch, 1, 1, kv_len)
        mask = padding if mask is None else mask + padding
    return mask


def _fused_mha_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: torch.Tensor | None,
    in_proj_bias: torch.Tensor | None,
    bias_k: torch.Tensor | None,
    bias_v: torch.Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: torch.Tensor,
    out_proj_bias: torch.Tensor | None,
    training: bool = True,
    key_padding_mask: torch.Tensor | None = None,
    need_weights: bool = True,
    attn_mask: torch.Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: torch.Tensor | None = None,
    k_proj_weight: torch.Tensor | None = None,
    v_proj_weight: torch.Tensor | None = None,
    static_k: torch.Tensor | None = None,
    static_v: torch.Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[torch.Tensor, None] | None:
    """``F.multi_head_attention_forward`` without weights, as a GPU runs it: projections around fused SDPA.

    The forms with extra key / value rows (``bias_k``, ``add_zero_attn``, ``static_k``) and unbatched
    inputs keep the decomposition.
    """
    if (
        need_weights
        or query.dim() != 3
        or bias_k is not None
        or bias_v is not None
        or add_zero_attn
        or static_k is not None
        or static_v is not None
    ):
        return None
    q_len, batch, embed_dim = query.shape
    kv_len = key.shape[0]
    batch_first = query.transpose(0, 1)
    if (
        _fast_path_applies(query, key, value, embed_dim, num_heads)
        and batch_first.is_contiguous()  # the module was batch_first: nn.MultiheadAttention's fast path
        and not use_separate_proj_weight
        and in_proj_weight is not None
        and key_padding_mask is None
        and attn_mask is None
        and not (training and dropout_p > 0)
        and not torch.is_grad_enabled()
    ):
        fast = _packed_self_attention(batch_first, num_heads, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias)
        if fast is not None:
            return fast.transpose(0, 1), None
    head_dim = embed_dim // num_heads
    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    q, k, v = _mha_projections(query, key, value, embed_dim, in_proj_weight, in_proj_bias, separate)

    def heads(x: torch.Tensor, length: int) -> torch.Tensor:
        return x.view(length, batch * num_heads, head_dim).transpose(0, 1).view(batch, num_heads, length, head_dim)

    causal = is_causal and key_padding_mask is None and attn_mask is None
    mask = _mha_mask(attn_mask, key_padding_mask, q.dtype, (batch, num_heads, q_len, kv_len))
    out = _fused_sdpa(heads(q, q_len), heads(k, kv_len), heads(v, kv_len), mask, dropout_p if training else 0.0, causal)
    if out is None:
        return None
    out = out.permute(2, 0, 1, 3).contiguous().view(batch * q_len, embed_dim)
    return F.linear(out, out_proj_weight, out_proj_bias).view(q_len, batch, embed_dim), None


class _RoutingMode(TorchFunctionMode):
    """A mode that hands each function of :attr:`routes` to its lowering, and runs the function itself where the
    lowering declines (returns ``None``) or none is named."""

    routes: Mapping[Any, Callable[..., Any]] = MappingProxyType({})

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        lowered = self.routes.get(func)
        out = None if lowered is None else lowered(*args, **kwargs)
        return func(*args, **kwargs) if out is None else out


class FusedAttentionMode(_RoutingMode):
    """Routes attention to the fused kernels a CUDA GPU runs (see the module docstring)."""

    routes = MappingProxyType({
        F.scaled_dot_product_attention: _fused_sdpa, F.multi_head_attention_forward: _fused_mha_forward,
        torch._native_multi_head_attention: _fused_native_mha,
    })  # fmt: skip


#: ``F.multi_head_attention_forward``'s parameters, to read a call's arguments by name
_MHA_FORWARD = inspect.signature(F.multi_head_attention_forward)


def _cpu_fast_path(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """``F.multi_head_attention_forward`` (sequence first) as ``nn.MultiheadAttention``'s CPU fast path runs it,
    where the module's own checks would have taken that path; ``None`` where they would not (or a mask is given)."""
    call = _MHA_FORWARD.bind(*args, **kwargs)
    call.apply_defaults()
    a = call.arguments
    query, w, b, out_w, out_b = a["query"], a["in_proj_weight"], a["in_proj_bias"], a["out_proj_weight"], a["out_proj_bias"]
    tensors = [t for t in (query, w, b, out_w, out_b) if t is not None]
    taken = (
        torch.backends.mha.get_fastpath_enabled()
        and query.dim() == 3 and query is a["key"] and a["key"] is a["value"]
        and query.transpose(0, 1).is_contiguous()  # the module was batch_first (it transposed a batch-first input)
        and w is not None and b is not None and out_b is not None and not a["use_separate_proj_weight"]
        and query.dtype == w.dtype == b.dtype
        and not a["training"] and a["num_heads"] % 2 == 0
        and a["bias_k"] is None and a["bias_v"] is None and not a["add_zero_attn"]
        and a["key_padding_mask"] is None and a["attn_mask"] is None and not a["is_causal"]
        and not torch.is_autocast_enabled()
        and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
    )  # fmt: skip
    if not taken:
        return None
    with _disable_current_modes():  # the fused call reads the module's batch-first input: these views are not ops it runs
        batch_first = query.transpose(0, 1)
    out, weights = torch._native_multi_head_attention(
        batch_first, batch_first, batch_first, a["embed_dim_to_check"], a["num_heads"], w, b, out_w, out_b, None,
        a["need_weights"], a["average_attn_weights"],
    )  # fmt: skip
    with _disable_current_modes():
        seq_first = out.transpose(0, 1)
    return seq_first, weights if a["need_weights"] else None


class _SdpaCall(NamedTuple):
    """The arguments of ``F.scaled_dot_product_attention``, by position or by name as a call gave them."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_mask: torch.Tensor | None = None
    dropout_p: float = 0.0
    is_causal: bool = False
    scale: float | None = None
    enable_gqa: bool = False


def _cpu_flash_sdpa(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """``F.scaled_dot_product_attention`` as the CPU runs it: its flash kernel
    (``aten._scaled_dot_product_flash_attention_for_cpu``) where torch's own backend choice picks it for tensors of
    these dtypes, mask and flags (in training too: the kernel has its backward); ``None`` (the decomposition) where
    it picks the math path, and for grouped-query attention."""
    query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa = _SdpaCall(*args, **kwargs)
    if enable_gqa or query.dim() != 4 or any(t.dim() != 4 for t in (key, value)):
        return None
    if any(t.stride(-1) != 1 for t in (query, key, value)) or query.shape[-1] != key.shape[-1]:
        return None
    with _disable_current_modes():  # ask torch's chooser with one-element stand-ins of the same dtypes and flags
        tiny = [torch.empty((1, 1, 1, t.shape[-1]), dtype=t.dtype) for t in (query, key, value)]
        mask = None if attn_mask is None else torch.empty((1, 1, 1, 1), dtype=attn_mask.dtype)
        choice = torch.ops.aten._fused_sdp_choice.default(*tiny, mask, dropout_p, is_causal, scale=scale)
    if choice != torch.nn.attention.SDPBackend.FLASH_ATTENTION.value:
        return None
    if attn_mask is not None and attn_mask.dtype == torch.bool:  # the kernel takes an additive mask, as eager converts it
        attn_mask = _additive(attn_mask.logical_not(), query.dtype)
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )
    return cast(torch.Tensor, out[0])


class NativeAttentionMode(_RoutingMode):
    """Routes attention to the fused calls the CPU runs (see the module docstring)."""

    routes = MappingProxyType({F.multi_head_attention_forward: _cpu_fast_path, F.scaled_dot_product_attention: _cpu_flash_sdpa})


def lowering_context(lowering: Lowering | str | None) -> contextlib.AbstractContextManager[Any]:
    """The context to run the dry run in for ``lowering``: the fused-attention mode of each (CUDA's kernels, or
    the fused calls the CPU makes)."""
    if parse_lowering(lowering) is Lowering.CUDA:
        return FusedAttentionMode()
    return NativeAttentionMode()


aten = torch.ops.aten


#: the grouped products :func:`grouped_mm_any_dtype` stands in for (the run loop checks membership itself, per op)
GROUPED_MM = frozenset({aten._grouped_mm.default})


def grouped_mm_any_dtype(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)``; for a float32 ``_grouped_mm`` on FakeTensors (whose meta kernel refuses
    float32), the same shapes from a bfloat16 call, returned in the operands' dtype."""
    if func not in GROUPED_MM or not _needs_low_precision(args[0]):
        return func(*args, **kwargs)
    dtype = args[0].dtype
    low = [_bf16(a) for a in args]
    extra = {k: _bf16(v) for k, v in kwargs.items() if k != "out_dtype"}
    return func(*low, **extra).to(dtype)


def _needs_low_precision(t: Any) -> bool:
    fake = isinstance(t, FakeTensor) or (isinstance(t, torch.Tensor) and t.is_meta)
    return fake and t.dtype in (torch.float32, torch.float64)


def _bf16(value: Any) -> Any:
    return value.to(torch.bfloat16) if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def _top_k(model: nn.Module) -> int | None:
    config = getattr(model, "config", None)
    for name in ("num_experts_per_tok", "moe_topk", "top_k"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    for module in model.modules():
        value = getattr(module, "top_k", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def moe_note(rows: Sequence[Any], model: nn.Module) -> str | None:
    """A note on the grouped (expert) products of ``rows`` (LayerRows), or ``None`` when there are none."""
    active = 0
    experts = set()
    calls = 0
    for row in rows:
        for op in row.ops:
            if op.op != "aten._grouped_mm" or op.phase is not Phase.FORWARD or len(op.input_shapes) < 2:
                continue
            weight = op.input_shapes[1]
            if len(weight) != 3 or len(op.input_shapes[0]) != 2:
                continue  # batched 3-D products: no routing involved
            calls += 1
            active += op.cost.macs
            experts.add(weight[0])
    if not calls:
        return None
    top_k = _top_k(model)
    note = (
        f"mixture of experts: {calls} grouped expert products, {active:,} MACs for the active experts "
        f"(each token through its {top_k or 'top-k'} routed experts; the count does not depend on which "
        "experts the router picks, so no routing balance is assumed)"
    )
    if top_k and len(experts) == 1:
        (num_experts,) = experts
        note += f"; with all {num_experts} experts on every token: {active * num_experts // top_k:,} MACs"
    return note
