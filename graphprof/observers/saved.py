"""Bytes each layer saves for backward: the activation memory a training step holds until its backward.

In train mode autograd keeps, for every op that needs them in backward, some of its inputs or outputs
(a convolution its input, a ReLU its output, a matmul both operands). Those tensors are what stays alive
between the forward and the backward, so their sum is the activation part of a training step's peak
(MemTracker's ``activations`` category). This observer sees each of them through
``torch.autograd.graph.saved_tensors_hooks`` (the pack hook, identity otherwise) and credits its storage
to the layer running when it was saved, once: a storage saved again (a view, or by a later layer) is not
counted twice. Parameters and buffers are weights, not activations, and are left out; the model's inputs
count, where a layer saves them (the first convolution its image).

Worked example, ``Linear(16, 32) -> ReLU -> Linear(32, 4)`` on a batch of 8 in float32:
``fc1`` saves its input (8 x 16 x 4 B = 512 B), ``relu`` its output (8 x 32 x 4 B = 1,024 B), ``fc2``
its input, the same storage as relu's output (0 B more): 1,536 B in all.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from graphprof.runloop import Layer, Observer, RunContext

__all__ = ["SavedActivations"]


class SavedActivations(Observer):
    """Bytes saved for backward, per layer name (train mode; nothing is saved in eval)."""

    def __init__(self) -> None:
        self.by_layer: dict[str, int] = {}
        self.static: set[StorageWeakRef] = set()
        self.seen: set[StorageWeakRef] = set()
        self.stack: list[Layer] = []
        self._hooks: Any = None

    def started(self, ctx: RunContext) -> None:
        self.static = {StorageWeakRef(t.untyped_storage()) for t in ctx.state.values() if isinstance(t, torch.Tensor)}

    def phase_started(self, phase: str) -> None:
        if phase == "forward" and torch.is_grad_enabled():
            self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
            self._hooks.__enter__()
        elif phase == "backward":
            self._close()

    def finished(self, outputs: Any) -> None:
        self._close()

    def layer_entered(self, layer: Layer) -> None:
        self.stack.append(layer)

    def layer_left(self, layer: Layer, output: Any) -> None:
        if self.stack and self.stack[-1] is layer:
            self.stack.pop()

    def _close(self) -> None:
        if self._hooks is not None:
            hooks, self._hooks = self._hooks, None
            hooks.__exit__(None, None, None)

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.stack and tensor.layout == torch.strided:
            ref = StorageWeakRef(tensor.untyped_storage())
            if ref not in self.static and ref not in self.seen:
                self.seen.add(ref)
                name = self.stack[-1].name
                self.by_layer[name] = self.by_layer.get(name, 0) + tensor.untyped_storage().nbytes()
        return tensor

    @property
    def total(self) -> int:
        return sum(self.by_layer.values())


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor
