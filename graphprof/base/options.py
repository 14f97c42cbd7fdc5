"""Options shared by every entry point (API, CLI, sweeps): mode, dtype and input shape, parsed once."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import torch

from graphprof.base.choices import Mode, WarmUp
from graphprof.errors import InvalidInputError

__all__ = ["parse_mode", "parse_dtype", "parse_shape", "RunSpec", "KEEP", "ModelOptions"]


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


class _Keep:
    """The sentinel of :data:`KEEP`: "the prepared model's own value"."""

    def __repr__(self) -> str:
        return "KEEP"


#: A :class:`RunSpec` field left at ``KEEP`` takes the prepared model's value (its dtype, its mode).
KEEP: Any = _Keep()


@dataclass(frozen=True)
class RunSpec:
    """The inputs of one run, in one record: what the seven input keywords of the public API mean.

    ``batch_size`` / ``input_shape`` / ``seq_len`` derive inputs of another size from the prepared ones;
    ``example_inputs`` / ``example_kwargs`` replace them; ``dtype`` and ``mode`` default (:data:`KEEP`) to
    the prepared model's. Parsed once, in :meth:`of`; every pass below takes the spec.

    >>> RunSpec.of(batch_size=8, mode="train").mode
    <Mode.TRAIN: 'train'>
    """

    batch_size: int | None = None
    input_shape: tuple[int, ...] | None = None
    seq_len: int | None = None
    example_inputs: tuple[Any, ...] | None = None
    example_kwargs: dict[str, Any] | None = field(default=None, hash=False)
    dtype: Any = KEEP
    mode: Any = KEEP

    @classmethod
    def of(
        cls,
        *,
        batch_size: int | None = None,
        input_shape: Sequence[int] | str | None = None,
        seq_len: int | None = None,
        example_inputs: Any = None,
        example_kwargs: dict[str, Any] | None = None,
        dtype: Any = KEEP,
        mode: Any = KEEP,
    ) -> RunSpec:
        """The spec of these keywords, parsed and checked (:class:`InvalidInputError` for a bad one)."""
        check_batch_size(batch_size)
        return cls(
            batch_size=batch_size,
            input_shape=parse_shape(input_shape),
            seq_len=seq_len,
            example_inputs=as_args(example_inputs) if example_inputs is not None else None,
            example_kwargs=dict(example_kwargs) if example_kwargs is not None else None,
            dtype=dtype if dtype is KEEP else parse_dtype(dtype),
            mode=KEEP if mode is KEEP or mode is None else parse_mode(mode),
        )

    @property
    def replaces_inputs(self) -> bool:
        return self.example_inputs is not None or self.example_kwargs is not None

    def resolved(self, dtype: torch.dtype | None, mode: Mode) -> tuple[torch.dtype | None, Mode]:
        """This spec's dtype and mode, with the prepared ones where it keeps them."""
        return (dtype if self.dtype is KEEP else self.dtype), (mode if self.mode is KEEP else self.mode)


def check_batch_size(batch_size: Any) -> None:
    """``None`` or a positive integer; else :class:`InvalidInputError`."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0):
        raise InvalidInputError(f"batch size must be a positive integer, got {batch_size!r}")


def as_args(example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None) -> tuple[Any, ...]:
    """``example_inputs`` as a tuple of positional arguments (one tensor is one argument)."""
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


class ModelOptions(TypedDict, total=False):
    """The keywords that build, warm up and capture a model, shared by :func:`graphprof.prepare`,
    :func:`graphprof.profile_model` and :func:`graphprof.session.open_session` (typed for ``**options``;
    see :func:`graphprof.prepare` for what each means)."""

    input_shape: Sequence[int] | str | None
    example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None
    example_kwargs: dict[str, Any] | None
    batch_size: int | None
    dtype: str | torch.dtype | None
    mode: Mode | str
    methods: Sequence[str] | None
    model_name: str | None
    device: str | None
    allow_unsafe_load: bool
    target: str | None
    proposals: int | None
    warm_up: WarmUp | str
