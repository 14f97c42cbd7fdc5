"""The fused kernels transformers runs in place of a model's torch reference, named.

transformers marks a model file's reference functions (Mamba's selective scan, Mamba-2's chunked SSD scan,
the causal depthwise convolution, the gated delta rule...) with ``use_kernel_func_from_hub_with_fallback``:
where the kernel's package (``mamba_ssm``, ``causal_conv1d``, ``fla``...) is installed, its fused kernel
runs instead, chosen once, when transformers imports the model file. A fused kernel is a Triton or CUDA
launch, outside aten: a dry run can neither run nor count it. Where the package is absent (a CPU-only
install, this project's test machine) the reference runs, one aten op at a time, and every op is counted.

So each such kernel is named, never zero: :func:`fused_kernels` reads the choice transformers recorded (the
decorated function's own ``package``, ``func_name`` and ``is_new_implementation``, read with
:func:`inspect.getclosurevars`; nothing is called or changed), :func:`kernel_notes` says which ran, and
:func:`refuse_uncountable` stops a dry run that would reach one, naming it.

>>> # Mamba-2 without mamba_ssm installed: the reference scan is counted
>>> # FusedKernel("mamba_chunk_scan_combined", "mamba_ssm", "mamba2_chunk_scan", active=False)
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

import torch

from graphprof.errors import ModelBuildError

__all__ = ["FusedKernel", "fused_kernels", "kernel_notes", "refuse_uncountable"]


@dataclass(frozen=True)
class FusedKernel:
    """One fused kernel a model file can call instead of its torch reference."""

    #: the kernel's name in its package (``mamba_chunk_scan_combined``)
    name: str
    #: the package that provides it (``mamba_ssm``)
    package: str
    #: transformers' reference function it replaces (``mamba2_chunk_scan``)
    reference: str
    #: whether transformers calls the kernel (its package is installed) rather than the reference
    active: bool

    @property
    def qualified(self) -> str:
        return f"{self.package}.{self.name}"


def _kernel_of(value: object) -> FusedKernel | None:
    """The kernel a transformers reference function stands for, or ``None`` for any other object."""
    if not inspect.isfunction(value) or not hasattr(value, "__wrapped__"):
        return None
    try:
        seen = inspect.getclosurevars(value).nonlocals
    except (TypeError, ValueError):
        return None
    name, package, active = seen.get("func_name"), seen.get("package"), seen.get("is_new_implementation")
    if not (isinstance(name, str) and isinstance(package, str) and isinstance(active, bool)):
        return None
    return FusedKernel(name, package, value.__name__, active)


def _model_files(model: torch.nn.Module) -> Iterable[ModuleType]:
    names = dict.fromkeys(type(m).__module__ for m in model.modules())
    return (sys.modules[n] for n in names if n.startswith("transformers.") and n in sys.modules)


def fused_kernels(model: torch.nn.Module) -> tuple[FusedKernel, ...]:
    """The fused kernels the transformers files of ``model``'s modules can call, in file order."""
    found: dict[str, FusedKernel] = {}
    for file in _model_files(model):
        for value in vars(file).values():
            kernel = _kernel_of(value)
            if kernel is not None:
                found.setdefault(kernel.qualified, kernel)
    return tuple(found.values())


def kernel_notes(kernels: Iterable[FusedKernel]) -> tuple[str, ...]:
    """One note for the kernels that ran, one for those whose torch reference ran in their place."""
    kernels = tuple(kernels)
    active = [k.qualified for k in kernels if k.active]
    idle = sorted({k.package for k in kernels if not k.active})
    notes = []
    if idle:
        names = ", ".join(k.qualified for k in kernels if not k.active)
        notes.append(
            f"fused kernels not installed ({', '.join(idle)}): transformers' torch reference runs in place of "
            f"{names}, and each of its ops is counted"
        )
    if active:
        notes.append(f"fused kernels outside aten, not counted: {', '.join(active)}")
    return tuple(notes)


def refuse_uncountable(kernels: Iterable[FusedKernel], name: str) -> None:
    """Raise :class:`ModelBuildError` naming the fused kernels a dry run of ``name`` would reach."""
    active = [k for k in kernels if k.active]
    if not active:
        return
    listed = ", ".join(f"{k.qualified} (for {k.reference})" for k in active)
    packages = " and ".join(sorted({k.package for k in active}))
    raise ModelBuildError(
        f"{name}: transformers calls the fused kernels {listed}; they run outside aten, so a dry run can "
        f"neither run nor count them. Profile it where {packages} is not installed: transformers' torch "
        "reference then runs in their place and every op of it is counted"
    )
