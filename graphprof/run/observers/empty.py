"""Layers with weights that received an empty tensor: the guard against a silent zero.

A dry run on FakeTensors computes shapes, not values; where a shape comes from values (``x[mask]``), the
run computes it on the input's real index values (:mod:`graphprof.run.values`). If that shape is 0, every
layer after it counts no work, and a Linear that multiplies zero rows costs 0 MACs, exactly as the real
run would on that input. But a count of 0 for a layer with weights is far more often a wrong value than a
real one, so this observer names every such layer, and the report says so loudly instead of leaving a
quiet zero in the table. Worked example: ``lin(h[mask])`` with ``mask`` all false reaches ``aten.mm`` with
a ``0 x 16`` input and a ``16 x 16`` weight: the layer is named.
"""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from graphprof.base.choices import Phase
from graphprof.run.events import Observer, OpEvent, RunContext

__all__ = ["EmptyInputs"]


class EmptyInputs(Observer):
    """The layers (in order of first sight) where an op read a parameter or buffer (or a view of one: the
    transposed weight an ``aten.mm`` reads) beside an empty tensor."""

    wants_ops = True

    def __init__(self) -> None:
        self.layers: dict[str, None] = {}
        self._state: set[StorageWeakRef] = set()

    def started(self, ctx: RunContext) -> None:
        self._state = {StorageWeakRef(t.untyped_storage()) for t in ctx.state.values() if _dense(t)}

    def op(self, event: OpEvent) -> None:
        if event.phase is not Phase.FORWARD:  # a backward reads what the forward made (empty placeholders too)
            return
        tensors = [a for a in event.args if _dense(a)]
        if len(tensors) < 2 or not any(t.numel() == 0 for t in tensors):
            return
        weights = [StorageWeakRef(t.untyped_storage()) in self._state for t in tensors]
        if any(weights) and any(t.numel() == 0 for t, w in zip(tensors, weights, strict=True) if not w):
            self.layers.setdefault(event.layer.name if event.layer is not None else "(outside every layer)")


def _dense(t: object) -> bool:
    """A strided tensor (the one layout with a storage of its own to compare)."""
    return isinstance(t, torch.Tensor) and t.layout == torch.strided
