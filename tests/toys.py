"""Small models the tests share: as classes, and as the source text of a user's model file (for the tests
that write one and load it by path, ``file.py:factory``)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["Blocks", "LinearThen", "TINY_MODULE"]


class Blocks(nn.Module):
    """``depth`` blocks of ``width -> hidden -> width`` (Linear, ReLU, Linear), then a ``head`` Linear to
    ``head`` outputs when given: what FSDP shards block by block. A block has ``2 * width * hidden + hidden +
    width`` parameters: 33,088 at 64 -> 256."""

    def __init__(self, width: int = 64, hidden: int = 256, depth: int = 4, head: int | None = None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width)) for _ in range(depth))
        self.head = None if head is None else nn.Linear(width, head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x if self.head is None else self.head(x)


class LinearThen(nn.Module):
    """One ``Linear(in_features, out_features)``, then ``then`` on its output: how a test puts a function
    of its own (a custom op, a planted failure) into a model."""

    def __init__(self, in_features: int, out_features: int, then: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.then = then

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.then(self.fc(x))


#: ``Tiny``: one ``Linear(8, 2)``, the smallest model a factory can return; each test module appends its
#: own factories. No braces, so a test may ``str.format`` the whole text.
TINY_MODULE = """
import sys
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)
"""
