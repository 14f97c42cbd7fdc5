"""The two records of model resolution and the input helpers every family shares.

A family module (``torchvision_zoo``, ``yolo``, ``hf``, ``timm_zoo``, ``user``) turns a spec into a
:class:`ResolvedModel`: the module in ``eval()`` mode plus example inputs made here, seeded and
deterministic, in the shape the family takes. Shapes are checked once, here, so every family
reports a bad ``input_shape`` or ``batch_size`` with the same one-line :class:`InvalidInputError`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from graphprof.base.inputs import INPUT_SEED
from graphprof.errors import InvalidInputError, ModelNotFoundError

__all__ = ["ModelInfo", "ResolvedModel", "format_shape", "effective_shape", "random_tensor", "random_token_ids", "a_type", "unknown_model"]


@dataclass(frozen=True)
class ModelInfo:
    """One row of :func:`graphprof.models.list_models`; building nothing to produce it.

    ``family`` is one of ``classification``, ``quantized``, ``detection``, ``segmentation``, ``video``,
    ``optical_flow``, ``yolo``, ``hf``, ``timm``. ``task`` says what a YOLO model predicts (``detect``,
    ``segment``, ``pose``, ``classify``, ``obb``, ``semantic``, ``depth``); it is empty for the other
    families, whose family already says it.
    """

    name: str
    family: str
    default_input: str
    task: str = ""


@dataclass
class ResolvedModel:
    """A built model and example inputs that it accepts: ``model(*args, **kwargs)`` runs.

    ``family`` is a :class:`ModelInfo` family, or ``"user"`` for a user's factory or pickled module.
    ``model`` is in ``eval()`` mode, float32, on CPU (or on the meta device when asked and possible);
    ``args``/``kwargs`` are seeded random inputs; ``notes`` are short facts worth showing the user,
    such as ``"built without weights (random init)"``.
    """

    name: str
    family: str
    model: torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def a_type(value: object) -> str:
    """``"an int"``, ``"an OrderedDict"``, ``"a dict"``: the type of ``value`` with its article."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def format_shape(shape: Sequence[int]) -> str:
    """``(1, 3, 224, 224)`` -> ``"1x3x224x224"``."""
    return "x".join(str(d) for d in shape)


def effective_shape(
    default: Sequence[int], input_shape: Sequence[int] | None, batch_size: int | None, *, layout: str | None, model: str
) -> tuple[int, ...]:
    """The input shape to build: ``input_shape`` (else ``default``) with ``batch_size`` as its first dim.

    ``layout`` names the dims (``"N,C,H,W"``); ``input_shape`` must have that many (any number when
    ``layout`` is None), all positive.

    >>> effective_shape((1, 3, 224, 224), None, 8, layout="N,C,H,W", model="resnet18")
    (8, 3, 224, 224)
    """
    shape = tuple(default) if input_shape is None else tuple(input_shape)
    if input_shape is not None:
        if layout is not None and len(shape) != len(layout.split(",")):
            rank = len(layout.split(","))
            raise InvalidInputError(f"input shape for {model} must be {layout} ({rank} numbers), got {format_shape(shape) or '()'}")
        if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
            raise InvalidInputError(f"input shape must be positive integers, got {shape}")
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidInputError(f"batch size must be a positive integer, got {batch_size!r}")
        shape = (batch_size, *shape[1:])
    return shape


def random_tensor(shape: Sequence[int], device: torch.device, *, offset: int = 0) -> torch.Tensor:
    """A float32 ``randn`` tensor, seeded with ``INPUT_SEED + offset``; storage-free on the meta device."""
    if device.type == "meta":
        return torch.empty(tuple(shape), dtype=torch.float32, device=device)
    generator = torch.Generator().manual_seed(INPUT_SEED + offset)
    return torch.randn(tuple(shape), generator=generator, dtype=torch.float32).to(device)


def random_token_ids(shape: Sequence[int], vocab_size: int, device: torch.device) -> torch.Tensor:
    """Seeded int64 token ids in ``[0, vocab_size)``; storage-free on the meta device."""
    if device.type == "meta":
        return torch.empty(tuple(shape), dtype=torch.long, device=device)
    generator = torch.Generator().manual_seed(INPUT_SEED)
    return torch.randint(0, vocab_size, tuple(shape), generator=generator, dtype=torch.long).to(device)


def unknown_model(spec: str, names: Sequence[str]) -> ModelNotFoundError:
    """The error for a spec no family knows, suggesting the closest of ``names``."""
    close = difflib.get_close_matches(spec.lower(), names, n=3, cutoff=0.6)
    if not close:
        return ModelNotFoundError(
            f"unknown model '{spec}' (graphprof --list shows the names; a .yaml, a local .pt, hf:llama or package.module:factory also work)"
        )
    suggestion = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return ModelNotFoundError(f"unknown model '{spec}'; did you mean {suggestion}? (graphprof --list)")
