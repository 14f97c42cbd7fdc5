"""Backward attribution: each backward aten call belongs to the forward layer that created its autograd node.

When a forward layer is left, the autograd nodes reachable from its output and not yet tagged are
tagged in their ``metadata``; during backward, ``torch._C._current_autograd_node()`` names the node
running, and its tag names the layer. Register this observer before the ones that read
:attr:`graphprof.runloop.OpEvent.layer` in backward.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from graphprof.runloop import Layer, Observer, OpEvent, RunContext

__all__ = ["BackwardAttribution"]

_TAG = "graphprof_layer"


class BackwardAttribution(Observer):
    wants_ops = True

    def __init__(self) -> None:
        self.tags: dict[int, Layer] = {}
        self.train = False

    def started(self, ctx: RunContext) -> None:
        self.train = ctx.train

    def layer_left(self, layer: Layer, output: Any) -> None:
        if not self.train:
            return
        tag = id(layer)
        self.tags[tag] = layer
        stack: list[torch.autograd.graph.Node | None] = [t.grad_fn for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while stack:
            fn = stack.pop()
            # torch declares Node.metadata a method; it is a property returning a dict
            if fn is None or _TAG in fn.metadata:  # type: ignore[operator]
                continue
            fn.metadata[_TAG] = tag  # type: ignore[index]
            stack.extend(next_fn for next_fn, _ in fn.next_functions)

    def op(self, event: OpEvent) -> None:
        if event.phase != "backward":
            return
        node = torch._C._current_autograd_node()
        tag = None if node is None else node.metadata.get(_TAG)  # type: ignore[attr-defined]
        event.layer = self.tags.get(tag) if tag is not None else None
