"""Matrix products: mm, addmm, bmm, baddbmm, addbmm, mv, addmv, dot, and the composites linear / matmul.

``nn.Linear``, ``torch.matmul`` and ``torch.einsum`` are CompositeImplicit: at dispatch they arrive as
``addmm`` / ``mm`` / ``bmm`` / ``mv`` / ``dot`` (plus views, and ``mul`` + ``sum`` for an einsum with no
contracted index). ``linear`` and ``matmul`` are registered too, for graphs captured above dispatch.

A product of an (m, k) and a (k, n) matrix is m * k * n MACs. An added ``self`` (bias) is 1 FLOP per
output element; ``alpha`` / ``beta`` other than 1 add a multiply per output element each.
"""

from __future__ import annotations

from typing import Any

import torch

from graphprof.formulas.common import contraction, first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

aten = torch.ops.aten


def _scaled_add(out: TensorMeta, beta: Any, alpha: Any) -> int:
    """FLOPs of ``beta * self + alpha * product`` beyond the product, per the op's output."""
    n = out.numel
    flops = 0 if beta == 0 else n  # the add of self
    if beta not in (0, 1):
        flops += n
    if alpha != 1:
        flops += n
    return flops


def _stored(mat: TensorMeta) -> int:
    """The (m, k) left factor's m * k, or its stored elements when it is sparse (each meets a row of n)."""
    m, k = mat.shape
    return mat.nnz if mat.nnz is not None else m * k


@register(aten.mm, aten._int_mm)
def mm_cost(self: TensorMeta, mat2: TensorMeta, *, out: TensorMeta, **_: Any) -> Cost:
    # sparse (CSR/COO) @ dense: nnz x n MACs, see graphprof.formulas.scatter
    return contraction(_stored(self) * mat2.shape[1])


@register(aten.addmm)
def addmm_cost(self: TensorMeta, mat1: TensorMeta, mat2: TensorMeta, *, beta: Any = 1, alpha: Any = 1, out: TensorMeta, **_: Any) -> Cost:
    return contraction(_stored(mat1) * mat2.shape[1], _scaled_add(out, beta, alpha))


@register(aten._addmm_activation)
def addmm_activation_cost(
    self: TensorMeta,
    mat1: TensorMeta,
    mat2: TensorMeta,
    *,
    beta: Any = 1,
    alpha: Any = 1,
    use_gelu: bool = False,
    out: TensorMeta,
    **_: Any,
) -> Cost:
    # addmm followed by relu or gelu on its output (the fused linear + activation of transformer fast paths)
    activation = flops_of("gelu" if use_gelu else "relu", n_output=out.numel)
    return addmm_cost(self, mat1, mat2, beta=beta, alpha=alpha, out=out) + Cost(flops=activation)


@register(aten._scaled_mm)
def scaled_mm_cost(
    self: TensorMeta,
    mat2: TensorMeta,
    scale_a: TensorMeta,
    scale_b: TensorMeta,
    bias: TensorMeta | None = None,
    *args: Any,
    out: TensorMeta,
    **_: Any,
) -> Cost:
    # low-precision mm, then the output scaled (1 multiply) and the bias added (1 add) per element
    m, k = self.shape
    return contraction(m * k * mat2.shape[1], out.numel * (1 + (bias is not None)))


@register(aten.bmm)
def bmm_cost(self: TensorMeta, mat2: TensorMeta, *, out: TensorMeta, **_: Any) -> Cost:
    b, m, k = self.shape
    return contraction(b * m * k * mat2.shape[2])


@register(aten.baddbmm, aten.addbmm)
def baddbmm_cost(
    self: TensorMeta, batch1: TensorMeta, batch2: TensorMeta, *, beta: Any = 1, alpha: Any = 1, out: TensorMeta, **_: Any
) -> Cost:
    # b * m * k * n MACs; for addbmm the sum over the batch is part of the accumulation into one (m, n) output
    b, m, k = batch1.shape
    return contraction(b * m * k * batch2.shape[2], _scaled_add(out, beta, alpha))


