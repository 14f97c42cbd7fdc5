"""Group a profile's rows into the blocks a decoder is made of: each decoder layer, and what is around them.

The decoder layers are the children of the model's largest ``nn.ModuleList`` (``model.layers``); every
other row goes to the module at the same depth as that list (``model.embed_tokens``, ``model.norm``,
``model.rotary_emb``), or to the top-level module it sits in (``lm_head``), or to ``(model)`` for ops
of the model's own forward. Every row lands in exactly one block, so blocks sum to the profile's total.

>>> block_of("model.layers.3.self_attn.q_proj", "model.layers")
'model.layers.3'
>>> block_of("model.norm", "model.layers"), block_of("lm_head", "model.layers"), block_of(None, "model.layers")
('model.norm', 'lm_head', '(model)')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from graphprof.cost.result import LayerRow, Profile
from graphprof.formulas import Cost

__all__ = ["TOP", "block_of", "decoder_list", "group_rows", "Block"]

TOP = "(model)"


def decoder_list(model: nn.Module) -> str:
    """The path of the ``nn.ModuleList`` with the most children (the decoder layers); ``""`` when there is none."""
    best, size = "", 0
    for path, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > size:
            best, size = path, len(module)
    return best


def block_of(module: str | None, layers_path: str) -> str:
    """The block a row whose innermost module is ``module`` belongs to (see the module docstring)."""
    if not module:
        return TOP
    parts = module.split(".")
    if layers_path and module.startswith(layers_path + "."):
        return ".".join(parts[: layers_path.count(".") + 2])
    depth = layers_path.count(".") + 1 if layers_path else 1
    return ".".join(parts[:depth])


@dataclass(frozen=True)
class Block:
    """The rows of one block (indices into :attr:`Profile.layers`) and their summed cost."""

    name: str
    rows: tuple[int, ...]
    cost: Cost


def group_rows(profile: Profile, layers_path: str) -> tuple[Block, ...]:
    """The profile's rows grouped into blocks, in order of first appearance."""
    members: dict[str, list[int]] = {}
    for index, row in enumerate(profile.layers):
        members.setdefault(block_of(row.module, layers_path), []).append(index)
    return tuple(Block(name, tuple(rows), _sum(profile.layers, rows)) for name, rows in members.items())


def _sum(rows: Sequence[LayerRow], indices: Sequence[int]) -> Cost:
    return sum((rows[i].cost for i in indices), Cost())
