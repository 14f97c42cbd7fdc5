"""Normalisations: batch / layer / group / RMS norm, softmax and log-softmax.

All are costed per element of the normalised input at their table rates. Batch norm folds its running
statistics and affine into one scale and shift per channel, so inference is ``x * scale + shift``;
training first computes the batch statistics. Layer norm's weight and bias act per element (its
statistics are per row), so each adds a ``mul`` / ``add`` per element.
"""

from __future__ import annotations

from typing import Any

import torch

from graphprof.formulas.common import flops_of, per_input_and_output
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

aten = torch.ops.aten


def batch_norm_flops(input: TensorMeta, training: bool) -> int:
    return flops_of("batch_norm_training" if training else "batch_norm_inference", n_input=input.numel)


def layer_norm_flops(input: TensorMeta, weight: TensorMeta | None, bias: TensorMeta | None) -> int:
    n = input.numel
    affine = (weight is not None) * flops_of("mul", n_output=n) + (bias is not None) * flops_of("add", n_output=n)
    return flops_of("layer_norm", n_input=n) + affine


@register(aten.native_batch_norm, aten._native_batch_norm_legit_functional, aten.cudnn_batch_norm, aten.miopen_batch_norm, aten.batch_norm)
def batch_norm_cost(
    input: TensorMeta,
    weight: TensorMeta | None,
    bias: TensorMeta | None,
    running_mean: TensorMeta | None,
    running_var: TensorMeta | None,
    training: bool,
    *args: Any,
    out: Any,
    **_: Any,
) -> Cost:
    return Cost(flops=batch_norm_flops(input, training))


@register(aten._native_batch_norm_legit)
def native_batch_norm_legit_cost(
    input: TensorMeta, weight: TensorMeta | None, bias: TensorMeta | None, *args: Any, out: Any, **_: Any
) -> Cost:
    # .default passes (running_mean, running_var, training, ...), .no_stats passes (training, ...):
    # training is the first bool after the affine parameters either way
    training = next(a for a in args if isinstance(a, bool))
    return Cost(flops=batch_norm_flops(input, training))


@register(aten._native_batch_norm_legit_no_training, aten._batch_norm_no_update)
def batch_norm_inference_cost(input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=batch_norm_flops(input, training=False))


@register(aten._batch_norm_with_update, aten._batch_norm_with_update_functional, aten.instance_norm)
def batch_norm_training_cost(input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # instance norm always normalises with the statistics of its input
    return Cost(flops=batch_norm_flops(input, training=True))


@register(aten.native_layer_norm, aten.layer_norm)
def layer_norm_cost(
    input: TensorMeta,
    normalized_shape: Any,
    weight: TensorMeta | None = None,
    bias: TensorMeta | None = None,
    *args: Any,
    out: Any,
    **_: Any,
) -> Cost:
    return Cost(flops=layer_norm_flops(input, weight, bias))


@register(aten.native_group_norm)
def native_group_norm_cost(input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("group_norm", n_input=input.numel))


@register(aten.group_norm)
def group_norm_cost(input: TensorMeta, num_groups: int, *args: Any, out: Any, **_: Any) -> Cost:
    # CompositeImplicit (reaches dispatch as native_group_norm); registered for captured graphs
    return Cost(flops=flops_of("group_norm", n_input=input.numel))


@register(aten._fused_rms_norm, aten.rms_norm)
def rms_norm_cost(input: TensorMeta, normalized_shape: Any, weight: TensorMeta | None = None, *args: Any, out: Any, **_: Any) -> Cost:
    n = input.numel
    return Cost(flops=flops_of("rms_norm", n_input=n) + (weight is not None) * flops_of("mul", n_output=n))


register(aten._softmax, aten.softmax)(per_input_and_output("softmax"))
register(aten._log_softmax, aten.log_softmax)(per_input_and_output("log_softmax"))
register(aten._safe_softmax)(per_input_and_output("safe_softmax"))


@register(aten._weight_norm_interface)
def weight_norm_cost(v: TensorMeta, g: TensorMeta, dim: int = 0, *, out: Any, **_: Any) -> Cost:
    # w = g * v / ||v|| per slice along dim: square and add per element of v (2), a sqrt and a divide
    # g / norm per slice (2 per element of g), then one multiply per element of v
    return Cost(flops=3 * v.numel + 2 * g.numel)