@register(aten.mv)
def mv_cost(self: TensorMeta, vec: TensorMeta, *, out: TensorMeta, **_: Any) -> Cost:
    m, k = self.shape
    return contraction(m * k)


@register(aten.addmv)
def addmv_cost(self: TensorMeta, mat: TensorMeta, vec: TensorMeta, *, beta: Any = 1, alpha: Any = 1, out: TensorMeta, **_: Any) -> Cost:
    m, k = mat.shape
    return contraction(m * k, _scaled_add(out, beta, alpha))


@register(aten.dot, aten.vdot)
def dot_cost(self: TensorMeta, tensor: TensorMeta, *, out: TensorMeta, **_: Any) -> Cost:
    return contraction(self.numel)


@register(aten.linear)
def linear_cost(input: TensorMeta, weight: TensorMeta, bias: TensorMeta | None = None, *, out: TensorMeta, **_: Any) -> Cost:
    # every input row (input.numel / in_features of them) meets out_features weight rows of in_features
    in_features = weight.shape[-1]
    out_features = weight.shape[0] if weight.ndim == 2 else 1
    rows = input.numel // in_features
    return contraction(rows * in_features * out_features, 0 if bias is None else out.numel)


@register(aten.matmul)
def matmul_cost(self: TensorMeta, other: TensorMeta, *, out: Any, **_: Any) -> Cost:
    # with broadcasting, each output element is one dot product over the contracted dimension
    return contraction(first(out).numel * self.shape[-1])


@register(aten._grouped_mm)
def grouped_mm_cost(
    self: TensorMeta,
    mat2: TensorMeta,
    offs: TensorMeta | None = None,
    bias: TensorMeta | None = None,
    out_dtype: Any = None,
    *,
    out: TensorMeta,
    **_: Any,
) -> Cost:
    """Grouped matrix products (mixture-of-experts layers): every row meets exactly one group's matrix.

    The group sizes (``offs``) only say which rows go to which group, so the MACs follow from the shapes
    whatever the routing:

    * (T, K) x (G, K, N) with offs -> (T, N): each of the T rows meets one (K, N) matrix, T K N MACs;
    * (G, M, K) x (G, K, N), no offs: a batched product, G M K N;
    * (M, K) x (K, N) with offs over K -> (G, M, N): the K slices partition the sum, M K N;
    * (G, M, K) x (K, N) with offs over N -> (M, N): each output column meets one group, M K N.
    """
    if self.ndim == 3 and mat2.ndim == 3:
        g, m, k = self.shape
        macs = g * m * k * mat2.shape[2]
    else:
        k = self.shape[-1]
        rows = self.shape[-2]
        macs = rows * k * mat2.shape[-1]
    return contraction(macs, 0 if bias is None else out.numel)


@register(aten._trilinear)
def trilinear_cost(
    i1: TensorMeta,
    i2: TensorMeta,
    i3: TensorMeta,
    expand1: list[int],
    expand2: list[int],
    expand3: list[int],
    sumdim: list[int],
    unroll_dim: int = 1,
    *,
    out: TensorMeta,
    **_: Any,
) -> Cost:
    """``nn.Bilinear``'s kernel: out = sum over ``sumdim`` of i1 * i2 * i3, each broadcast to a common shape.

    Each term of the broadcast shape is one multiply-accumulate plus the second multiply of its three
    factors: for Bilinear(I, J, O) on N rows, N O I J terms, so N O I J MACs and 3 N O I J FLOPs.
    """
    shapes = [_unsqueezed(t.shape, e) for t, e in ((i1, expand1), (i2, expand2), (i3, expand3))]
    terms = 1
    for sizes in zip(*shapes, strict=True):
        terms *= max(sizes)
    return contraction(terms, terms)


def _unsqueezed(shape: tuple[int, ...], expand: list[int]) -> list[int]:
    full = list(shape)
    for dim in sorted(expand):
        full.insert(dim, 1)
    return full
