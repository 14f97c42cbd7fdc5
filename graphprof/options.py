"""Options shared by every entry point (API, CLI, sweeps): mode, dtype and input shape, parsed once."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import torch

from graphprof.errors import InvalidInputError

__all__ = ["Mode", "parse_mode", "parse_dtype", "parse_shape"]


class Mode(str, enum.Enum):
    """What is counted: inference (``eval``, no grad) or a training step (``train``: forward + backward)."""

    EVAL = "eval"
    TRAIN = "train"


def parse_mode(value: Mode | str) -> Mode:
    """``"train"`` -> ``Mode.TRAIN``; anything else than eval/train is an :class:`InvalidInputError`."""
    if isinstance(value, Mode):
        return value
    try:
        return Mode(str(value).strip().lower())
    except ValueError:
        raise InvalidInputError(f"unknown mode {value!r}; choose eval or train") from None


_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
}  # fmt: skip


def parse_dtype(value: str | torch.dtype | None) -> torch.dtype | None:
    """``"bf16"`` -> ``torch.bfloat16``; ``None`` stays ``None`` (the model's own dtype)."""
    if value is None or isinstance(value, torch.dtype):
        return value
    key = str(value).strip().lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise InvalidInputError(f"unknown dtype {value!r}; choose from {', '.join(sorted(set(_DTYPES)))}")
    return _DTYPES[key]


def parse_shape(value: str | Sequence[int] | Sequence[str] | None) -> tuple[int, ...] | None:
    """Accept ``(1, 3, 224, 224)``, ``"1,3,224,224"``, ``"1 3 224 224"``, ``"1x3x224x224"`` or ``["1,3", "224", "224"]``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    parts: list[str] = []
    for item in value:
        parts.extend(str(item).replace(",", " ").replace("x", " ").split())
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise InvalidInputError(f"input shape must be integers, got {' '.join(parts)!r}") from None
    if not shape or any(s <= 0 for s in shape):
        raise InvalidInputError(f"input shape must be positive integers, got {shape}")
    return shape
