"""The calls a fused CPU kernel makes inside itself, for the predictor: each priced by its own kind's model.

The CPU runs some fused aten ops as one dispatched call that makes several of its own: in eval without grad,
``nn.MultiheadAttention``'s fast path is one ``aten._native_multi_head_attention``, and inside it (``torch.profiler``
shows them as its children, and :mod:`tests.test_native_attention` checks the list against a real run) a packed
projection, the split into heads, two batched products around a softmax, a copy back to token order and the output
projection. The op list, the counts and the per-op tables show the one call that runs; its MACs are its formula's
(:mod:`graphprof.formulas.attention`), which equal the parts' sum. What one such call costs in time is no single
kind's law (its time is mostly the projections', which are products of another shape than attention's), so the
predictor prices each part by its own kind (:func:`graphprof.devices.predict.predict`), as the op grid's loops ran
(back to back, on operands the part before just wrote, with no module call or Python between), and the calibration
takes no sample from the fused call (:mod:`graphprof.calibrate.samples`). Priced in context instead, the parts of
ViT-B/16's attention came to 16.5 ms a call against about 4.8 ms measured (the batched products' in-context law,
learned on Swin's and MaxViT's small products, ran 40 times their loop's time); as the loops ran, 5.7 ms.

Each part is an :class:`~graphprof.cost.result.OpRecord` costed by the registry like any recorded call: no second
formula. A fused call outside the forms below (a mask, the attention weights returned) has no parts and is priced
by its own kind.

Worked example, ViT-B/16 at batch 1 (197 tokens, width 768, 12 heads of 64): ``mm`` 197 x 768 x 2304
(348.6 M MACs), ``_transform_bias_rescale_qkv`` on 197 x 2304, ``bmm`` 12 x 197 x 64 x 197 (29.8 M), ``_softmax``
on 12 x 197 x 197, ``bmm`` 12 x 197 x 197 x 64 (29.8 M), ``clone`` of 197 x 12 x 64, ``addmm`` 197 x 768 x 768
(116.2 M): 524.4 M MACs, the fused call's formula's (4 x 197 x 768^2 + 2 x 197^2 x 768).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from graphprof.base.choices import Phase
from graphprof.cost.result import OpRecord
from graphprof.formulas import TensorMeta
from graphprof.run.propagate import OpCall

__all__ = ["fused_parts"]

aten = torch.ops.aten


def _dense(shape: tuple[int, ...], dtype: torch.dtype) -> TensorMeta:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return TensorMeta(shape, dtype, tuple(reversed(strides)))


def _transposed(t: TensorMeta) -> TensorMeta:
    """``t.t()`` of a dense matrix: a view with its strides swapped."""
    rows, cols = t.shape
    return TensorMeta((cols, rows), t.dtype, (1, cols))


class _NativeMha(NamedTuple):
    """The arguments of ``aten._native_multi_head_attention``, by position or by name, with its schema's defaults."""

    query: Any
    key: Any
    value: Any
    embed_dim: int
    num_head: int
    qkv_weight: Any
    qkv_bias: Any
    proj_weight: Any
    proj_bias: Any
    mask: Any = None
    need_weights: bool = True
    average_attn_weights: bool = True
    mask_type: int | None = None


def _native_mha(call: OpCall) -> list[OpCall] | None:
    """The CPU kernel's calls for self-attention without a mask or returned weights (the form
    ``nn.MultiheadAttention`` takes in a vision or text encoder), else ``None``."""
    a = _NativeMha(*call.args, **call.kwargs)
    query, heads, qkv_weight, qkv_bias, proj_weight, proj_bias = a.query, a.num_head, a.qkv_weight, a.qkv_bias, a.proj_weight, a.proj_bias
    if a.mask is not None or a.need_weights:
        return None
    if not all(isinstance(t, TensorMeta) for t in (query, a.key, a.value, qkv_weight, qkv_bias, proj_weight)) or query.ndim != 3:
        return None
    if query.shape != a.key.shape or a.key.shape != a.value.shape or not isinstance(heads, int) or heads < 1:
        return None
    batch, tokens, width = query.shape
    head, dt, rows = width // heads, query.dtype, batch * tokens
    qkv = _dense((rows, 3 * width), dt)
    split = tuple(_dense((batch, heads, tokens, head), dt) for _ in range(3))
    scores = _dense((batch * heads, tokens, tokens), dt)
    mixed = _dense((batch * heads, tokens, head), dt)
    token_major = TensorMeta((batch, tokens, heads, head), dt, (heads * tokens * head, head, tokens * head, 1))
    return [
        OpCall(aten.mm.default, (_dense((rows, width), dt), _transposed(qkv_weight)), {}, qkv, call.phase),
        OpCall(aten._transform_bias_rescale_qkv.default, (_dense((batch, tokens, 3 * width), dt), qkv_bias, heads), {}, split, call.phase),
        OpCall(aten.bmm.default, (_dense((batch * heads, tokens, head), dt), TensorMeta((batch * heads, head, tokens), dt, (tokens * head, 1, head))), {}, scores, call.phase),
        OpCall(aten._softmax.default, (_dense((batch, heads, tokens, tokens), dt), -1, False), {}, _dense((batch, heads, tokens, tokens), dt), call.phase),
        OpCall(aten.bmm.default, (scores, _dense((batch * heads, tokens, head), dt)), {}, mixed, call.phase),
        OpCall(aten.clone.default, (token_major,), {"memory_format": torch.contiguous_format}, _dense((batch, tokens, heads, head), dt), call.phase),
        OpCall(aten.addmm.default, (proj_bias, _dense((rows, width), dt), _transposed(proj_weight)), {}, _dense((rows, width), dt), call.phase),
    ]  # fmt: skip


#: The fused ops whose inner calls are known, with what gives them.
_PARTS: dict[object, Callable[[OpCall], list[OpCall] | None]] = {aten._native_multi_head_attention.default: _native_mha}


def fused_parts(call: OpCall, record: Callable[[OpCall], OpRecord]) -> tuple[OpRecord, ...]:
    """The records of the calls ``call`` makes inside its kernel (``record`` costs each one), or ``()`` where
    it is not a fused op this module knows, or not in a form it knows. Forward calls only: a backward runs
    no fused kernel."""
    parts = _PARTS.get(call.func)
    if parts is None or call.phase is not Phase.FORWARD:
        return ()
    calls = parts(call)
    return () if calls is None else tuple(record(c) for c in calls)
