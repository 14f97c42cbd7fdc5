"""Output tensors of a few hot ops on a dry run, made straight from their inputs' metadata.

PyTorch has no C++ meta kernel for batch, layer and group normalisation: on the meta device and on
FakeTensors each call runs the op's Python decomposition (``torch._decomp``'s ``native_batch_norm_helper``
and its kin), some forty prims, each with its own meta function, to learn three shapes the op's
signature already fixes. That is 0.7 ms a call quiet (and 3 ms at a load of 2) on this machine, half of
a resnet50 dry run on meta and a third of yolov8n's.

The other rules answer what a CNN calls most on FakeTensors on the CPU, where each call is otherwise a
trip through the FakeTensor's dispatch (its cache key, and on the first call of each signature torch's
Python meta function): ``convolution`` (2-d and 3-d: the shape by the formula, the memory format as the
CPU's backend picks it, both asked of torch's own ``_select_conv_backend``), ``add.Tensor`` of two tensors
of one layout (a residual), the in-place activations (their output is their input) and ``empty`` (the
reserve tensor of each CPU batch norm). In a cold resnet50 batch-32 dry run they took 35 of the 49 ms of
FakeTensor dispatch; with the rules, all the dispatch takes 23.

:func:`dry_outputs` makes the same outputs (same shapes, strides, dtypes, device, and FakeTensors of the same
FakeTensorMode), each a meta tensor wrapped once. The op itself is still the event the tap reports, with
these outputs, so every count is the op's own formula on the same metadata. Only the calls whose outputs
are known here are answered (a dense input: contiguous, or channels-last where the op keeps it; a call
torch accepts); any other call returns ``None`` and runs torch's own path, which also raises torch's own
error for a call it rejects. ``tests/test_dry_shapes.py`` holds each rule against torch's result over
dtypes, layouts, ranks, train and eval, with and without affine weights and biases, and a whole dry run
with and without the rules.

Two regimes, as torch has them. On the meta device the rules follow the decompositions: the batch norms
save one statistic per channel in train and eval mode alike, and the batch and layer norms keep theirs in
the computation dtype (float32 for float16 and bfloat16 inputs). A FakeTensor on the CPU follows the CPU
kernels: statistics in the input's dtype, and none saved by a batch norm in eval mode. Group norm keeps
``(N, groups)`` statistics in the input's dtype in both; the functional batch norm also returns new running
statistics, per channel. The convolution, add, in-place and ``empty`` rules answer FakeTensors on the CPU
only. A FakeTensor on another device is left to torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DRY_SHAPE_OPS", "dry_outputs", "new_fake"]

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


def new_fake(
    mode: Any,
    device: torch.device,
    size: Any,
    dtype: torch.dtype,
    *,
    stride: Any = None,
    memory_format: torch.memory_format = torch.contiguous_format,
    requires_grad: bool = False,
    constant: torch.Tensor | None = None,
) -> torch.Tensor:
    """A FakeTensor of ``mode`` on ``device``, made from a meta tensor of that size and dtype (with ``stride``
    when given, else in ``memory_format``), with no trip through the mode's dispatch. ``constant`` keeps a
    small tensor's values and is mapped as ``from_real_tensor(make_constant=True)`` maps it, so an in-place
    write to it, or to an alias, makes torch forget them."""
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    with unset_fake_temporarily():  # a plain meta tensor, not one made by (and wrapped in) the fake mode
        if stride is None:
            meta = torch.empty(size, dtype=dtype, device="meta", memory_format=memory_format, requires_grad=requires_grad)
        else:
            meta = torch.empty_strided(size, stride, dtype=dtype, device="meta", requires_grad=requires_grad)
    fake = FakeTensor(mode, meta, device, constant=constant)
    if constant is not None:
        mode.fake_tensor_converter.add_constant_storage_mapping(fake)
    return fake


def _empty(
    x: torch.Tensor, shape: Any = None, dtype: torch.dtype | None = None, memory_format: torch.memory_format = torch.contiguous_format
) -> torch.Tensor:
    """A new tensor beside ``x``: ``x``'s own sizes and strides when ``shape`` is ``None`` (``empty_like`` of a
    dense input), else ``shape`` in ``memory_format``; ``x``'s dtype unless ``dtype`` is given. A FakeTensor's
    is :func:`new_fake` in the same fake mode."""
    dtype = dtype or x.dtype
    if _meta_kernels(x):
        return torch.empty_like(x) if shape is None else x.new_empty(shape, dtype=dtype)
    mode = x.fake_mode  # type: ignore[attr-defined]
    if shape is None:
        return new_fake(mode, x.device, x.size(), dtype, stride=x.stride())
    return new_fake(mode, x.device, shape, dtype, memory_format=memory_format)


def _batch_norm(x: torch.Tensor, weight: Any, bias: Any, mean: Any, var: Any, training: Any, *_: Any) -> tuple[torch.Tensor, ...] | None:
    """``native_batch_norm`` and ``_native_batch_norm_legit``: ``(out, save_mean, save_invstd)``, one statistic
    per channel (the CPU kernels save none in eval mode). In eval mode without running statistics torch
    raises; so does the dry run (torch's own path answers)."""
    if x.dim() < 2 or not _layout(x, channels_last_ok=True) or (not training and (mean is None or var is None)):
        return None
    saved = x.shape[1] if training or _meta_kernels(x) else 0
    dtype = _stats_dtype(x)
    return _empty(x), _empty(x, (saved,), dtype), _empty(x, (saved,), dtype)


def _batch_norm_no_stats(x: torch.Tensor, weight: Any, bias: Any, training: Any, *_: Any) -> tuple[torch.Tensor, ...] | None:
    """``_native_batch_norm_legit.no_stats``: batch statistics only, so training mode only."""
    return _batch_norm(x, weight, bias, None, None, training)


def _batch_norm_eval(x: torch.Tensor, weight: Any, bias: Any, mean: Any, var: Any, *_: Any) -> tuple[torch.Tensor, ...] | None:
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
    return (*out, _empty(x, (x.shape[1],), dtype), _empty(x, (x.shape[1],), dtype))


def _layer_norm(x: torch.Tensor, normalized_shape: Any, *_: Any) -> tuple[torch.Tensor, ...] | None:
    """``native_layer_norm``: ``(out, mean, rstd)``, the statistics shaped ``x.shape[:axis] + (1,) * k``."""
    k = len(normalized_shape)
    if not _layout(x, channels_last_ok=False) or k > x.dim():
        return None
    shape = (*x.shape[: x.dim() - k], *([1] * k))
    dtype = _stats_dtype(x)
    return _empty(x), _empty(x, shape, dtype), _empty(x, shape, dtype)


def _group_norm(x: torch.Tensor, weight: Any, bias: Any, n: Any, c: Any, hxw: Any, group: Any, *_: Any) -> tuple[torch.Tensor, ...] | None:
    """``native_group_norm``: ``(out, mean, rstd)``, the statistics ``(N, group)`` in the input's dtype."""
    if not _layout(x, channels_last_ok=False):
        return None
    return _empty(x), _empty(x, (n, group)), _empty(x, (n, group))


def _ints(value: Any, n: int) -> list[int] | None:
    """A convolution's stride, padding or dilation as ``n`` plain ints (one value stands for every dimension)."""
    values = [value] * n if isinstance(value, int) else list(value)
    if len(values) == 1:
        values = values * n
    return values if len(values) == n and all(type(v) is int for v in values) else None


def _conv_shape(x: torch.Tensor, weight: torch.Tensor, stride: Any, padding: Any, dilation: Any, groups: int) -> list[int] | None:
    """The output shape of a batched, non-transposed convolution, or ``None`` where the call is not one torch
    accepts (channels that do not divide, a bias or an output of the wrong size): torch's own path then
    raises its own error. ``(in + 2p - d(k - 1) - 1) // s + 1`` per spatial dimension."""
    n = weight.dim() - 2
    s, p, d = _ints(stride, n), _ints(padding, n), _ints(dilation, n)
    if s is None or p is None or d is None or type(groups) is not int or groups < 1:
        return None
    if x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
        return None
    if min(s) < 1 or min(p) < 0 or min(d) < 1:
        return None
    spatial = [
        (size + 2 * pi - di * (k - 1) - 1) // si + 1 for size, k, si, pi, di in zip(x.shape[2:], weight.shape[2:], s, p, d, strict=True)
    ]
    return [x.shape[0], weight.shape[0], *spatial] if min(spatial) >= 1 else None


def _convolution(
    x: torch.Tensor, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: Any, output_padding: Any, groups: Any
) -> torch.Tensor | None:
    """``convolution``, 2-d and 3-d, batched, not transposed, on a FakeTensor on the CPU: the output's shape by
    the formula, its memory format as torch's fake kernel picks it (the backend the CPU would select, then
    that backend's format, both asked of torch). Anything else (meta tensors, 1-d, transposed, unbatched,
    mixed dtypes or devices) goes to torch."""
    if transposed or not _fake_cpu(x, weight) or weight.dtype != x.dtype or x.dim() not in (4, 5) or weight.dim() != x.dim():
        return None
    if bias is not None and (
        not isinstance(bias, torch.Tensor) or bias.shape != (weight.shape[0],) or bias.dtype != x.dtype or bias.device != x.device
    ):
        return None
    shape = _conv_shape(x, weight, stride, padding, dilation, groups)
    if shape is None:
        return None
    backend = torch._C._select_conv_backend(
        x,
        weight,
        bias=bias,
        stride=stride,
        padding=padding,
        dilation=dilation,
        transposed=False,
        output_padding=output_padding,
        groups=groups,
    )
    memory_format = torch._C._conv_determine_backend_memory_format(x, weight, backend)
    return _empty(x, shape, memory_format=memory_format)


def _fake_cpu(*tensors: Any) -> bool:
    """Every value is a FakeTensor on the CPU."""
    return all(isinstance(t, torch.Tensor) and not _meta_kernels(t) and t.device.type == "cpu" for t in tensors)


def _in_place_unary(x: torch.Tensor, *_: Any) -> torch.Tensor | None:
    """An in-place activation (``relu_``, ``silu_`` ...) on a FakeTensor on the CPU: its output is its input,
    the same tensor (the version counter is bumped above the dispatcher's Python key, as for any in-place
    call). Its other arguments (``hardtanh_``'s bounds) change values, never metadata."""
    return x if _fake_cpu(x) else None


def _add(x: torch.Tensor, y: Any, *rest: Any) -> torch.Tensor | None:
    """``add.Tensor`` of two FakeTensors on the CPU with the same sizes, strides and dtype, ``x`` dense (a
    residual connection): the output takes that layout, as TensorIterator gives it. Broadcasting, type
    promotion, an ``alpha`` or any other layout goes to torch."""
    if rest or not _fake_cpu(x, y) or y.shape != x.shape or y.stride() != x.stride() or y.dtype != x.dtype:
        return None
    return _empty(x) if _layout(x, channels_last_ok=True) else None


_RULES: dict[Any, Callable[..., torch.Tensor | tuple[torch.Tensor, ...] | None]] = {
    aten.native_batch_norm.default: _batch_norm,
    aten._native_batch_norm_legit.default: _batch_norm,
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_eval,
    aten._native_batch_norm_legit_functional.default: _batch_norm_functional,
    aten.native_layer_norm.default: _layer_norm,
    aten.native_group_norm.default: _group_norm,
    aten.convolution.default: _convolution,
    aten.add.Tensor: _add,
    **{
        getattr(aten, name).default: _in_place_unary
        for name in ("relu_", "silu_", "hardswish_", "hardsigmoid_", "sigmoid_", "tanh_", "hardtanh_")
    },
}

#: The ops :func:`dry_outputs` may answer.
DRY_SHAPE_OPS = frozenset(_RULES) | {aten.empty.memory_format}


def _empty_constructor(
    size: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None, memory_format: Any = None
) -> torch.Tensor | None:
    """``empty.memory_format`` under a fake mode, on the CPU (the reserve tensor the CPU batch norm makes per
    call): a FakeTensor of that size, dtype and format, made from a meta tensor. Pinned memory, another
    layout or device, or no fake mode goes to torch."""
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    where = torch.device(device) if device is not None else torch.get_default_device()
    if mode is None or where.type != "cpu" or pin_memory or layout not in (None, torch.strided):
        return None
    if not isinstance(size, (list, tuple)) or not all(type(n) is int and n >= 0 for n in size):
        return None
    return new_fake(mode, where, size, dtype or torch.get_default_dtype(), memory_format=memory_format or torch.contiguous_format)


#: Constructors :func:`dry_outputs` may answer: no tensor argument, so no regime to read from one.
_CONSTRUCTORS: dict[Any, Callable[..., torch.Tensor | None]] = {aten.empty.memory_format: _empty_constructor}


def dry_outputs(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | tuple[torch.Tensor, ...] | None:
    """The outputs of ``func(*args, **kwargs)`` on a dry run (meta tensors or FakeTensors), or ``None`` where
    torch's own meta path must answer. Only called for ops in :data:`DRY_SHAPE_OPS`."""
    if func in _CONSTRUCTORS:
        return _CONSTRUCTORS[func](*args, **kwargs)
    x = args[0] if args else None
    if kwargs or not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return None  # keywords, or an input the rules do not describe: torch's own path
    if _constants_in_play(func, args):
        return None
    return _RULES[func](*args, **kwargs)


@functools.cache
def _written(func: Any) -> tuple[int, ...]:
    """The positions of the arguments ``func``'s schema says it writes (``Tensor(a!)``), read once per op."""
    return tuple(i for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write)


def _constants_in_play(func: Any, args: tuple[Any, ...]) -> bool:
    """Whether torch's fake mode would do more than make outputs for this call: every tensor argument keeps
    its values (a small constant: torch computes on them), or the call writes to one that does (torch then
    forgets its values, so a later ``.item()`` never reads stale ones). A batch norm that only reads small
    running statistics kept as constants (64 channels or fewer) is still answered."""
    kept = [getattr(a, "constant", None) is not None for a in args if isinstance(a, torch.Tensor)]
    if kept and all(kept):
        return True
    return any(i < len(args) and getattr(args[i], "constant", None) is not None for i in _written(func))
