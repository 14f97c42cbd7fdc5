"""Bytes each layer saves for backward: the activation memory a training step holds until its backward.

In train mode autograd keeps, for every op that needs them in backward, some of its inputs or outputs
(a convolution its input, a ReLU its output, a matmul both operands). Those tensors are what stays alive
between the forward and the backward, so their sum is the activation part of a training step's peak
(MemTracker's ``ACT`` category at the end of the forward, less the output the caller holds). The run loop
tells this observer each tensor autograd saves as it saves it (``saved_tensors_hooks``, the one technique
graphprof uses for saved bytes: the training plan's tracker sees the same), with the layer running; every
storage is credited to the first layer that saves it, once: a storage saved again (a view, or by a later
layer) is not counted twice. Parameters and buffers are weights, not activations, and are left out; the
model's inputs count where a layer saves them (the first convolution its image).

Worked example, ``Linear(16, 32) -> ReLU -> Linear(32, 4)`` on a batch of 8 in float32:
``fc1`` saves its input (8 x 16 x 4 B = 512 B), ``relu`` its output (8 x 32 x 4 B = 1,024 B), ``fc2``
its input, the same storage as relu's output (0 B more): 1,536 B in all.
"""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from graphprof.run.events import Layer, Observer, RunContext

__all__ = ["SavedActivations"]


class SavedActivations(Observer):
    """Bytes saved for backward, per layer name (train mode; nothing is saved in eval)."""

    wants_saved = True

    def __init__(self) -> None:
        self.by_layer: dict[str, int] = {}
        self.static: set[StorageWeakRef] = set()
        self.seen: set[StorageWeakRef] = set()

    def started(self, ctx: RunContext) -> None:
        self.static = {StorageWeakRef(t.untyped_storage()) for t in ctx.state.values() if isinstance(t, torch.Tensor)}

    def saved(self, layer: Layer | None, tensor: torch.Tensor) -> None:
        if layer is None or tensor.layout != torch.strided:
            return
        ref = StorageWeakRef(tensor.untyped_storage())
        if ref not in self.static and ref not in self.seen:
            self.seen.add(ref)
            self.by_layer[layer.name] = self.by_layer.get(layer.name, 0) + tensor.untyped_storage().nbytes()

    @property
    def total(self) -> int:
        return sum(self.by_layer.values())
