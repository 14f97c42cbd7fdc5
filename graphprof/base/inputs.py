"""Example inputs: describe them as data, resize them for another batch, resolution or sequence length.

A prepared model keeps one set of example inputs; :func:`resize_inputs` derives inputs of another size
from them without building anything, so a sweep point costs a dry run rather than a new model. On the
meta device and for dry runs the tensors hold no data; elsewhere they are seeded (never the global RNG).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from graphprof.errors import InvalidInputError

__all__ = ["INPUT_SEED", "InputSpec", "describe_inputs", "format_inputs", "resize_inputs", "materialize", "SEQUENCE_KEYS"]

INPUT_SEED = 0
"""Seed of every example input: the same spec always gets the same numbers."""

#: Keyword inputs of transformers models whose second dimension is the sequence.
SEQUENCE_KEYS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds", "labels")

Shape = tuple[int, ...]


@dataclass(frozen=True)
class InputSpec:
    """One input tensor: where it goes (``args[0]``, ``args[0][1]``, ``input_ids``), its shape and the dtype
    it is counted in (the ``--dtype`` of the run for floating-point inputs)."""

    name: str
    shape: Shape
    dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe_inputs(args: tuple[Any, ...], kwargs: dict[str, Any], run_dtype: torch.dtype | None = None) -> tuple[InputSpec, ...]:
    """Every tensor among ``args``/``kwargs``, named by where it goes."""
    specs: list[InputSpec] = []

    def walk(value: Any, name: str) -> None:
        if isinstance(value, torch.Tensor):
            dtype = run_dtype if run_dtype is not None and value.is_floating_point() else value.dtype
            specs.append(InputSpec(name, tuple(int(s) for s in value.shape), _dtype_name(dtype)))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{name}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{name}.{k}" if name else str(k))

    for i, a in enumerate(args):
        walk(a, f"args[{i}]")
    for k, v in kwargs.items():
        walk(v, str(k))
    return tuple(specs)


def format_inputs(specs: Sequence[InputSpec]) -> str:
    """``"64x3x224x224 bfloat16"``; with several inputs each is named: ``"input_ids: 1x128 int64; ..."``."""
    if len(specs) == 1 and specs[0].name == "args[0]":
        return f"{'x'.join(map(str, specs[0].shape))} {specs[0].dtype}"
    return "; ".join(f"{s.name}: {'x'.join(map(str, s.shape))} {s.dtype}" for s in specs)


def _like(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """A tensor of ``shape`` with ``t``'s dtype and device: empty on meta, seeded values elsewhere."""
    shape = tuple(int(s) for s in shape)
    if t.is_meta:
        return torch.empty(shape, dtype=t.dtype, device=t.device)
    generator = torch.Generator().manual_seed(INPUT_SEED)
    if t.is_floating_point():
        return torch.randn(shape, generator=generator, dtype=t.dtype).to(t.device)
    high = max(int(t.max()) + 1, 1) if t.numel() else 1
    return torch.randint(0, high, shape, generator=generator, dtype=t.dtype).to(t.device)


def _batch_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    for value in [*args, *kwargs.values()]:
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
        if isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value):
            return len(value)
    return None


