"""Live memory through one training step, by category, with where its peak happens.

:class:`StepMemory` is an observer of the run loop's training step (:func:`graphprof.run.step.run_step`):
it is told every aten call of the step (forward, backward and the optimizer's step) and keeps the storages the calls return, each once, while something still refers to
them (a weak reference per storage: a storage dies when its last tensor does, as in the allocator). The
storages present before the step (parameters, optimizer state, the inputs) are its base; the peak is the
base plus the most bytes live at once after any call. Categories are read at the peak from what holds
each storage then: a parameter's ``.grad`` (gradients), a tensor autograd saved for backward (the loop's
``saved`` event, ``saved_tensors_hooks``), anything else a call made (transients: the backward's gradients of
activations, the optimizer's temporaries, outputs not yet freed).

Why the peak is exact without checking every storage at every call: ``current`` only grows by what a
call returns and is an upper bound of the live bytes (a storage never comes back); only when it passes
the peak so far are the dead storages dropped and the peak raised to the true figure (the bound trick of
:class:`graphprof.run.observers.memory.LiveMemory`).

Worked example, ``Linear(1024, 1024)`` on a batch of 8 in float32, AdamW one tensor at a time (the
CPU's default): base = parameters 4,198,400 B + two moments and a step count per parameter 8,396,808 B +
input 32,768 B. The peak is in the optimizer's step: the gradients (4,198,400 B, held by ``.grad``) and,
for the weight, ``exp_avg_sq.sqrt()`` and its quotient by the bias correction (4 MiB each) at once:
12,627,976 + 4,198,400 + 8,388,608 = 25,214,984 B (``tests/test_plan_memory.py``; the CPU allocator
measures 25,214,996 B).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten

from graphprof.base.choices import Phase
from graphprof.formulas.registry import op_name
from graphprof.run.events import Layer, Observer, OpEvent, RunContext

__all__ = ["StepMemory", "PeakSnapshot", "dense_tensors", "optimizer_tensors"]


def dense_tensors(values: Iterable[Any]) -> Iterator[torch.Tensor]:
    """The plain tensors holding ``values``: a wrapper subclass (a DTensor) by its inner tensors."""
    for value in values:
        if not isinstance(value, torch.Tensor):
            continue
        if is_traceable_wrapper_subclass(value):
            attrs, _ = value.__tensor_flatten__()
            yield from dense_tensors(getattr(value, a) for a in attrs)
        elif value.layout == torch.strided and value.device.type != "meta":
            yield value


def _ref(t: torch.Tensor) -> tuple[StorageWeakRef, int]:
    storage = t.untyped_storage()
    return StorageWeakRef(storage), storage.nbytes()


@dataclass(frozen=True)
class PeakSnapshot:
    """What was live at the peak, in bytes by category, and where the step was."""

    live: int
    gradients: int
    activations: int
    transients: int
    phase: Phase
    module: str | None
    op: str | None


class StepMemory(Observer):
    """Bytes live during a step on top of its base, each phase's peak and a snapshot of it (see the module
    docstring): an observer of the run loop's training step (:func:`graphprof.run.step.run_step`), which
    tells it every aten call, every tensor autograd saves, the phases and the copy's modules. ``base``
    holds the bytes present before the step, by part (``parameters``, ``optimizer_state``, ``inputs``).
    Use one instance per step.
    """

    wants_ops = True
    wants_saved = True

    def __init__(self, cpu_kernels: bool = False) -> None:
        #: count the copies the CPU's matrix products make of operands BLAS cannot read (:func:`cpu_matrix_copies`)
        self.cpu_kernels = cpu_kernels
        self.model: nn.Module | None = None
        self.base: dict[str, int] = {}
        self.static: set[StorageWeakRef] = set()
        self.live: dict[StorageWeakRef, int] = {}
        self.saved_refs: set[StorageWeakRef] = set()
        #: bytes of the live storages autograd saved (kept as they come and go, so a snapshot is cheap)
        self.saved_live = 0
        self.current = 0
        self.phase = Phase.FORWARD
        self.module: str | None = None
        #: each phase's peak (bytes above the base) and what held it
        self.peaks: dict[Phase, PeakSnapshot] = {}
        #: every byte autograd saved in the step (each storage once), whatever was freed since
        self.saved_total = 0

    def started(self, ctx: RunContext) -> None:
        """The storages present before the step, each once: the copy's parameters and buffers, the
        optimizer's state, the inputs."""
        self.model = ctx.model
        state = optimizer_tensors(ctx.optimizer) if ctx.optimizer is not None else []
        self.base = {
            "parameters": self._set_base([*ctx.model.parameters(), *ctx.model.buffers()]),
            "optimizer_state": self._set_base(state),
            "inputs": self._set_base(tree_flatten(ctx.inputs)[0]),
        }

    def _set_base(self, tensors: Iterable[torch.Tensor]) -> int:
        total = 0
        for t in dense_tensors(tensors):
            ref, size = _ref(t)
            if ref not in self.static:
                self.static.add(ref)
                total += size
        return total

    def phase_started(self, phase: Phase) -> None:
        self.phase = phase

    def saved(self, layer: Layer | None, tensor: torch.Tensor) -> None:
        """What autograd saves; a parameter (FSDP's gathered one too) is a weight, not an activation."""
        if isinstance(tensor, nn.Parameter) or isinstance(tensor._base, nn.Parameter):
            return
        for d in dense_tensors([tensor]):
            ref = _ref(d)[0]
            if ref not in self.saved_refs:
                self.saved_refs.add(ref)
                size = self.live.get(ref, 0)
                self.saved_live += size
                self.saved_total += size

    def op(self, event: OpEvent) -> None:
        for t in dense_tensors(tree_flatten(event.out)[0]):
            ref, size = _ref(t)
            if ref not in self.static and self.live.get(ref) != size:  # new, or regrown (FSDP's gathered units)
                self._resize(ref, size)
        workspace = cpu_matrix_copies(event.func, event.args) if self.cpu_kernels else 0
        held = self.peaks.get(self.phase)
        if held is None or self.current + workspace > held.live:
            self._settle(op_name(event.func).rpartition(".")[2], event.layer, workspace)  # aten.add -> add; flex_attention as named

    def _resize(self, ref: StorageWeakRef, size: int) -> None:
        change = size - self.live.get(ref, 0)
        self.live[ref] = size
        self.current += change
        if ref in self.saved_refs:
            self.saved_live += change

    def _settle(self, op: str, layer: Layer | None, workspace: int = 0) -> None:
        for ref in list(self.live):
            # a dead storage is dropped; a live one is read again: FSDP frees a gathered unit by resizing
            # its storage to 0 (``UntypedStorage.resize_``, which no dispatch mode sees)
            self._resize(ref, 0 if ref.expired() else torch.UntypedStorage._new_with_weak_ptr(ref.cdata).nbytes())
            if not self.live[ref]:
                del self.live[ref]
        held = self.peaks.get(self.phase)
        self.current += workspace  # the kernel's own buffers, live while it runs (counted as transients)
        if held is None or self.current > held.live:
            self.peaks[self.phase] = self._categorise(op, layer)
        self.current -= workspace

    def _categorise(self, op: str, layer: Layer | None) -> PeakSnapshot:
        assert self.model is not None
        grads = {_ref(g)[0] for p in self.model.parameters() if p.grad is not None for g in dense_tensors([p.grad])}
        grad_bytes = sum(self.live.get(ref, 0) for ref in grads if ref not in self.saved_refs)
        other = self.current - grad_bytes - self.saved_live
        return PeakSnapshot(self.current, grad_bytes, self.saved_live, other, self.phase, self._where(layer), op)

    def _where(self, layer: Layer | None) -> str | None:
        """The forward's module running; in the backward the module whose autograd node runs (the loop
        attributes it), else the node's own name (the loss's); the optimizer's step."""
        if self.phase is Phase.BACKWARD:
            if layer is not None:
                return layer.name
            node: Any = torch._C._current_autograd_node()
            return None if node is None else str(node.name())
        if self.phase is Phase.FORWARD:
            return self.module or "(the loss, outside the model)"
        return "optimizer.step"

    # ---- where: the module running in the forward ----------------------------------------------------
    def layer_entered(self, layer: Layer) -> None:
        self.module = layer.module or "(model)"

    def layer_left(self, layer: Layer, output: Any) -> None:
        name = layer.module or ""
        self.module = name.rpartition(".")[0] if name else None


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every tensor of the optimizer's state (AdamW's moments and step counts)."""
    return [t for state in optimizer.state.values() for t in tree_flatten(state)[0] if isinstance(t, torch.Tensor)]


#: The matrix products whose CPU kernels copy an operand BLAS cannot read as it is, with its positions.
_MATRIX_OPERANDS = {"mm": (0, 1), "addmm": (1, 2), "bmm": (0, 1), "baddbmm": (1, 2)}


def cpu_matrix_copies(func: Any, args: tuple[Any, ...]) -> int:
    """Bytes the CPU kernel of a matrix product allocates privately for operands BLAS cannot read in place:
    a matrix is read as it is when one of its last two strides is 1 and the other spans the row (row- or
    column-major); any other layout is first copied into a contiguous buffer, inside the kernel, which no
    dispatch mode sees. The gradient of a summed loss is such an operand: ``expand`` of one value, every
    stride 0, so the LM head's backward on 8 x 512 tokens and a 32,000-token vocabulary copies
    8 x 512 x 32,000 x 4 B = 524 MB, twice (for the input's gradient and the weight's)."""
    positions = _MATRIX_OPERANDS.get(op_name(func).rpartition(".")[2])
    if positions is None:
        return 0
    total = 0
    for i in positions:
        t = args[i] if i < len(args) else None
        if isinstance(t, torch.Tensor) and t.dim() >= 2 and t.layout == torch.strided and not _blas_readable(t):
            total += t.numel() * t.element_size()
    return total


def _blas_readable(t: torch.Tensor) -> bool:
    rows, cols = t.shape[-2], t.shape[-1]
    s0, s1 = t.stride()[-2], t.stride()[-1]
    return (s1 == 1 and s0 >= max(1, cols)) or (s0 == 1 and s1 >= max(1, rows)) or t.numel() <= 1
