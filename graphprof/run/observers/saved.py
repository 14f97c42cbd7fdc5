"""Bytes each layer saves for backward: the activation memory a training step holds until its backward.

In train mode autograd keeps, for every op that needs them in backward, some of its inputs or outputs
(a convolution its input, a ReLU its output, a matmul both operands). Those tensors are what stays alive
between the forward and the backward, so their sum is the activation part of a training step's peak
(MemTracker's ``ACT`` category at the end of the forward, less the output the caller holds). When a layer
returns, this observer walks the autograd nodes its output reaches that no earlier layer created, reads
what each saved (the node's ``_saved_*`` attributes) and credits every storage to that layer, once: a
storage saved again (a view, or by a later layer) is not counted twice. Parameters and buffers are
weights, not activations, and are left out; the model's inputs count where a layer saves them (the first
convolution its image). The saved tensors are read where the run loop does not report ops
(:attr:`~graphprof.run.events.RunContext.unobserved`), so the other observers see the run's own ops only.

Worked example, ``Linear(16, 32) -> ReLU -> Linear(32, 4)`` on a batch of 8 in float32:
``fc1`` saves its input (8 x 16 x 4 B = 512 B), ``relu`` its output (8 x 32 x 4 B = 1,024 B), ``fc2``
its input, the same storage as relu's output (0 B more): 1,536 B in all.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

from graphprof.run.events import Layer, Observer, RunContext

__all__ = ["SavedActivations"]

_SEEN = "graphprof.saved"


class SavedActivations(Observer):
    """Bytes saved for backward, per layer name (train mode; nothing is saved in eval)."""

    def __init__(self) -> None:
        self.by_layer: dict[str, int] = {}
        self.static: set[StorageWeakRef] = set()
        self.seen: set[StorageWeakRef] = set()
        self.unobserved: Any = None

    def started(self, ctx: RunContext) -> None:
        self.static = {StorageWeakRef(t.untyped_storage()) for t in ctx.state.values() if isinstance(t, torch.Tensor)}
        self.unobserved = ctx.unobserved

    def layer_left(self, layer: Layer, output: Any) -> None:
        stack: list[Any] = [
            t.grad_fn for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None
        ]
        while stack:
            fn = stack.pop()
            if fn is None or _SEEN in fn.metadata:  # Node.metadata: a property returning a dict
                continue
            fn.metadata[_SEEN] = True
            with self.unobserved():  # unpacking a saved output makes a view: not one of the run's ops
                saved = _saved_tensors(fn)
            for tensor in saved:
                self._credit(layer.name, tensor)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)

    def _credit(self, name: str, tensor: torch.Tensor) -> None:
        if tensor.layout != torch.strided:
            return
        ref = StorageWeakRef(tensor.untyped_storage())
        if ref not in self.static and ref not in self.seen:
            self.seen.add(ref)
            self.by_layer[name] = self.by_layer.get(name, 0) + tensor.untyped_storage().nbytes()

    @property
    def total(self) -> int:
        return sum(self.by_layer.values())


def _saved_tensors(fn: Any) -> list[torch.Tensor]:
    """The tensors an autograd node saved for its backward (``_saved_self``, ``_saved_result``, lists too)."""
    found: list[torch.Tensor] = []
    for name in dir(fn):
        if not name.startswith("_saved_"):
            continue
        try:
            value = getattr(fn, name)
        except RuntimeError:  # already freed, or not saved in this configuration
            continue
        values = value if isinstance(value, (tuple, list)) else (value,)
        found += [v for v in values if isinstance(v, torch.Tensor)]
    return found
