"""Backward ops: what ``loss.backward()`` / ``torch.autograd.grad`` reaches at dispatch.

Matrix products in backward are plain ``mm`` / ``bmm`` / ``addmm`` calls (see :mod:`.matmul`); the rest
are here. Where an op takes an ``output_mask``, only the requested gradients are costed.

* convolution: grad_input is a transposed convolution of grad_output with the weight and grad_weight a
  convolution of the input with grad_output; each has exactly the forward's MACs, so input + weight
  gradients are 2 x the forward MACs. grad_bias sums grad_output (1 add per element).
* attention: with the forward kernels, in :mod:`.attention`.
* normalisation, activations, pooling, interpolation: per-element rates from the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from graphprof.formulas.common import by_name, elementwise, first, flops_of, io_bytes, per_input_and_output
from graphprof.formulas.conv import conv_macs
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.pooling import adaptive_window_elements, window_size
from graphprof.formulas.registry import register
from graphprof.formulas.resample import GRID_MODES_2D, GRID_MODES_3D

aten = torch.ops.aten


def _mask(output_mask: Sequence[bool] | None, n: int) -> list[bool]:
    return [True] * n if output_mask is None else list(output_mask)


# ---- convolution -----------------------------------------------------------------------------------


def _conv_backward_cost(
    grad_output: TensorMeta, input: TensorMeta, weight: TensorMeta, transposed: bool, output_mask: Sequence[bool], *, out: Any, **_: Any
) -> Cost:
    want_input, want_weight, want_bias = _mask(output_mask, 3)
    forward_macs = conv_macs(input, weight, grad_output, transposed)
    macs = forward_macs * (want_input + want_weight)
    bias_adds = grad_output.numel if want_bias else 0
    # grad_input needs the weight, grad_weight the input, grad_bias only grad_output
    read, written = io_bytes(
        [grad_output, weight if want_input else None, input if want_weight else None], [t for t in out if isinstance(t, TensorMeta)]
    )
    return Cost(macs=macs, flops=2 * macs + bias_adds, bytes_read=read, bytes_written=written)


for _packet in (aten.convolution_backward, aten.convolution_backward_overrideable):
    register(_packet)(by_name(_packet, _conv_backward_cost))


# ---- normalisation ---------------------------------------------------------------------------------


def batch_norm_backward_flops(input: TensorMeta, training: bool, output_mask: Sequence[bool] | None) -> int:
    want_input, want_weight, want_bias = _mask(output_mask, 3)
    n = input.numel
    flops = 0
    if want_weight or want_bias or (want_input and training):
        # sum(dy) and sum(dy * xhat) are grad_bias and grad_weight, and the statistics grad_input needs
        flops += flops_of("batch_norm_backward_stats", n_input=n)
    if want_input:
        name = "batch_norm_backward_input" if training else "batch_norm_backward_input_inference"
        flops += flops_of(name, n_input=n)
    return flops


@register(aten.native_batch_norm_backward)
def native_batch_norm_backward_cost(
    grad_out: TensorMeta,
    input: TensorMeta,
    weight: TensorMeta | None,
    running_mean: TensorMeta | None,
    running_var: TensorMeta | None,
    save_mean: TensorMeta | None,
    save_invstd: TensorMeta | None,
    train: bool,
    eps: float,
    output_mask: Sequence[bool],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    return Cost(flops=batch_norm_backward_flops(input, train, output_mask))


@register(aten.batch_norm_backward)
def batch_norm_backward_cost(
    grad_out: TensorMeta,
    input: TensorMeta,
    weight: TensorMeta,
    running_mean: TensorMeta | None,
    running_var: TensorMeta | None,
    save_mean: TensorMeta | None,
    save_var: TensorMeta | None,
    update: bool,
    eps: float,
    output_mask: Sequence[bool],
    *args: Any,
    out: Any,
    **_: Any,
) -> Cost:
    return Cost(flops=batch_norm_backward_flops(input, update, output_mask))


@register(aten.cudnn_batch_norm_backward, aten.miopen_batch_norm_backward)
def cudnn_batch_norm_backward_cost(input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # training-mode backward, all three gradients
    return Cost(flops=batch_norm_backward_flops(input, True, None))


def layer_norm_backward_flops(input: TensorMeta, output_mask: Sequence[bool] | None) -> int:
    want_input, want_weight, want_bias = _mask(output_mask, 3)
    n = input.numel
    return (
        want_input * flops_of("layer_norm_backward_input", n_input=n)
        + want_weight * flops_of("layer_norm_backward_weight", n_input=n)
        + want_bias * flops_of("layer_norm_backward_bias", n_input=n)
    )


@register(aten.native_layer_norm_backward)
def native_layer_norm_backward_cost(
    grad_out: TensorMeta,
    input: TensorMeta,
    normalized_shape: Any,
    mean: TensorMeta,
    rstd: TensorMeta,
    weight: TensorMeta | None,
    bias: TensorMeta | None,
    output_mask: Sequence[bool],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    return Cost(flops=layer_norm_backward_flops(input, output_mask))


@register(aten.native_group_norm_backward)
def native_group_norm_backward_cost(
    grad_out: TensorMeta,
    input: TensorMeta,
    mean: TensorMeta,
    rstd: TensorMeta,
    weight: TensorMeta | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    output_mask: Sequence[bool],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    # same per-element work as layer norm's backward, with statistics per (sample, group)
    return Cost(flops=layer_norm_backward_flops(input, output_mask))


@register(aten._fused_rms_norm_backward)
def rms_norm_backward_cost(
    grad_out: TensorMeta,
    input: TensorMeta,
    normalized_shape: Any,
    rstd: TensorMeta,
    weight: TensorMeta | None,
    output_mask: Sequence[bool],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    want_input, want_weight = _mask(output_mask, 2)
    n = input.numel
    return Cost(
        flops=want_input * flops_of("rms_norm_backward_input", n_input=n) + want_weight * flops_of("rms_norm_backward_weight", n_input=n)
    )


# ---- element-wise: activations, dropout, softmax: the table rate per element of the gradient produced --


for _name in (
    "threshold_backward", "hardtanh_backward", "leaky_relu_backward", "elu_backward", "sigmoid_backward",
    "tanh_backward", "silu_backward", "hardsigmoid_backward", "hardswish_backward", "softplus_backward",
    "mish_backward", "log_sigmoid_backward", "native_dropout_backward",
):  # fmt: skip
    register(getattr(aten, _name))(elementwise(_name))
register(aten._prelu_kernel_backward)(elementwise("_prelu_kernel_backward"))
register(aten._softmax_backward_data)(elementwise("softmax_backward"))
register(aten._log_softmax_backward_data)(elementwise("log_softmax_backward"))
register(aten.glu_backward)(per_input_and_output("glu_backward"))


@register(aten.gelu_backward)
def gelu_backward_cost(grad_output: TensorMeta, self: TensorMeta, *, approximate: str = "none", out: Any, **_: Any) -> Cost:
    name = "gelu_tanh_backward" if approximate == "tanh" else "gelu_backward"
    return Cost(flops=flops_of(name, n_output=first(out).numel))


# ---- pooling ---------------------------------------------------------------------------------------


def _max_pool_backward(*args: Any, out: Any, **kwargs: Any) -> Cost:
    # one scatter-add per grad_output element (args[0]) to its recorded argmax
    return Cost(flops=flops_of("max_pool_backward", n_output=args[0].numel))


register(
    aten.max_pool2d_with_indices_backward,
    aten.max_pool3d_with_indices_backward,
    aten.adaptive_max_pool2d_backward,
    aten.adaptive_max_pool3d_backward,
)(_max_pool_backward)


def _avg_pool_backward(dims: int) -> Callable[..., Cost]:
    def formula(grad_output: TensorMeta, self: TensorMeta, kernel_size: Any, *args: Any, out: Any, **_: Any) -> Cost:
        window = window_size(kernel_size, dims)
        n = grad_output.numel
        return Cost(flops=flops_of("avg_pool_backward", n_input=n * window, n_output=n))

    formula.__name__ = formula.__qualname__ = f"avg_pool{dims}d_backward_cost"
    return formula


register(aten.avg_pool2d_backward)(_avg_pool_backward(2))
register(aten.avg_pool3d_backward)(_avg_pool_backward(3))


def _adaptive_avg_pool_backward(dims: int) -> Callable[..., Cost]:
    def formula(grad_output: TensorMeta, self: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
        elements = adaptive_window_elements(self, grad_output, dims)
        return Cost(flops=flops_of("avg_pool_backward", n_input=elements, n_output=grad_output.numel))

    formula.__name__ = formula.__qualname__ = f"adaptive_avg_pool{dims}d_backward_cost"
    return formula


register(aten._adaptive_avg_pool2d_backward)(_adaptive_avg_pool_backward(2))
register(aten._adaptive_avg_pool3d_backward)(_adaptive_avg_pool_backward(3))


# ---- interpolation, padding, embedding ----------------------------------------------------------------


def _per_grad_output(name: str) -> Callable[..., Cost]:
    """Factory: the table rate per element of grad_output, the op's first argument."""
    per_output = flops_of(name, n_output=1)

    def formula(grad_output: TensorMeta, *args: Any, out: Any, **kwargs: Any) -> Cost:
        return Cost(flops=per_output * grad_output.numel)

    formula.__name__ = formula.__qualname__ = f"{name}_cost"
    return formula


