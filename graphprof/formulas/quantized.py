"""Quantized kernels (``quantized::`` ops of torch.ao, and aten's quantize / dequantize).

The contractions count as any other: a quantized convolution or linear layer's weight is packed in a
``torch.classes.quantized`` object, unpacked here to read its shape, and

    MACs = numel(output) x prod(weight.shape[1:])

(conv: C_in / groups x prod(kernel) products per output; linear: in_features). Integer kernels rescale
every output to its quantization scale ("requantize": 2 FLOPs per output element), and a fused ReLU or
a bias adds 1 per output element. Element-wise quantized ops cost their float rate plus the rescale.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from graphprof.formulas.common import contraction, first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.pooling import window_size
from graphprof.formulas.registry import register

aten = torch.ops.aten
quantized = torch.ops.quantized

__all__ = ["packed_weight_shape"]


def packed_weight_shape(packed: Any) -> tuple[tuple[int, ...], bool]:
    """The weight shape of a packed quantized conv / linear, and whether it has a bias."""
    weight, bias = packed.unpack()
    return tuple(weight.shape), bias is not None


def _contraction(qx: TensorMeta, packed: Any, *args: Any, out: Any, relu: bool) -> Cost:
    result = first(out)
    shape, has_bias = packed_weight_shape(packed)
    macs = result.numel * math.prod(shape[1:])
    per_output = flops_of("requantize", n_output=1) + int(has_bias) + int(relu)
    return contraction(macs, per_output * result.numel)


@register(quantized.conv1d, quantized.conv2d, quantized.conv3d, quantized.linear)
def quantized_contraction_cost(qx: TensorMeta, packed: Any, *args: Any, out: Any, **_: Any) -> Cost:
    return _contraction(qx, packed, out=out, relu=False)


@register(quantized.conv1d_relu, quantized.conv2d_relu, quantized.conv3d_relu, quantized.linear_relu)
def quantized_contraction_relu_cost(qx: TensorMeta, packed: Any, *args: Any, out: Any, **_: Any) -> Cost:
    return _contraction(qx, packed, out=out, relu=True)


def _elementwise(name: str, relu: bool = False) -> Any:
    def formula(*args: Any, out: Any, **_: Any) -> Cost:
        n = first(out).numel
        return Cost(flops=flops_of(name, n_output=n) + flops_of("requantize", n_output=n) + (n if relu else 0))

    formula.__name__ = formula.__qualname__ = f"quantized_{name}{'_relu' if relu else ''}_cost"
    return formula


register(quantized.add, quantized.add_scalar, quantized.mul, quantized.mul_scalar)(_elementwise("add"))
register(quantized.add_relu, quantized.mul_relu)(_elementwise("add", relu=True))
register(quantized.hardswish)(_elementwise("hardswish"))
register(quantized.cat)(_elementwise("copy"))


@register(aten.quantize_per_tensor, aten.quantize_per_channel)
def quantize_cost(self: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("quantize", n_output=first(out).numel))


@register(aten.dequantize)
def dequantize_cost(self: Any, *args: Any, out: Any, **_: Any) -> Cost:
    outputs = out if isinstance(out, (list, tuple)) else [out]
    return Cost(flops=sum(flops_of("dequantize", n_output=t.numel) for t in outputs))


@register(aten.quantized_max_pool1d, aten.quantized_max_pool2d, aten.quantized_max_pool3d)
def quantized_max_pool_cost(self: TensorMeta, kernel_size: Any, *args: Any, out: Any, **_: Any) -> Cost:
    result = first(out)
    dims = len(self.shape) - 2
    return Cost(flops=flops_of("max_pool", n_input=result.numel * window_size(kernel_size, dims), n_output=result.numel))
