"""What a sweep varies and at which values: the :class:`SweepAxis`, range parsing, and the checks a sweep
makes before any work (an axis the model lacks, a factory without the keyword, bad values)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence, Sized
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import SweepAxis
from graphprof.errors import InvalidInputError
from graphprof.prepared import PreparedModel
from graphprof.scaling.factory import check_keyword, user_factory

__all__ = ["MAX_POINTS", "FACTORY_LAYERS_KEY", "parse_values", "check_values", "check_sweep", "point_options", "with_option"]


#: The keyword a factory's depth goes to on the ``layers`` axis (the seed framework's name).
FACTORY_LAYERS_KEY = "num_layers"


# ---- values ---------------------------------------------------------------------------------------


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"{what}: {text!r} is not a number") from None
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


#: The most points one sweep may have: each is a profile (and, measured, a real run).
MAX_POINTS = 200


def parse_values(text: str, what: str = "sweep values") -> list[float]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; ``"1:256:x2"`` -> powers of two from 1 to 256; ``"128:512:+128"``
    (or ``"128:512:128"``) -> ``[128, 256, 384, 512]``. A range's bounds must be finite and its points are
    counted before any is made: more than :data:`MAX_POINTS` is refused. The values are checked by
    :func:`check_values`.

    >>> parse_values("1:16:x2"), parse_values("100:300:+100")
    ([1, 2, 4, 8, 16], [100, 200, 300])
    """
    text = text.strip()
    if ":" not in text:
        values = [_number(part, what) for part in text.split(",") if part.strip()]
    else:
        parts = text.split(":")
        if len(parts) != 3:
            raise InvalidInputError(f"{what}: a range is START:STOP:xFACTOR or START:STOP:+STEP, got {text!r}")
        start, stop = _number(parts[0], what), _number(parts[1], what)
        if not (math.isfinite(start) and math.isfinite(stop)):
            raise InvalidInputError(f"{what}: the bounds of {text!r} must be finite numbers")
        values = _range(start, stop, parts[2].strip().lower(), text, what)
    if len(values) > MAX_POINTS:
        raise InvalidInputError(f"{what}: {len(values)} values; a sweep takes at most {MAX_POINTS}")
    check_values(values, what)
    return values


def _range(start: float, stop: float, step: str, text: str, what: str) -> list[float]:
    """The points of a range, counted arithmetically first (a range of millions is refused at once)."""
    geometric = step.startswith(("x", "*"))
    by = _number(step[1:] if geometric else step.lstrip("+"), what)
    if not math.isfinite(by) or (by <= 1 if geometric else by <= 0):
        raise InvalidInputError(
            f"{what}: the {'factor' if geometric else 'step'} of {text!r} must be {'above 1' if geometric else 'positive'}"
        )
    if geometric and start <= 0:
        raise InvalidInputError(f"{what}: values must be positive, got {start}")
    if stop < start:
        raise InvalidInputError(f"{what}: the range {text!r} is empty")
    # a hair of slack, so that 1:1000:x10 ends at 1000 despite rounding in the logarithms
    count = math.floor(math.log(stop / start) / math.log(by) + 1e-9) + 1 if geometric else math.floor((stop - start) / by + 1e-9) + 1
    if count > MAX_POINTS:
        raise InvalidInputError(f"{what}: {text!r} has {count:,} points; a sweep takes at most {MAX_POINTS}")
    values = [start * by**i if geometric else start + by * i for i in range(count)]
    return [int(v) if isinstance(start, int) and isinstance(by, int) and float(v).is_integer() else v for v in values]


