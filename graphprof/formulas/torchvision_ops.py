"""Formulas for torchvision's detection ops (``torch.ops.torchvision``).

Imported by the registry the first time an op of the ``torchvision`` namespace is looked up, so graphprof
never imports torchvision itself; by then torchvision has loaded its ops.

Both ops here depend on data a formula cannot see, so their counts are upper bounds or typical values:
``nms`` compares every pair of boxes (it stops early in practice), ``roi_align`` with an adaptive
``sampling_ratio`` (<= 0) is counted at 2 x 2 samples per bin, the value torchvision's detectors use.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torchvision  # noqa: F401  (registers torch.ops.torchvision; already loaded when the registry imports us)

from graphprof.formulas.common import by_name, contraction, first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

torchvision_ops = torch.ops.torchvision

_ADAPTIVE_SAMPLES_PER_BIN = 4  # 2 x 2, torchvision detectors' sampling_ratio


@register(torchvision_ops.nms)
def nms_cost(dets: TensorMeta, scores: TensorMeta, iou_threshold: float, *, out: Any, **_: Any) -> Cost:
    # sort the scores, then IoU of every pair of boxes (an upper bound: suppressed boxes are skipped)
    n = dets.shape[0]
    levels = math.ceil(math.log2(n)) if n > 1 else 0
    pairs = n * (n - 1) // 2
    return Cost(flops=flops_of("sort", n_input=n * levels) + flops_of("nms", n_input=pairs))


def _roi_align_cost(sampling_ratio: int, *, out: Any, grad: TensorMeta | None = None, **_: Any) -> Cost:
    # forward: per output bin, sample the input at the bin's points (4 neighbours, 4 weights each) and
    # average; backward (grad given): the forward run backwards, each bin's gradient divided by its sample
    # count, then spread over the 4 neighbours of every sample point (4 weights x gradient, 4 adds)
    bins = (first(out) if grad is None else grad).numel
    samples = sampling_ratio * sampling_ratio if sampling_ratio > 0 else _ADAPTIVE_SAMPLES_PER_BIN
    return Cost(flops=flops_of("roi_align", n_input=bins * samples, n_output=bins))


for _packet in (torchvision_ops.roi_align, torchvision_ops._roi_align_backward):
    register(_packet)(by_name(_packet, _roi_align_cost))


@register(torchvision_ops.deform_conv2d)
def deform_conv2d_cost(
    input: TensorMeta, weight: TensorMeta, offset: TensorMeta, mask: TensorMeta, bias: TensorMeta, *args: Any, out: TensorMeta, **_: Any
) -> Cost:
    # a convolution over bilinearly sampled (and, with use_mask, modulated) input columns
    use_mask = bool(args[-1]) if args and isinstance(args[-1], bool) else False
    kernel = math.prod(weight.shape[2:])
    macs = out.numel * weight.shape[1] * kernel
    batch, out_spatial = out.shape[0], math.prod(out.shape[2:])
    sampled = batch * input.shape[1] * kernel * out_spatial
    sampling = flops_of("upsample_bilinear", n_output=sampled) + (sampled if use_mask else 0)
    return contraction(macs, sampling + (out.numel if bias.numel else 0))