register(
    aten.upsample_nearest1d_backward, aten.upsample_nearest2d_backward, aten.upsample_nearest3d_backward,
    aten._upsample_nearest_exact1d_backward, aten._upsample_nearest_exact2d_backward,
    aten._upsample_nearest_exact3d_backward,
)(_per_grad_output("upsample_nearest_backward"))  # fmt: skip
register(aten.upsample_linear1d_backward)(_per_grad_output("upsample_linear_backward"))
register(aten.upsample_bilinear2d_backward, aten._upsample_bilinear2d_aa_backward)(_per_grad_output("upsample_bilinear_backward"))
register(aten.upsample_bicubic2d_backward, aten._upsample_bicubic2d_aa_backward)(_per_grad_output("upsample_bicubic_backward"))
register(aten.upsample_trilinear3d_backward)(_per_grad_output("upsample_trilinear_backward"))
register(
    aten.reflection_pad1d_backward, aten.reflection_pad2d_backward, aten.reflection_pad3d_backward,
    aten.replication_pad1d_backward, aten.replication_pad2d_backward, aten.replication_pad3d_backward,
)(_per_grad_output("pad_backward"))  # fmt: skip
register(aten.embedding_dense_backward)(_per_grad_output("embedding_backward"))
register(aten.unfold_backward)(_per_grad_output("add"))  # overlapping windows accumulate: one add each


