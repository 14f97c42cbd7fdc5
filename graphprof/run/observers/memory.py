"""Peak live activation memory of a run, from weak references to storages."""

from __future__ import annotations

from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

from graphprof.run.events import Observer, OpEvent, RunContext

__all__ = ["LiveMemory"]


class LiveMemory(Observer):
    """Bytes of live activation storages, and their peak.

    A storage is live while some tensor still refers to it: the FX interpreter drops a node's value
    after its last user, and autograd keeps what it saved for backward, so the peak follows the real
    lifetime of activations. Parameters and buffers are excluded; the inputs count from the start.

    Why the peak is exact without checking every storage at every op: ``current`` is the sum of the
    storages seen and not yet found dead, an upper bound of the live bytes (a storage only dies, it never
    comes back). While that bound stays at or below the peak so far, the live bytes do too and the peak
    cannot have moved; only when the bound passes the peak are the storages checked (``expired``), the
    dead ones dropped and the peak raised to the true figure. An op's cost is then the outputs it adds,
    not the number of live tensors (checked against the full scan in ``tests/test_runloop.py``).
    """

    wants_ops = True

    def __init__(self) -> None:
        self.static: set[StorageWeakRef] = set()
        self.live: dict[StorageWeakRef, int] = {}
        self.current = 0
        self.peak = 0
        #: how many times the storages were checked (at most once per op; see the class docstring)
        self.scans = 0
        #: the layer running when the peak was reached (``None`` before any op, or outside every layer)
        self.peak_layer: str | None = None
        self._layer: str | None = None

    def started(self, ctx: RunContext) -> None:
        self.static = {StorageWeakRef(t.untyped_storage()) for t in _dense_parts(ctx.state.values())}
        self.add(ctx.inputs)

    def op(self, event: OpEvent) -> None:
        self._layer = event.layer.name if event.layer is not None else None
        self.add(event.out)

    def add(self, value: Any) -> None:
        for t in _dense_parts(tree_flatten(value)[0]):
            if isinstance(t, torch.Tensor):
                ref = StorageWeakRef(t.untyped_storage())
                if ref not in self.static and ref not in self.live:
                    size = t.untyped_storage().nbytes()
                    self.live[ref] = size
                    self.current += size
        if self.current > self.peak:  # the bound passed the peak: find the true live bytes
            self.scans += 1
            for ref in [r for r in self.live if r.expired()]:
                self.current -= self.live.pop(ref)
            if self.current > self.peak:
                self.peak, self.peak_layer = self.current, self._layer


def _dense_parts(values: Any) -> list[Any]:
    """``values`` with each sparse tensor replaced by the dense tensors that hold it (COO: indices and
    values; CSR/CSC/BSR/BSC: compressed and plain indices and values), whose storages are what it occupies."""
    out: list[Any] = []
    for t in values:
        if not isinstance(t, torch.Tensor) or t.layout == torch.strided:
            out.append(t)
        elif t.layout == torch.sparse_coo:
            out += [t._indices(), t._values()]
        elif t.layout in (torch.sparse_csr, torch.sparse_bsr):
            out += [t.crow_indices(), t.col_indices(), t.values()]
        else:  # sparse_csc, sparse_bsc
            out += [t.ccol_indices(), t.row_indices(), t.values()]
    return out
