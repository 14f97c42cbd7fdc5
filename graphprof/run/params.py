"""The weights a module holds: its parameters and the packed weights of quantized layers."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

__all__ = ["packed_tensors", "parameter_tensors", "count_parameters"]


#: module -> (the packed object, its unpacked tensors)
_UNPACKED: weakref.WeakKeyDictionary[nn.Module, tuple[Any, list[torch.Tensor]]] = weakref.WeakKeyDictionary()


def packed_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The weights a quantized layer keeps packed (not parameters), unpacked once; ``[]`` for any other module."""
    packed = getattr(module, "_packed_params", None)
    if packed is None or not callable(getattr(module, "weight", None)):
        return []
    cached = _UNPACKED.get(module)
    if cached is not None and cached[0] is packed:
        return list(cached[1])
    tensors = _unpack(module)
    _UNPACKED[module] = (packed, tensors)
    return list(tensors)


def _unpack(module: nn.Module) -> list[torch.Tensor]:
    """Weight and bias, from one unpacking where the layer offers both at once (``_weight_bias``)."""
    both = getattr(module, "_weight_bias", None)
    if callable(both):
        weight, bias = both()
    else:
        weight = cast(Callable[[], torch.Tensor], module.weight)()
        bias = cast(Callable[[], torch.Tensor], module.bias)() if callable(getattr(module, "bias", None)) else None
    return [weight] + ([bias] if isinstance(bias, torch.Tensor) else [])


def parameter_tensors(module: nn.Module, recurse: bool = True) -> list[torch.Tensor]:
    """``module.parameters(recurse)`` plus the packed weights of quantized layers, each once."""
    tensors: list[torch.Tensor] = list(module.parameters(recurse=recurse))
    modules = module.modules() if recurse else [module]
    for sub in modules:
        tensors.extend(packed_tensors(sub))
    return tensors


def count_parameters(module: nn.Module) -> int:
    """``sum(p.numel() for p in module.parameters())``, packed quantized weights included."""
    return sum(t.numel() for t in parameter_tensors(module))
