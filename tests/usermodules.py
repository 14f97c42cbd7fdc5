"""Source text of a user's model file, for the tests that write one and load it by path (``file.py:factory``)."""

from __future__ import annotations

__all__ = ["TINY_MODULE"]

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
