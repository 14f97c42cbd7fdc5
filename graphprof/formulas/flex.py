"""``flex_attention``: the higher-order operator, forward and backward, counted from its block mask.

A ``BlockMask`` tiles the L x S score square into blocks of ``Q_BLOCK x KV_BLOCK`` and lists, for each
query block row, the key blocks the kernel visits: *partial* blocks (``kv_num_blocks`` /
``kv_indices``: the mask function is applied inside them) and *full* blocks (``full_kv_num_blocks``:
every score kept). Three figures come out of one call, per query head (grouped-query heads counted per
query head, as for SDPA):

* **counted**: the full square, ``L x S x (E + E_v)`` MACs forward, ``L x S x (3 E + 2 E_v)`` backward,
  as ``torch.utils.flop_counter`` counts flex attention (and graphprof counts every attention);
* **executed**: the blocks the kernel visits (partial + full), each clipped at the sequence's edge;
* **useful**: the scores the mask keeps: the full blocks, plus the kept elements of each partial block
  (the mask function evaluated on that block's indices: the structure, never the model's tensors).

Executed and useful reach :attr:`~graphprof.cost.result.Profile.executed_flops` /
``useful_flops`` as fractions of the counted FLOPs (:func:`flex_fractions`). The block counts are
*values*: :func:`summarise_flex` reads them while the call is seen (a block mask built outside the dry
run holds real tensors), and rebuilds them from the mask function when the mask was built on
FakeTensors. Where neither works, :attr:`FlexBlocks.exact` is ``False`` and executed = useful = counted.
The ``score_mod`` is a Python function the dry run does not trace; its per-score arithmetic is not in
the count (the softmax's is, at the ``attention_scores`` rate).

Example: a causal mask over L = S = 256 in blocks of 128 (batch 1, one head): the kernel visits
1 + 2 = 3 of 4 blocks (49,152 of 65,536 pairs); the mask keeps 256 x 257 / 2 = 32,896 pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

from graphprof.formulas.attention import attention_backward_cost, attention_cost
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register, register_summary

__all__ = ["FlexBlocks", "flex_blocks", "summarise_flex", "flex_fractions", "flex_attention_cost", "flex_attention_backward_cost"]

#: The block-mask argument's position among the operator's arguments.
_BLOCK_MASK_POSITION = {flex_attention: 4, flex_attention_backward: 9}
#: Past this many score pairs the mask function is not evaluated again on a FakeTensor mask.
_MAX_REBUILT_PAIRS = 1 << 26


@dataclass(frozen=True)
class FlexBlocks:
    """What a block mask says, in integers: score pairs executed and kept, summed over its batch and
    heads (``mask_batch_heads``: 1 for a mask broadcast over both)."""

    q_len: int
    kv_len: int
    mask_batch_heads: int
    executed_pairs: int
    useful_pairs: int
    exact: bool = True

    @property
    def counted_pairs(self) -> int:
        return self.mask_batch_heads * self.q_len * self.kv_len


def _tensor_values(t: Any) -> torch.Tensor | None:
    """A real copy of ``t`` (a FakeTensor made from a constant gives its constant), else ``None``."""
    from torch._subclasses.fake_tensor import is_fake

    if not isinstance(t, torch.Tensor):
        return None
    if is_fake(t):
        constant = getattr(t, "constant", None)
        return constant if isinstance(constant, torch.Tensor) else None
    return None if t.is_meta else t


def _visited(num: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Boolean ``(..., q_blocks, max_blocks)``: which ``indices`` entries a row visits (the first ``num``)."""
    return torch.arange(indices.shape[-1]) < num.unsqueeze(-1)


def _block_pairs(visit: torch.Tensor, indices: torch.Tensor, q_len: int, kv_len: int, bq: int, bkv: int) -> int:
    """Score pairs of the visited blocks, each block clipped at the sequence's edge."""
    rows = (q_len - torch.arange(indices.shape[-2]) * bq).clamp(0, bq).unsqueeze(-1)
    cols = (kv_len - indices.long() * bkv).clamp(0, bkv)
    return int((rows * cols * visit).sum())


def _kept_in_partial(visit: torch.Tensor, indices: torch.Tensor, mask_mod: Any, q_len: int, kv_len: int, bq: int, bkv: int) -> int:
    """Pairs the mask function keeps inside the visited partial blocks (evaluated on their indices)."""
    where = visit.nonzero()  # (P, ndim): batch, head, q block, slot
    if where.shape[0] == 0:
        return 0
    b, h, qb = where[:, 0], where[:, 1], where[:, 2]
    kb = indices[b, h, qb, where[:, 3]].long()
    q_idx = (qb * bq).view(-1, 1, 1) + torch.arange(bq).view(1, -1, 1)
    kv_idx = (kb * bkv).view(-1, 1, 1) + torch.arange(bkv).view(1, 1, -1)
    inside = (q_idx < q_len) & (kv_idx < kv_len)
    kept = mask_mod(b.view(-1, 1, 1), h.view(-1, 1, 1), q_idx.clamp(max=q_len - 1), kv_idx.clamp(max=kv_len - 1))
    return int((torch.as_tensor(kept, dtype=torch.bool) & inside).sum())