@register(aten.grid_sampler_2d_backward, aten.grid_sampler_3d_backward)
def grid_sampler_backward_cost(
    grad_output: TensorMeta, input: TensorMeta, grid: TensorMeta, interpolation_mode: int = 0, *args: Any, out: Any, **_: Any
) -> Cost:
    # recompute the weights per grid point; per grad_output element, scatter into grad_input and
    # accumulate grad_grid, each about one forward interpolation
    dims = grid.shape[-1]
    modes = GRID_MODES_2D if dims == 2 else GRID_MODES_3D
    interpolation = flops_of(modes[interpolation_mode], n_output=grad_output.numel)
    return Cost(flops=flops_of("grid_sample", n_input=grid.numel // dims) + 2 * interpolation)


# zeros of the input's size with the gradient copied into the viewed region: bytes only
register(aten.select_backward, aten.slice_backward, aten.diagonal_backward)(elementwise("copy"))


# ---- losses ----------------------------------------------------------------------------------------


@register(aten.nll_loss_backward, aten.nll_loss2d_backward)
def nll_loss_backward_cost(grad_output: TensorMeta, self: TensorMeta, target: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("nll_loss_backward", n_input=target.numel))


@register(aten.smooth_l1_loss_backward, aten.huber_loss_backward)
def smooth_l1_loss_backward_cost(grad_output: TensorMeta, self: TensorMeta, target: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("smooth_l1_loss_backward", n_input=self.numel))


@register(aten.binary_cross_entropy_backward)
def binary_cross_entropy_backward_cost(
    grad_output: TensorMeta, self: TensorMeta, target: TensorMeta, *args: Any, out: Any, **_: Any
) -> Cost:
    return Cost(flops=flops_of("binary_cross_entropy_backward", n_input=self.numel))


@register(aten._cdist_backward)
def cdist_backward_cost(grad: TensorMeta, x1: TensorMeta, x2: TensorMeta, p: float, cdist: TensorMeta, *, out: Any, **_: Any) -> Cost:
    # the gradient of x1 only (autograd calls it again with x1 and x2 swapped for x2's)
    return Cost(flops=flops_of("cdist_backward", n_input=cdist.numel * x1.shape[-1], n_output=cdist.numel))


@register(aten.mse_loss_backward)
def mse_loss_backward_cost(grad_output: TensorMeta, self: TensorMeta, target: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("mse_loss_backward", n_input=self.numel))
