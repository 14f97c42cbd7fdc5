"""Options shared by every entry point (API, CLI, sweeps): mode, dtype and input shape, parsed once."""

from __future__ import annotations

import enum
import re
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
    """Accept ``(1, 3, 224, 224)``, ``"1,3,224,224"``, ``"1 3 224 224"``, ``"1x3x224x224"`` or ``["1,3", "224", "224"]``.

    Every dimension must be a positive integer written in digits; an empty one (``"1,,3"``,
    ``"1,3,64,x64"``) is refused. Errors name ``--input-shape`` (``input_shape``).
    """
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    parts: list[str] = []
    for item in items:
        if isinstance(item, bool):
            parts.append(str(item))
            continue
        text = re.sub(r"\s*([,x])\s*", r"\1", str(item).strip())
        parts.extend(re.split(r"[,x]|\s+", text))
    shown = " ".join(str(item) for item in items)
    for part in parts:
        if not part.isdecimal() or not part.isascii():
            what = "an empty dimension" if not part else f"{part!r} is not a whole number"
            raise InvalidInputError(f"--input-shape (input_shape) must be positive integers, got {shown!r}: {what}")
    shape = tuple(int(p) for p in parts)
    if not shape or any(s <= 0 for s in shape):
        raise InvalidInputError(f"--input-shape (input_shape) must be positive integers, got {shown!r}")
    return shape