def flex_blocks(block_mask: tuple[Any, ...]) -> FlexBlocks | None:
    """The :class:`FlexBlocks` of a block mask in ``BlockMask.as_tuple()`` form, or ``None`` when its
    block tensors hold no values (built on FakeTensors)."""
    q_len, kv_len = int(block_mask[0]), int(block_mask[1])
    bq, bkv, mask_mod = int(block_mask[-3]), int(block_mask[-2]), block_mask[-1]
    num, indices = _tensor_values(block_mask[2]), _tensor_values(block_mask[3])
    if num is None or indices is None:
        return None
    full_num, full_indices = _tensor_values(block_mask[4]), _tensor_values(block_mask[5])
    partial = _visited(num, indices)
    executed = _block_pairs(partial, indices, q_len, kv_len, bq, bkv)
    full = 0
    if full_num is not None and full_indices is not None:
        full = _block_pairs(_visited(full_num, full_indices), full_indices, q_len, kv_len, bq, bkv)
    try:
        kept, exact = _kept_in_partial(partial, indices, mask_mod, q_len, kv_len, bq, bkv), True
    except Exception:  # a mask function that reads FakeTensors or needs vmap: its partial blocks count in full
        kept, exact = executed, False
    heads = math.prod(indices.shape[:-2])
    return FlexBlocks(q_len, kv_len, heads, executed + full, kept + full, exact)


def _rebuilt(block_mask: tuple[Any, ...]) -> FlexBlocks | None:
    """The block counts rebuilt from the mask function on real indices (a mask made on FakeTensors)."""
    from torch.nn.attention.flex_attention import create_block_mask

    q_len, kv_len = int(block_mask[0]), int(block_mask[1])
    batch, heads = (int(d) for d in block_mask[3].shape[:2])
    if batch * heads * q_len * kv_len > _MAX_REBUILT_PAIRS:
        return None
    try:
        mask = create_block_mask(
            block_mask[-1], batch, heads, q_len, kv_len, device="cpu",
            BLOCK_SIZE=(int(block_mask[-3]), int(block_mask[-2])),
        )  # fmt: skip
        return flex_blocks(mask.as_tuple())
    except Exception:  # the mask function reads tensors of the dry run: no structure to rebuild
        return None


def _unknown(block_mask: tuple[Any, ...]) -> FlexBlocks:
    q_len, kv_len = int(block_mask[0]), int(block_mask[1])
    heads = math.prod(int(d) for d in block_mask[3].shape[:-2])
    pairs = heads * q_len * kv_len
    return FlexBlocks(q_len, kv_len, heads, pairs, pairs, exact=False)


def summarise_flex(args: tuple[Any, ...], kwargs: dict[str, Any], position: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` with the block mask at ``position`` replaced by its :class:`FlexBlocks` (once)."""
    if len(args) <= position or not isinstance(args[position], tuple):
        return args, kwargs
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    block_mask = args[position]
    with unset_fake_temporarily():  # the block tensors are read as they are, outside the dry run's fake mode
        blocks = flex_blocks(block_mask) or _rebuilt(block_mask) or _unknown(block_mask)
    return (*args[:position], blocks, *args[position + 1 :]), kwargs


def _summary(position: int) -> Any:
    def summary(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return summarise_flex(args, kwargs, position)

    return summary


for _hop, _position in _BLOCK_MASK_POSITION.items():
    register_summary(_hop, _summary(_position))


def flex_fractions(func: Any, args: tuple[Any, ...]) -> tuple[float, float] | None:
    """``(executed, useful)`` shares of the counted FLOPs of a flex call, ``None`` for any other op."""
    position = _BLOCK_MASK_POSITION.get(func)
    if position is None or len(args) <= position or not isinstance(args[position], FlexBlocks):
        return None
    blocks: FlexBlocks = args[position]
    counted = blocks.counted_pairs
    if counted <= 0:
        return 1.0, 1.0
    return blocks.executed_pairs / counted, blocks.useful_pairs / counted


@register(flex_attention)
def flex_attention_cost(query: TensorMeta, key: TensorMeta, value: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # (B, Hq, L, E) x (B, Hkv, S, E): the full square per query head, as torch.utils.flop_counter
    return attention_cost(math.prod(query.shape[:-2]), query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1])


@register(flex_attention_backward)
def flex_attention_backward_cost(
    query: TensorMeta, key: TensorMeta, value: TensorMeta, out_: TensorMeta, logsumexp: TensorMeta,
    grad_out: TensorMeta | None, *args: Any, out: Any, **_: Any,
) -> Cost:  # fmt: skip
    # recompute Q K^T, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: L x S x (3 E + 2 E_v) per head
    return attention_backward_cost(math.prod(query.shape[:-2]), query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1])
