"""A KV cache in another dtype than the compute (``--kv-dtype float8`` with bfloat16 weights, say).

The dry run keeps the cache in the compute dtype: transformers' cache update and attention take one
dtype. The cache's traffic is then re-priced exactly, per decoder layer: the ``context`` tokens that
attention reads and the ``new`` tokens the step writes cost ``kv itemsize - compute itemsize`` bytes more
(or fewer) per element. The difference goes on the row that runs the attention kernel of each layer
(an op whose name holds ``attention``; else the layer's first row), in its cost and in that op's, so
times and bounds see it too.
"""

from __future__ import annotations

import dataclasses

import torch

from graphprof.cost.result import LayerRow, Profile
from graphprof.formulas import Cost
from graphprof.generate.blocks import block_of
from graphprof.generate.kvcache import KVCacheSpec

__all__ = ["reprice_kv"]


def _attention_row(profile: Profile, indices: list[int]) -> int:
    for i in indices:
        if any("attention" in op.op for op in profile.layers[i].ops):
            return i
    return indices[0]


def _shifted(row: LayerRow, extra: Cost) -> LayerRow:
    ops = list(row.ops)
    for k, op in enumerate(ops):
        if "attention" in op.op or k == len(ops) - 1:
            ops[k] = dataclasses.replace(op, cost=op.cost + extra)
            break
    return dataclasses.replace(row, forward=row.forward + extra, ops=tuple(ops))


def reprice_kv(
    profile: Profile, layers_path: str, spec: KVCacheSpec, *, context: int, new: int, batch: int, run: torch.dtype, kv: torch.dtype
) -> Profile:
    """``profile`` with each decoder layer's cache traffic at ``kv`` instead of ``run`` (see the module docstring)."""
    if kv == run or not layers_path:
        return profile
    per_element = kv.itemsize - run.itemsize
    elements = 2 * spec.kv_heads * spec.head_dim * batch  # K and V of one token of every sequence, one layer
    extra = Cost(bytes_read=elements * context * per_element, bytes_written=elements * new * per_element)
    members: dict[str, list[int]] = {}
    for i, row in enumerate(profile.layers):
        name = block_of(row.module, layers_path)
        if name.startswith(layers_path + "."):
            members.setdefault(name, []).append(i)
    layers = list(profile.layers)
    for indices in members.values():
        target = _attention_row(profile, indices)
        layers[target] = _shifted(layers[target], extra)
    return dataclasses.replace(profile, layers=tuple(layers))