def resize_inputs(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    batch_size: int | None = None,
    input_shape: Sequence[int] | None = None,
    seq_len: int | None = None,
    what: str = "the model",
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Inputs like ``args``/``kwargs`` with another batch size, input shape or sequence length.

    * ``batch_size``: every tensor whose first dimension is the batch gets ``batch_size`` there; a list
      of images (detection) gets that many images.
    * ``input_shape``: the first input takes this shape (for a list of images, ``N, C, H, W`` means N
      images of ``C x H x W``; for an image pair, both images); the other inputs follow its batch.
    * ``seq_len``: the second dimension of the sequence inputs (:data:`SEQUENCE_KEYS`).

    >>> args, _ = resize_inputs((torch.empty(1, 3, 224, 224, device="meta"),), {}, batch_size=8)
    >>> tuple(args[0].shape)
    (8, 3, 224, 224)
    """
    if input_shape is not None:
        args, kwargs = _reshape_first(args, kwargs, tuple(input_shape), what)
    if seq_len is not None:
        if seq_len <= 0:
            raise InvalidInputError(f"sequence length must be positive, got {seq_len}")
        keys = [k for k in SEQUENCE_KEYS if isinstance(kwargs.get(k), torch.Tensor) and kwargs[k].dim() >= 2]
        if not keys:
            raise InvalidInputError(f"{what} has no sequence input ({', '.join(SEQUENCE_KEYS[:3])}, ...) to set a sequence length on")
        kwargs = dict(kwargs)
        for k in keys:
            t = kwargs[k]
            kwargs[k] = _like(t, (t.shape[0], seq_len, *t.shape[2:]))
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidInputError(f"batch size must be a positive integer, got {batch_size!r}")
        old = _batch_of(args, kwargs)
        if old is None:
            raise InvalidInputError(f"{what} takes no batched tensor input, so its batch size cannot be set")
        if old != batch_size:
            args = tuple(_rebatch(a, old, batch_size) for a in args)
            kwargs = {k: _rebatch(v, old, batch_size) for k, v in kwargs.items()}
    return args, kwargs


def _rebatch(value: Any, old: int, new: int) -> Any:
    if isinstance(value, torch.Tensor):
        if value.dim() > 0 and value.shape[0] == old:
            return _like(value, (new, *value.shape[1:]))
        return value
    if isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value) and len(value) == old:
        return [value[i % old] for i in range(new)]
    if isinstance(value, tuple):
        return tuple(_rebatch(v, old, new) for v in value)
    return value


def _reshape_first(args: tuple[Any, ...], kwargs: dict[str, Any], shape: Shape, what: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not shape or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in shape):
        raise InvalidInputError(f"input shape must be positive integers, got {shape}")
    if args and isinstance(args[0], list) and args[0] and isinstance(args[0][0], torch.Tensor):
        image = args[0][0]
        if len(shape) != image.dim() + 1:
            raise InvalidInputError(f"input shape for {what} must be N,{','.join('CHW'[-image.dim() :])}, got {shape}")
        return ([_like(image, shape[1:]) for _ in range(shape[0])], *args[1:]), kwargs
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if tensors:
        first = args[tensors[0]]
        if first.dim() != len(shape):
            raise InvalidInputError(f"input shape for {what} must have {first.dim()} dimensions, got {shape}")
        same = [i for i in tensors if args[i].shape == first.shape]  # an image pair changes together
        new_args = list(args)
        for i in same:
            new_args[i] = _like(args[i], shape)
        return tuple(new_args), kwargs
    keys = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    if keys:
        first = kwargs[keys[0]]
        if first.dim() != len(shape):
            raise InvalidInputError(f"input shape for {what} must have {first.dim()} dimensions, got {shape}")
        new_kwargs = dict(kwargs)
        for k in keys:
            t = kwargs[k]
            if t.shape == first.shape:
                new_kwargs[k] = _like(t, shape)
        return args, new_kwargs
    raise InvalidInputError(f"{what} takes no tensor input to give the shape {shape}")


def materialize(value: Any, device: torch.device) -> Any:
    """Meta tensors among ``value`` as seeded real tensors on ``device`` (for a warm-up or a real run of a
    model that is not on the meta device); other values unchanged."""
    if device.type == "meta":
        return value
    if isinstance(value, torch.Tensor):
        if not value.is_meta:
            return value
        if value.is_floating_point():
            generator = torch.Generator().manual_seed(INPUT_SEED)
            return torch.randn(tuple(value.shape), generator=generator, dtype=value.dtype).to(device)
        return torch.zeros(tuple(value.shape), dtype=value.dtype, device=device)
    if isinstance(value, list):
        return [materialize(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(materialize(v, device) for v in value)
    if isinstance(value, dict):
        return {k: materialize(v, device) for k, v in value.items()}
    return value