def check_values(values: Sequence[float], what: str = "sweep values") -> None:
    """Non-empty, at most :data:`MAX_POINTS`, positive, strictly increasing: else a one-line :class:`InvalidInputError`."""
    if not values:
        raise InvalidInputError(f"{what}: the list is empty")
    if len(values) > MAX_POINTS:  # a list from the API as much as a string: each point is a profile
        raise InvalidInputError(f"{what}: {len(values):,} values; a sweep takes at most {MAX_POINTS}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InvalidInputError(f"{what}: {v!r} is not a number")
        if v <= 0:
            raise InvalidInputError(f"{what}: values must be positive, got {v}")
    for a, b in zip(values[:-1], values[1:], strict=True):
        if b <= a:
            raise InvalidInputError(f"{what}: values must be sorted and distinct, got {a} then {b}")


# ---- the model --------------------------------------------------------------------------------------


def with_option(spec: str, key: str, value: Any) -> str:
    """``spec`` with ``?key=value`` set (replacing the same key if the query has it)."""
    base, _, query = spec.partition("?")
    kept = [part for part in query.split("&") if part and part.split("=", 1)[0] != key]
    return f"{base}?{'&'.join([*kept, f'{key}={value}'])}"


def _check_axis(model: Any, axis: SweepAxis, key: str | None) -> str | None:
    """Refuse an axis the model cannot have, before any work; returns the keyword for ``layers``/``set``."""
    from graphprof.models import family_traits, spec_family

    if isinstance(model, str):
        family = spec_family(model)
        what = model
        traits = family_traits(family)  # the family's record; an unknown family (None) is not refused
        if axis is SweepAxis.SEQ_LEN and family is not None and not traits.sequence_length:
            raise InvalidInputError(f"{what} ({family}) has no sequence length: seq-len sweeps are for transformers (hf:...)")
        if axis is SweepAxis.RESOLUTION and traits.sequence_length:
            raise InvalidInputError(f"{what} takes token ids, not images: it has no resolution (sweep seq-len)")
        if axis is SweepAxis.RESOLUTION and family is not None and not traits.image_input:
            raise InvalidInputError(f"{what} ({family}) has no image input to change the resolution of")
        if axis is SweepAxis.LAYERS:
            if traits.depth_option is not None:
                return key or traits.depth_option
            if family is None and ":" in model:
                check_keyword(user_factory(model), key or FACTORY_LAYERS_KEY, model)
                return key or FACTORY_LAYERS_KEY
            raise InvalidInputError(f"{what} has no depth to set: a layers sweep needs an hf: model or a factory with num_layers")
        if axis is SweepAxis.SET:
            if not key:
                raise InvalidInputError("a set sweep needs the factory keyword: --set key=v1,v2")
            check_keyword(user_factory(model), key, model)
            return key
        return None
    if axis in (SweepAxis.LAYERS, SweepAxis.SET):
        if isinstance(model, (nn.Module, PreparedModel)) or not callable(model):
            raise InvalidInputError(f"a {axis.value} sweep builds the model at every point: pass a factory or a name, not a built model")
        chosen = key or (FACTORY_LAYERS_KEY if axis is SweepAxis.LAYERS else None)
        if not chosen:
            raise InvalidInputError("a set sweep needs the factory keyword (key=...)")
        check_keyword(model, chosen, getattr(model, "__name__", "the factory"))
        return chosen
    return None


def _resolution_shape(pm: PreparedModel, size: int) -> tuple[int, ...]:
    """The first input's shape (``N, C, H, W``; video ``N, C, T, H, W``) with H = W = ``size``."""
    args, kwargs = pm.inputs()
    first: Any = next((a for a in args if isinstance(a, torch.Tensor | list)), None)
    if first is None:
        first = next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
    if isinstance(first, list) and first and isinstance(first[0], torch.Tensor):
        shape = (len(first), *first[0].shape)
    elif isinstance(first, torch.Tensor):
        shape = tuple(first.shape)
    else:
        raise InvalidInputError(f"{pm.name} has no tensor input to change the resolution of")
    if len(shape) < 4 or not (isinstance(size, int) and size > 0):
        raise InvalidInputError(f"{pm.name} has no image input (N, C, H, W) to change the resolution of; its input is {shape}")
    return (*shape[:-2], size, size)


def point_options(pm: PreparedModel, axis: SweepAxis, value: Any) -> dict[str, Any]:
    if axis is SweepAxis.BATCH:
        return {"batch_size": _integer(value, "batch size")}
    if axis is SweepAxis.RESOLUTION:
        return {"input_shape": _resolution_shape(pm, _integer(value, "resolution"))}
    if axis is SweepAxis.SEQ_LEN:
        return {"seq_len": _integer(value, "sequence length")}
    return {}


def _integer(value: Any, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"a {what} must be a whole number, got {value!r}")
    return value


# ---- all of it, before any work -------------------------------------------------------------------


def check_sweep(
    model: Any, axis: str | SweepAxis, values: Sequence[float] | str, key: str | None = None
) -> tuple[SweepAxis, list[Any], str | None]:
    """Everything :func:`sweep` checks before any work: ``(axis, values, factory keyword)``, or
    :class:`InvalidInputError` for bad values, an axis the model lacks, or a factory without the keyword."""
    chosen_axis = SweepAxis.parse(axis)
    if isinstance(values, str):
        points = parse_values(values, f"{chosen_axis.value} values")
    else:  # counted before it is read: range(10**12), or an endless iterator, is refused at once
        count = len(values) if isinstance(values, Sized) else None
        points = list(itertools.islice(values, MAX_POINTS + 1))
        if len(points) > MAX_POINTS:
            how_many = f"{count:,}" if count is not None else f"more than {MAX_POINTS}"
            raise InvalidInputError(f"{chosen_axis.value} values: {how_many} values; a sweep takes at most {MAX_POINTS}")
    check_values(points, f"{chosen_axis.value} values")
    if chosen_axis in (SweepAxis.BATCH, SweepAxis.RESOLUTION, SweepAxis.SEQ_LEN):
        for v in points:
            _integer(v, chosen_axis.value)
    return chosen_axis, points, _check_axis(model, chosen_axis, key)
