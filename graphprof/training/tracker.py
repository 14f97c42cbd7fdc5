"""Live memory through one training step, by category, with where its peak happens.

:class:`StepMemory` is a dispatch mode that sees every aten call of the step (forward, backward and the
optimizer's step) and keeps the storages the calls return, each once, while something still refers to
them (a weak reference per storage: a storage dies when its last tensor does, as in the allocator). The
storages present before the step (parameters, optimizer state, the inputs) are its base; the peak is the
base plus the most bytes live at once after any call. Categories are read at the peak from what holds
each storage then: a parameter's ``.grad`` (gradients), a tensor autograd saved for backward
(``saved_tensors_hooks``), anything else a call made (transients: the backward's gradients of
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
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten

from graphprof.training.result import StepPhase

__all__ = ["StepMemory", "PeakSnapshot", "dense_tensors"]

_MODULE = "graphprof.training.module"


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
    phase: StepPhase
    module: str | None
    op: str | None


class StepMemory(TorchDispatchMode):
    """Bytes live during a step on top of its base, each phase's peak and a snapshot of it (see the module
    docstring); set :attr:`phase` as the step moves on.

    ``model`` is tagged (its autograd nodes get the module that made them, so a peak in the backward is
    placed); ``grads`` returns the parameters' gradients now. Use one instance per step.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.model = model
        self.base: set[StorageWeakRef] = set()
        self.live: dict[StorageWeakRef, int] = {}
        self.saved: set[StorageWeakRef] = set()
        #: bytes of the live storages autograd saved (kept as they come and go, so a snapshot is cheap)
        self.saved_live = 0
        self.current = 0
        self.phase = StepPhase.FORWARD
        self.module: str | None = None
        #: each phase's peak (bytes above the base) and what held it
        self.peaks: dict[StepPhase, PeakSnapshot] = {}
        #: every byte autograd saved in the step (each storage once), whatever was freed since
        self.saved_total = 0

    def set_base(self, tensors: Iterable[torch.Tensor]) -> int:
        """The storages present before the step (each once); returns their bytes."""
        total = 0
        for t in dense_tensors(tensors):
            ref, size = _ref(t)
            if ref not in self.base:
                self.base.add(ref)
                total += size
        return total

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        """``saved_tensors_hooks``' pack: remember what autograd saves (the tensor itself is kept); a
        parameter (FSDP's gathered one too) is a weight, not an activation."""
        if isinstance(t, nn.Parameter) or isinstance(t._base, nn.Parameter):
            return t
        for d in dense_tensors([t]):
            ref = _ref(d)[0]
            if ref not in self.saved:
                self.saved.add(ref)
                size = self.live.get(ref, 0)
                self.saved_live += size
                self.saved_total += size
        return t

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in dense_tensors(tree_flatten(out)[0]):
            ref, size = _ref(t)
            if ref not in self.base and self.live.get(ref) != size:  # new, or regrown (FSDP's gathered units)
                self._resize(ref, size)
        held = self.peaks.get(self.phase)
        if held is None or self.current > held.live:
            self._settle(str(func.overloadpacket.__name__))
        return out

    def _resize(self, ref: StorageWeakRef, size: int) -> None:
        change = size - self.live.get(ref, 0)
        self.live[ref] = size
        self.current += change
        if ref in self.saved:
            self.saved_live += change

    def _settle(self, op: str) -> None:
        for ref in list(self.live):
            # a dead storage is dropped; a live one is read again: FSDP frees a gathered unit by resizing
            # its storage to 0 (``UntypedStorage.resize_``, which no dispatch mode sees)
            self._resize(ref, 0 if ref.expired() else torch.UntypedStorage._new_with_weak_ptr(ref.cdata).nbytes())
            if not self.live[ref]:
                del self.live[ref]
        held = self.peaks.get(self.phase)
        if held is None or self.current > held.live:
            self.peaks[self.phase] = self._categorise(op)

    def _categorise(self, op: str) -> PeakSnapshot:
        grads = {_ref(g)[0] for p in self.model.parameters() if p.grad is not None for g in dense_tensors([p.grad])}
        grad_bytes = sum(self.live.get(ref, 0) for ref in grads if ref not in self.saved)
        other = self.current - grad_bytes - self.saved_live
        return PeakSnapshot(self.current, grad_bytes, self.saved_live, other, self.phase, self._where(), op)

    def _where(self) -> str | None:
        if self.phase is StepPhase.BACKWARD:
            node: Any = torch._C._current_autograd_node()
            return None if node is None else str(node.metadata.get(_MODULE, node.name()))
        if self.phase is StepPhase.FORWARD:
            return self.module or "(the loss, outside the model)"
        return "optimizer.step"

    # ---- where: the module running (forward) and the module whose nodes run (backward) --------------
    def hooks(self) -> list[Any]:
        """Hooks on the step's own copy of the model (never the user's): the running module, and each
        autograd node tagged with the innermost module that made it."""
        handles = []
        for name, module in self.model.named_modules():
            handles.append(module.register_forward_pre_hook(lambda _m, _a, name=name: self._enter(name)))
            handles.append(
                module.register_forward_hook(lambda _m, _a, out, name=name: self._leave(name, out), always_call=True)
            )
        return handles

    def _enter(self, name: str) -> None:
        self.module = name or "(model)"

    def _leave(self, name: str, output: Any) -> None:
        stack: list[Any] = [
            t.grad_fn for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None
        ]
        while stack:
            fn = stack.pop()
            if fn is None or _MODULE in fn.metadata:
                continue
            fn.metadata[_MODULE] = name or "(model)"
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
        parent = name.rpartition(".")[0]
        self.module = parent if name else None
