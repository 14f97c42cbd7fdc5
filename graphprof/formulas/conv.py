"""Convolutions: 1d / 2d / 3d, transposed, grouped and depthwise, any stride, padding and dilation.

A regular convolution's weight is (C_out, C_in / groups, *kernel): every output element is a sum over
C_in / groups x prod(kernel) products, so

    MACs = numel(output) x C_in / groups x prod(kernel)

A transposed convolution's weight is (C_in, C_out / groups, *kernel): every *input* element is scattered
through C_out / groups x prod(kernel) products, so

    MACs = numel(input) x C_out / groups x prod(kernel)

Padded positions count (dense kernels multiply them), and output_padding adds output rows that receive no
products. A bias adds 1 FLOP per output element. This agrees with ``torch.utils.flop_counter``
(its flops = 2 x our MACs).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from graphprof.formulas.common import contraction
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import Formula, register

aten = torch.ops.aten

__all__ = ["conv_macs", "conv_cost"]


def conv_macs(input: TensorMeta, weight: TensorMeta, out: TensorMeta, transposed: bool) -> int:
    """MACs of one convolution (see the module docstring)."""
    per_element = weight.shape[1] * math.prod(weight.shape[2:])
    return (input.numel if transposed else out.numel) * per_element


def conv_cost(input: TensorMeta, weight: TensorMeta, bias: TensorMeta | None, out: TensorMeta, transposed: bool) -> Cost:
    """MACs of the convolution, plus 1 FLOP per output element for a bias."""
    return contraction(conv_macs(input, weight, out, transposed), 0 if bias is None else out.numel)


@register(aten.convolution, aten._convolution, aten.convolution_overrideable)
def convolution_cost(
    input: TensorMeta,
    weight: TensorMeta,
    bias: TensorMeta | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    *args: Any,
    out: TensorMeta,
    **_: Any,
) -> Cost:
    return conv_cost(input, weight, bias, out, transposed)


@register(aten.conv1d, aten.conv2d, aten.conv3d)
def conv_nd_cost(input: TensorMeta, weight: TensorMeta, bias: TensorMeta | None = None, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    # CompositeImplicit (reaches dispatch as aten.convolution); registered for graphs captured above it
    return conv_cost(input, weight, bias, out, transposed=False)


@register(aten.conv_transpose1d, aten.conv_transpose2d, aten.conv_transpose3d)
def conv_transpose_nd_cost(
    input: TensorMeta, weight: TensorMeta, bias: TensorMeta | None = None, *args: Any, out: TensorMeta, **_: Any
) -> Cost:
    # CompositeImplicit (reaches dispatch as aten.convolution); registered for graphs captured above it
    return conv_cost(input, weight, bias, out, transposed=True)


@register(aten.mkldnn_convolution)
def mkldnn_convolution_cost(self: TensorMeta, weight: TensorMeta, bias: TensorMeta | None, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    return conv_cost(self, weight, bias, out, transposed=False)


def _slow_conv(transposed: bool) -> Formula:  # a formula factory
    def formula(
        self: TensorMeta, weight: TensorMeta, kernel_size: Any, bias: TensorMeta | None = None, *args: Any, out: TensorMeta, **_: Any
    ) -> Cost:
        # the CPU's unfolded (im2col) kernels: (self, weight, kernel_size, bias, ...)
        return conv_cost(self, weight, bias, out, transposed=transposed)

    formula.__name__ = formula.__qualname__ = f"slow_conv[transposed={transposed}]"
    return formula


register(aten._slow_conv2d_forward, aten.slow_conv3d_forward, aten._conv_depthwise2d, aten.slow_conv_dilated2d, aten.slow_conv_dilated3d)(
    _slow_conv(transposed=False)
)
register(aten.slow_conv_transpose2d, aten.slow_conv_transpose3d)(_slow_conv(transposed=True))


@register(aten.cudnn_convolution)
def cudnn_convolution_cost(self: TensorMeta, weight: TensorMeta, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    return conv_cost(self, weight, None, out, transposed=False)


@register(aten.cudnn_convolution_transpose)
def cudnn_convolution_transpose_cost(self: TensorMeta, weight: TensorMeta, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    return conv_cost(self, weight, None, out, transposed=True)
