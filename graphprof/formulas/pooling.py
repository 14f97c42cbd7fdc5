"""Pooling: max / average, fixed and adaptive, 1d / 2d / 3d.

A fixed pool costs its table rate per window element, ``numel(output) x prod(kernel)`` window elements
(windows overlapping padding are counted whole). An adaptive pool's windows differ in size; they are summed
exactly per dimension: output i of a dimension pools input [floor(i*I/O), ceil((i+1)*I/O)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from graphprof.formulas.common import first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

aten = torch.ops.aten

__all__ = ["window_size", "adaptive_window_elements"]


def window_size(kernel_size: int | Sequence[int], dims: int) -> int:
    """Elements of one pooling window; a single size applies to every spatial dimension."""
    sizes = [kernel_size] if isinstance(kernel_size, int) else list(kernel_size)
    if len(sizes) == 1:
        sizes = sizes * dims
    return math.prod(sizes)


@functools.lru_cache(maxsize=1024)
def _adaptive_span(in_size: int, out_size: int) -> int:
    """Sum over the outputs of one dimension of their adaptive window lengths."""
    return sum(-((-(i + 1) * in_size) // out_size) - (i * in_size) // out_size for i in range(out_size))


def adaptive_window_elements(input: TensorMeta, output: TensorMeta, dims: int) -> int:
    """Total window elements of an adaptive pool over the last ``dims`` dimensions."""
    in_spatial, out_spatial = input.shape[-dims:], output.shape[-dims:]
    planes = output.numel // max(1, math.prod(out_spatial))
    return planes * math.prod(_adaptive_span(i, o) for i, o in zip(in_spatial, out_spatial, strict=True))


def _fixed_pool(name: str, dims: int) -> Callable[..., Cost]:
    def formula(self: TensorMeta, kernel_size: Any, *args: Any, out: Any, **_: Any) -> Cost:
        result = first(out)
        window = window_size(kernel_size, dims)
        return Cost(flops=flops_of(name, n_input=result.numel * window, n_output=result.numel))

    formula.__name__ = formula.__qualname__ = f"{name}{dims}d_cost"
    return formula


def _adaptive_pool(name: str, dims: int) -> Callable[..., Cost]:
    def formula(self: TensorMeta, output_size: Any, *args: Any, out: Any, **_: Any) -> Cost:
        result = first(out)
        elements = adaptive_window_elements(self, result, dims)
        return Cost(flops=flops_of(name, n_input=elements, n_output=result.numel))

    formula.__name__ = formula.__qualname__ = f"adaptive_{name}{dims}d_cost"
    return formula


register(aten.max_pool1d, aten.max_pool1d_with_indices)(_fixed_pool("max_pool", 1))
register(aten.max_pool2d, aten.max_pool2d_with_indices)(_fixed_pool("max_pool", 2))
register(aten.max_pool3d, aten.max_pool3d_with_indices)(_fixed_pool("max_pool", 3))
register(aten.avg_pool1d)(_fixed_pool("avg_pool", 1))
register(aten.avg_pool2d)(_fixed_pool("avg_pool", 2))
register(aten.avg_pool3d)(_fixed_pool("avg_pool", 3))
register(aten.adaptive_max_pool1d)(_adaptive_pool("max_pool", 1))
register(aten.adaptive_max_pool2d)(_adaptive_pool("max_pool", 2))
register(aten.adaptive_max_pool3d)(_adaptive_pool("max_pool", 3))
register(aten.adaptive_avg_pool1d)(_adaptive_pool("avg_pool", 1))
register(aten._adaptive_avg_pool2d, aten.adaptive_avg_pool2d)(_adaptive_pool("avg_pool", 2))
register(aten._adaptive_avg_pool3d, aten.adaptive_avg_pool3d)(_adaptive_pool("avg_pool", 3))
