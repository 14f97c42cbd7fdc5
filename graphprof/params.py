"""Parameter tensors of a module, packed quantized weights included.

A quantized ``torch.ao.nn.quantized`` convolution or linear layer keeps its weight and bias packed in
a ``torch.classes.quantized`` object, so ``module.parameters()`` does not see them; they are still the
layer's parameters (the published counts of quantized torchvision models include them). Here they are
unpacked (``module.weight()``, ``module.bias()``), which reads no data beyond the packed tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
from torch import nn

__all__ = ["parameter_tensors", "count_parameters"]


def _packed(module: nn.Module) -> list[torch.Tensor]:
    packed = getattr(module, "_packed_params", None)
    if packed is None or not callable(getattr(module, "weight", None)):
        return []
    tensors = [cast(Callable[[], torch.Tensor], module.weight)()]
    bias = cast(Callable[[], torch.Tensor], module.bias)() if callable(getattr(module, "bias", None)) else None
    if isinstance(bias, torch.Tensor):
        tensors.append(bias)
    return tensors


def parameter_tensors(module: nn.Module, recurse: bool = True) -> list[torch.Tensor]:
    """``module.parameters(recurse)`` plus the packed weights of quantized layers, each once."""
    tensors: list[torch.Tensor] = list(module.parameters(recurse=recurse))
    modules = module.modules() if recurse else [module]
    for sub in modules:
        tensors.extend(_packed(sub))
    return tensors


def count_parameters(module: nn.Module) -> int:
    """``sum(p.numel() for p in module.parameters())``, packed quantized weights included."""
    return sum(t.numel() for t in parameter_tensors(module))
