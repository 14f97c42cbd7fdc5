"""Reductions, scans, sorts, searches, distances and losses.

A reduction over n elements costs n at its table rate (the accumulator starts from the identity, as kernels
do), plus a per-output finishing op where there is one (a mean's divide, a std's sqrt). Sorting costs one
compare per element per merge level, ``ceil(log2 n)`` levels.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from graphprof.formulas.common import first, flops_of, per_input_and_output
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.pointwise import with_inplace
from graphprof.formulas.registry import register

aten = torch.ops.aten


def _levels(n: int) -> int:
    """Merge levels (or bisection steps) over n elements: ceil(log2 n), 0 for n <= 1."""
    return math.ceil(math.log2(n)) if n > 1 else 0


register(aten.sum, aten.nansum)(per_input_and_output("sum"))
register(aten.prod)(per_input_and_output("prod"))
register(aten.mean, aten.nanmean)(per_input_and_output("mean"))
register(aten.amax, aten.amin, aten.argmax, aten.argmin, aten.cummax, aten.cummin)(per_input_and_output("amax"))
register(aten.aminmax)(per_input_and_output("aminmax"))
register(aten.histc)(per_input_and_output("histc"))
register(aten.any, aten.all, aten.count_nonzero, aten.nonzero)(per_input_and_output("any"))
register(*with_inplace("cumsum"), *with_inplace("cumprod"))(per_input_and_output("cumsum"))
register(aten.var, aten.var_mean)(per_input_and_output("var"))
register(aten.std, aten.std_mean)(per_input_and_output("std"))
register(aten.linalg_vector_norm, aten.norm)(per_input_and_output("linalg_vector_norm"))
register(aten.logsumexp)(per_input_and_output("logsumexp"))
register(aten.mse_loss)(per_input_and_output("mse_loss"))
register(aten.l1_loss)(per_input_and_output("l1_loss"))
register(aten.smooth_l1_loss, aten.huber_loss)(per_input_and_output("smooth_l1_loss"))
register(aten.binary_cross_entropy)(per_input_and_output("binary_cross_entropy"))
register(aten.binary_cross_entropy_with_logits)(per_input_and_output("binary_cross_entropy_with_logits"))


@register(aten.max, aten.min)
def max_min_cost(self: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # max(self) / max(self, dim) reduce: one compare per element; max(self, other) is element-wise
    if args and isinstance(args[0], TensorMeta):
        return Cost(flops=flops_of("maximum", n_output=first(out).numel))
    return Cost(flops=flops_of("amax", n_input=self.numel))


@register(aten.equal)
def equal_cost(self: TensorMeta, other: TensorMeta, *, out: Any, **_: Any) -> Cost:
    # one compare per element, reduced to a Python bool
    return Cost(flops=flops_of("eq", n_output=self.numel))


@register(aten.sort, aten.argsort)
def sort_cost(self: TensorMeta, dim: int = -1, *args: Any, out: Any, **kwargs: Any) -> Cost:
    # sort.stable passes dim by keyword; a 0-d tensor sorts trivially
    dim = kwargs.get("dim", dim if isinstance(dim, int) and not isinstance(dim, bool) else -1)
    n = self.shape[dim] if self.ndim else 1
    return Cost(flops=flops_of("sort", n_input=self.numel * _levels(n)))


@register(aten.topk)
def topk_cost(self: TensorMeta, k: int, dim: int = -1, *args: Any, out: Any, **_: Any) -> Cost:
    # a size-k heap: compare each element with its top (1), sift the winners (ceil(log2 k))
    return Cost(flops=flops_of("sort", n_input=self.numel * (1 + _levels(k))))


@register(aten._unique2, aten.unique_dim)
def unique_cost(self: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # sort, then one compare of neighbours per element
    return Cost(flops=flops_of("sort", n_input=self.numel * (_levels(self.numel) + 1)))


@register(aten.unique_consecutive)
def unique_consecutive_cost(self: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("sort", n_input=self.numel))  # one compare of neighbours per element


@register(aten.bucketize)
def bucketize_cost(self: Any, boundaries: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # binary search of each value among the boundaries
    steps = _levels(boundaries.numel + 1)
    return Cost(flops=flops_of("searchsorted", n_input=first(out).numel * steps))


@register(aten.searchsorted)
def searchsorted_cost(sorted_sequence: TensorMeta, self: Any, *args: Any, out: Any, **_: Any) -> Cost:
    steps = _levels(sorted_sequence.shape[-1] + 1)
    return Cost(flops=flops_of("searchsorted", n_input=first(out).numel * steps))


@register(aten._cdist_forward)
def cdist_cost(x1: TensorMeta, x2: TensorMeta, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    # every (row of x1, row of x2) pair compares M features; one root per distance
    return Cost(flops=flops_of("cdist", n_input=out.numel * x1.shape[-1], n_output=out.numel))


@register(aten.nll_loss_forward, aten.nll_loss2d_forward)
def nll_loss_cost(self: TensorMeta, target: TensorMeta, weight: TensorMeta | None = None, *args: Any, out: Any, **_: Any) -> Cost:
    # per target: gather -log p and add it (a class weight multiplies it: +1); mean: divide per output
    per_target = flops_of("nll_loss", n_input=target.numel) + (0 if weight is None else target.numel)
    return Cost(flops=per_target + flops_of("nll_loss", n_output=first(out).numel))
