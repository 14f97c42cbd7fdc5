"""The order in which a run allocates and frees its activations' storages, op by op, for an allocator replay
(:func:`graphprof.devices.heapreplay.steady_faults`).

The dry run's tensors live and die as the real forward's do (Python drops a value after its last use, in the
eager capture and in the FX interpreter alike), so the order of fresh storages and of their deaths is the real
forward's. Parameters, buffers and the inputs are not activations and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

from graphprof.formulas.registry import op_name
from graphprof.run.events import Observer, OpEvent, RunContext

__all__ = ["AllocationOrder", "Step"]


@dataclass(frozen=True)
class Step:
    """One aten call as the allocator sees it: the storages that died since the previous call (their keys), then
    the fresh storages the call returned, ``(key, bytes)``; ``op``, its shapes and its outputs' element size for
    what a device adds inside the call (a convolution's blocked copies on the CPU: the input shapes are recorded for
    a convolution only)."""

    op: str
    freed: tuple[int, ...]
    allocated: tuple[tuple[int, int], ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    itemsize: int


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):  # most calls return one tensor: no pytree walk
        return [value] if value.layout == torch.strided else []
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor) and t.layout == torch.strided]


class AllocationOrder(Observer):
    """:attr:`steps`: one :class:`Step` per aten call, in order; storages still alive at the end (the outputs)
    are never freed here."""

    wants_ops = True

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self._static: set[StorageWeakRef] = set()
        self._live: dict[StorageWeakRef, int] = {}
        self._next = 0

    def started(self, ctx: RunContext) -> None:
        kept = _tensors(list(ctx.state.values())) + _tensors(ctx.inputs)
        self._static = {StorageWeakRef(t.untyped_storage()) for t in kept}

    def op(self, event: OpEvent) -> None:
        dead = [ref for ref in self._live if ref.expired()]
        freed = tuple(self._live.pop(ref) for ref in dead)
        outputs, allocated = _tensors(event.out), []
        for t in outputs:
            ref = StorageWeakRef(t.untyped_storage())
            if ref in self._static or ref in self._live:
                continue
            self._live[ref], self._next = self._next, self._next + 1
            allocated.append((self._live[ref], t.untyped_storage().nbytes()))
        name = op_name(event.func)
        # the inputs' shapes only where a device adds copies inside the call (a convolution's, on the CPU)
        inputs = _tensors((event.args, event.kwargs)) if "conv" in name else []
        self.steps.append(Step(
            name, freed, tuple(allocated), tuple(tuple(t.shape) for t in inputs),
            tuple(tuple(t.shape) for t in outputs), outputs[0].element_size() if outputs else 0,
        ))  # fmt: skip
