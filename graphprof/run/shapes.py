"""Output tensors of the normalisation ops on a dry run, made straight from their inputs' metadata.

PyTorch has no C++ meta kernel for batch, layer and group normalisation: on the meta device and on
FakeTensors each call runs the op's Python decomposition (``torch._decomp``'s ``native_batch_norm_helper``
and its kin), some forty prims, each with its own meta function, to learn three shapes the op's
signature already fixes. That is 0.7 ms a call quiet (and 3 ms at a load of 2) on this machine, half of
a resnet50 dry run on meta and a third of yolov8n's.

:func:`dry_outputs` makes the same outputs (same shapes, strides, dtypes, device, and FakeTensors under a
FakeTensorMode) with one ``empty_like``/``new_empty`` each. The op itself is still the event the tap
reports, with these outputs, so every count is the op's own formula on the same metadata. Only the
layouts whose outputs are known here are answered (a dense input: contiguous, or channels-last for the
batch norms); any other call returns ``None`` and runs torch's own decomposition.
``tests/test_dry_shapes.py`` holds each rule against torch's meta result over dtypes, layouts, ranks,
train and eval, with and without affine weights.

Two regimes, as torch has them. On the meta device the rules follow the decompositions: the batch norms
save one statistic per channel in train and eval mode alike, and the batch and layer norms keep theirs in
the computation dtype (float32 for float16 and bfloat16 inputs). A FakeTensor on the CPU follows the CPU
kernels: statistics in the input's dtype, and none saved by a batch norm in eval mode. Group norm keeps
``(N, groups)`` statistics in the input's dtype in both; the functional batch norm also returns new running
statistics, per channel. A FakeTensor on another device is left to torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DRY_SHAPE_OPS", "dry_outputs"]

aten = torch.ops.aten

_HALF = (torch.float16, torch.bfloat16)


def _meta_kernels(x: torch.Tensor) -> bool:
    """Whether ``x`` runs torch's meta kernels (the decompositions), not a FakeTensor's CPU semantics."""
    from torch._subclasses.fake_tensor import FakeTensor

    return not isinstance(x, FakeTensor)


def _stats_dtype(x: torch.Tensor) -> torch.dtype:
    """The statistics' dtype: the meta decompositions compute in float32 for the half types; a FakeTensor on
    the CPU follows the CPU kernels, which keep the input's dtype."""
    return torch.float32 if _meta_kernels(x) and x.dtype in _HALF else x.dtype


def _layout(x: torch.Tensor, channels_last_ok: bool) -> bool:
    """Whether ``empty_like(x)`` is the output's layout here: a dense contiguous input (or a channels-last
    one, for the ops that keep it), on the meta device or a FakeTensor on the CPU."""
    if not (x.is_meta or x.device.type == "cpu"):
        return False
    if x.is_contiguous():
        return True
    if not channels_last_ok:
        return False
    if x.dim() == 4:
        return x.is_contiguous(memory_format=torch.channels_last)
    return x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d)


def _batch_norm(
    x: torch.Tensor, weight: Any, bias: Any, mean: Any, var: Any, training: Any, *_: Any
) -> tuple[torch.Tensor, ...] | None:
    """``native_batch_norm`` and ``_native_batch_norm_legit``: ``(out, save_mean, save_invstd)``, one statistic
    per channel (the CPU kernels save none in eval mode). In eval mode without running statistics torch
    raises; so does the dry run (torch's own path answers)."""
    if x.dim() < 2 or not _layout(x, channels_last_ok=True) or (not training and (mean is None or var is None)):
        return None
    saved = x.shape[1] if training or _meta_kernels(x) else 0
    dtype = _stats_dtype(x)
    return torch.empty_like(x), x.new_empty((saved,), dtype=dtype), x.new_empty((saved,), dtype=dtype)


def _batch_norm_no_stats(
    x: torch.Tensor, weight: Any, bias: Any, training: Any, *_: Any
) -> tuple[torch.Tensor, ...] | None:
    """``_native_batch_norm_legit.no_stats``: batch statistics only, so training mode only."""
    return _batch_norm(x, weight, bias, None, None, training)


def _batch_norm_eval(
    x: torch.Tensor, weight: Any, bias: Any, mean: Any, var: Any, *_: Any
) -> tuple[torch.Tensor, ...] | None:
    """``_native_batch_norm_legit_no_training``: the running statistics are required arguments."""
    return _batch_norm(x, weight, bias, mean, var, False)


def _batch_norm_functional(
    x: torch.Tensor, weight: Any, bias: Any, mean: Any, var: Any, training: Any, *_: Any
) -> tuple[torch.Tensor, ...] | None:
    """``_native_batch_norm_legit_functional``: the three outputs, then the new running mean and variance, one
    per channel, in the computation dtype (float32 for the half types) in both regimes."""
    out = _batch_norm(x, weight, bias, mean, var, training)
    if out is None or not isinstance(mean, torch.Tensor) or not isinstance(var, torch.Tensor):
        return None
    dtype = torch.float32 if x.dtype in _HALF else x.dtype
    return (*out, x.new_empty((x.shape[1],), dtype=dtype), x.new_empty((x.shape[1],), dtype=dtype))


def _layer_norm(x: torch.Tensor, normalized_shape: Any, *_: Any) -> tuple[torch.Tensor, ...] | None:
    """``native_layer_norm``: ``(out, mean, rstd)``, the statistics shaped ``x.shape[:axis] + (1,) * k``."""
    k = len(normalized_shape)
    if not _layout(x, channels_last_ok=False) or k > x.dim():
        return None
    shape = (*x.shape[: x.dim() - k], *([1] * k))
    dtype = _stats_dtype(x)
    return torch.empty_like(x), x.new_empty(shape, dtype=dtype), x.new_empty(shape, dtype=dtype)


def _group_norm(
    x: torch.Tensor, weight: Any, bias: Any, n: Any, c: Any, hxw: Any, group: Any, *_: Any
) -> tuple[torch.Tensor, ...] | None:
    """``native_group_norm``: ``(out, mean, rstd)``, the statistics ``(N, group)`` in the input's dtype."""
    if not _layout(x, channels_last_ok=False):
        return None
    return torch.empty_like(x), x.new_empty((n, group)), x.new_empty((n, group))


_RULES: dict[Any, Callable[..., tuple[torch.Tensor, ...] | None]] = {
    aten.native_batch_norm.default: _batch_norm,
    aten._native_batch_norm_legit.default: _batch_norm,
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_eval,
    aten._native_batch_norm_legit_functional.default: _batch_norm_functional,
    aten.native_layer_norm.default: _layer_norm,
    aten.native_group_norm.default: _group_norm,
}

#: The ops :func:`dry_outputs` may answer.
DRY_SHAPE_OPS = frozenset(_RULES)


def dry_outputs(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[torch.Tensor, ...] | None:
    """The outputs of ``func(*args, **kwargs)`` on a dry run (meta tensors or FakeTensors), or ``None`` where
    torch's own meta path must answer. Only called for ops in :data:`DRY_SHAPE_OPS`."""
    x = args[0] if args else None
    if kwargs or not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return None  # keywords, or an input the rules do not describe: torch's own path
    return _RULES[func](*args, **kwargs)
