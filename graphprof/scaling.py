"""Scaling sweeps (:func:`graphprof.sweep`): one model profiled along one axis (batch, resolution, sequence length, depth, a factory keyword).

A sweep is built on :func:`graphprof.prepare`: the model is resolved, warmed up and captured once, and
each point is one :meth:`PreparedModel.profile` (a dry run on the same capture). Only the ``layers``
axis and a factory keyword (``set``) change the model itself, so they prepare once per point.

Each point becomes a :class:`SweepRow` (params, MACs, FLOPs, bytes moved, peak activation memory, the
roofline time estimate for a hardware preset, and measured time and memory when measured). A
:class:`Sweep` fits the growth of any metric on log-log axes (:meth:`Sweep.fit`), the linear and
quadratic terms in the axis exactly (:meth:`Sweep.fit_quadratic`, for sequence length), and finds the
knee where a measured sweep stops being launch-bound (:meth:`Sweep.knee`).

>>> import graphprof
>>> s = graphprof.sweep("resnet18", "batch", [1, 2, 4])
>>> [r.macs // 1_000_000 for r in s.rows], round(s.fit("macs").exponent, 3)
([1814, 3628, 7256], 1.0)

The library never prints: progress is reported to an ``on_point`` callback.
"""

from __future__ import annotations

import enum
import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn

from graphprof.errors import InvalidInputError
from graphprof.hardware import Hardware, get_hardware
from graphprof.inputs import format_inputs
from graphprof.prepared import PreparedModel, prepare
from graphprof.result import Profile
from graphprof.roofline import classify

__all__ = [
    "Axis",
    "METRICS",
    "SweepRow",
    "GrowthFit",
    "QuadraticFit",
    "Knee",
    "Sweep",
    "sweep",
    "check_sweep",
    "parse_values",
    "find_knee",
    "ScalingExperiment",
]


class Axis(str, enum.Enum):
    """What a sweep varies."""

    BATCH = "batch"
    RESOLUTION = "resolution"  # H and W of an image (or video) input, square
    SEQ_LEN = "seq-len"  # the sequence dimension of a transformer's token inputs
    LAYERS = "layers"  # a config override (hf: num_hidden_layers) or a factory's num_layers
    SET = "set"  # any keyword of a user's factory

    @classmethod
    def parse(cls, axis: Axis | str) -> Axis:
        if isinstance(axis, Axis):
            return axis
        text = str(axis).strip().lower().replace("_", "-")
        for member in cls:
            if text == member.value:
                return member
        raise InvalidInputError(f"unknown sweep axis {axis!r}: choose one of {', '.join(m.value for m in cls)}")


#: The metrics of a row, in table order; ``measured_*`` are ``None`` on a dry-run sweep and
#: ``estimated_seconds`` without a hardware preset.
METRICS = (
    "params",
    "macs",
    "flops",
    "bytes",
    "peak_activation_bytes",
    "estimated_seconds",
    "measured_seconds",
    "measured_peak_bytes",
)

#: The keyword a factory's depth goes to on the ``layers`` axis (the seed framework's name).
FACTORY_LAYERS_KEY = "num_layers"
#: The config field an ``hf:`` model's depth goes to.
HF_LAYERS_KEY = "num_hidden_layers"
#: Families whose input has an image (or video frames) whose H and W a resolution sweep replaces.
_IMAGE_FAMILIES = frozenset({"classification", "detection", "segmentation", "video", "optical_flow", "quantized", "yolo", "timm"})


@dataclass(frozen=True)
class SweepRow:
    """One point of a sweep: its value on the axis and what the model costs there (integers, seconds)."""

    value: float
    inputs: str
    params: int
    macs: int
    flops: int
    bytes: int
    peak_activation_bytes: int
    estimated_seconds: float | None = None
    measured_seconds: float | None = None
    measured_peak_bytes: int | None = None
    capture_reused: bool = True

    def metric(self, name: str) -> float | None:
        if name not in METRICS:
            raise InvalidInputError(f"unknown sweep metric {name!r}: choose one of {', '.join(METRICS)}")
        return cast("float | None", getattr(self, name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "inputs": self.inputs,
            **{name: getattr(self, name) for name in METRICS},
            "capture_reused": self.capture_reused,
        }


@dataclass(frozen=True)
class GrowthFit:
    """``metric ~ coefficient * value ** exponent``: a least-squares line through (log value, log metric)."""

    metric: str
    exponent: float
    coefficient: float
    r2: float

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "exponent": self.exponent, "coefficient": self.coefficient, "r2": self.r2}


@dataclass(frozen=True)
class QuadraticFit:
    """``metric = constant + linear * S + quadratic * S**2``, least squares (exact for a count that is
    a polynomial of degree 2 in S, such as a transformer's MACs in its sequence length)."""

    metric: str
    constant: float
    linear: float
    quadratic: float
    r2: float

    def quadratic_share(self, value: float) -> float:
        """The share (0..1) of the fitted metric at ``value`` that is the quadratic term (attention, for S)."""
        total = self.constant + self.linear * value + self.quadratic * value * value
        return self.quadratic * value * value / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "constant": self.constant,
            "linear": self.linear,
            "quadratic": self.quadratic,
            "r2": self.r2,
        }


@dataclass(frozen=True)
class Knee:
    """Where measured time stops being flat (launch-bound) and starts growing with the axis.

    Found by fitting ``log t = a + slope * max(0, log x - log knee)`` (a hinge) at each point and keeping
    the best; ``slope`` is the growth exponent past the knee.
    """

    value: float
    index: int
    slope: float

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "index": self.index, "slope": self.slope}


def _r2(y: Any, predicted: Any) -> float:
    import numpy as np

    residual = float(np.sum((y - predicted) ** 2))
    total = float(np.sum((y - np.mean(y)) ** 2))
    if total == 0.0:
        return 1.0 if residual <= 1e-24 else 0.0
    return 1.0 - residual / total


#: Past the knee, time must grow at least this fast (log-log slope) for the flat part to count as launch-bound.
KNEE_MIN_SLOPE = 0.5
#: Before the knee, time may grow at most this fast.
KNEE_FLAT_SLOPE = 0.25


def find_knee(values: Sequence[float], seconds: Sequence[float]) -> Knee | None:
    """The point where ``seconds`` stops being flat in ``values`` (see :class:`Knee`); ``None`` when the
    sweep is launch-bound throughout or never was (fewer than 3 points, or no flat start).

    >>> find_knee([1, 2, 4, 8, 16, 32], [1.0, 1.0, 1.0, 2.0, 4.0, 8.0]).value
    4
    """
    import numpy as np

    if len(values) < 3 or len(values) != len(seconds) or any(s is None or s <= 0 for s in seconds):
        return None
    x = np.log(np.asarray(values, dtype=float))
    y = np.log(np.asarray(seconds, dtype=float))
    best: tuple[float, int, float] | None = None
    for k in range(1, len(x) - 1):  # a knee with at least one point on each side of it
        hinge = np.maximum(0.0, x - x[k])
        design = np.stack([np.ones_like(x), hinge], axis=1)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        error = float(np.sum((design @ coef - y) ** 2))
        if best is None or error < best[0] - 1e-12:
            best = (error, k, float(coef[1]))
    if best is None:
        return None
    _, k, slope = best
    flat = (y[k] - y[0]) / (x[k] - x[0])
    if slope < KNEE_MIN_SLOPE or flat > KNEE_FLAT_SLOPE:
        return None
    return Knee(values[k], k, slope)


@dataclass(frozen=True)
class Sweep:
    """The rows of one sweep, with growth fits. ``stopped_at`` is the value that ran out of device memory
    (the sweep stopped there cleanly; ``last_fit`` is the largest value that fit), else ``None``."""

    model: str
    axis: Axis
    key: str | None
    values: tuple[float, ...]
    rows: tuple[SweepRow, ...]
    hardware: str | None = None
    measured: bool = False
    stopped_at: float | None = None
    notes: tuple[str, ...] = ()
    profiles: tuple[Profile, ...] = field(default=(), repr=False, compare=False)

    @property
    def last_fit(self) -> float | None:
        """The largest value that ran (when the sweep stopped out of memory, the last size that fit)."""
        return self.rows[-1].value if self.rows else None

    @property
    def label(self) -> str:
        """The axis as a user would name it: ``batch``, ``seq-len``, or the factory keyword."""
        return self.key if self.axis is Axis.SET and self.key else self.axis.value

    def series(self, metric: str) -> tuple[list[float], list[float]]:
        """``(values, metric values)`` for the rows that have the metric."""
        xs, ys = [], []
        for row in self.rows:
            y = row.metric(metric)
            if y is not None:
                xs.append(row.value)
                ys.append(y)
        return xs, ys

    def fit(self, metric: str) -> GrowthFit:
        """The log-log growth exponent of ``metric`` with R² (numpy least squares).

        >>> # MACs of a batch sweep: log MACs = log(MACs per sample) + 1 * log batch, so exponent 1, R² 1
        """
        import numpy as np

        xs, ys = self.series(metric)
        if len(xs) < 2:
            raise InvalidInputError(f"fitting {metric} needs at least 2 points that have it, got {len(xs)}")
        if any(y <= 0 for y in ys):
            raise InvalidInputError(f"{metric} is zero at some point: no log-log fit")
        x, y = np.log(np.asarray(xs, dtype=float)), np.log(np.asarray(ys, dtype=float))
        slope, intercept = np.polyfit(x, y, 1)
        return GrowthFit(metric, float(slope), float(math.exp(intercept)), _r2(y, slope * x + intercept))

    def fit_quadratic(self, metric: str) -> QuadraticFit:
        """``metric = c + a * value + b * value**2`` by least squares (columns scaled, so large counts stay exact)."""
        import numpy as np

        xs, ys = self.series(metric)
        if len(xs) < 3:
            raise InvalidInputError(f"a quadratic fit of {metric} needs at least 3 points, got {len(xs)}")
        x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        scale_x, scale_y = float(x.max()), float(np.abs(y).max()) or 1.0
        u = x / scale_x
        design = np.stack([np.ones_like(u), u, u * u], axis=1)
        coef, *_ = np.linalg.lstsq(design, y / scale_y, rcond=None)
        c, a, b = float(coef[0]) * scale_y, float(coef[1]) * scale_y / scale_x, float(coef[2]) * scale_y / scale_x**2
        return QuadraticFit(metric, c, a, b, _r2(y, c + a * x + b * x * x))

    def knee(self) -> Knee | None:
        """Where measured time stops being launch-bound (:func:`find_knee`); ``None`` on a dry-run sweep."""
        xs, ys = self.series("measured_seconds")
        return find_knee(xs, ys) if xs else None

    def fits(self) -> dict[str, GrowthFit]:
        """A growth fit per metric that has at least two positive values."""
        out = {}
        for metric in METRICS:
            xs, ys = self.series(metric)
            if len(xs) >= 2 and all(y > 0 for y in ys):
                out[metric] = self.fit(metric)
        return out

    def to_dict(self) -> dict[str, Any]:
        quadratic = {}
        if self.axis is Axis.SEQ_LEN and len(self.rows) >= 3:
            quadratic = {m: self.fit_quadratic(m).to_dict() for m in ("macs", "flops")}
        knee = self.knee()
        return {
            "model": self.model,
            "axis": self.axis.value,
            "key": self.key,
            "values": list(self.values),
            "hardware": self.hardware,
            "measured": self.measured,
            "stopped_at": self.stopped_at,
            "last_fit": self.last_fit,
            "rows": [row.to_dict() for row in self.rows],
            "fits": {m: f.to_dict() for m, f in self.fits().items()},
            "quadratic_fits": quadratic,
            "knee": knee.to_dict() if knee else None,
            "notes": list(self.notes),
        }


# ---- values ---------------------------------------------------------------------------------------


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"{what}: {text!r} is not a number") from None
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def parse_values(text: str, what: str = "sweep values") -> list[float]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; ``"1:256:x2"`` -> powers of two from 1 to 256; ``"128:512:+128"``
    (or ``"128:512:128"``) -> ``[128, 256, 384, 512]``. The values are checked by :func:`check_values`.

    >>> parse_values("1:16:x2"), parse_values("100:300:+100")
    ([1, 2, 4, 8, 16], [100, 200, 300])
    """
    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise InvalidInputError(f"{what}: a range is START:STOP:xFACTOR or START:STOP:+STEP, got {text!r}")
        start, stop = _number(parts[0], what), _number(parts[1], what)
        step = parts[2].strip().lower()
        values: list[float] = []
        if step.startswith("x") or step.startswith("*"):
            factor = _number(step[1:], what)
            if factor <= 1:
                raise InvalidInputError(f"{what}: the factor of {text!r} must be above 1")
            if start <= 0:
                raise InvalidInputError(f"{what}: values must be positive, got {start}")
            value = start
            while value <= stop * (1 + 1e-12):
                values.append(value)
                value = value * factor
        else:
            increment = _number(step.lstrip("+"), what)
            if increment <= 0:
                raise InvalidInputError(f"{what}: the step of {text!r} must be positive")
            value = start
            while value <= stop * (1 + 1e-12):
                values.append(value)
                value = value + increment
        if not values:
            raise InvalidInputError(f"{what}: the range {text!r} is empty")
    else:
        values = [_number(part, what) for part in text.split(",") if part.strip()]
    check_values(values, what)
    return values


def check_values(values: Sequence[float], what: str = "sweep values") -> None:
    """Non-empty, positive, strictly increasing: else a one-line :class:`InvalidInputError`."""
    if not values:
        raise InvalidInputError(f"{what}: the list is empty")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InvalidInputError(f"{what}: {v!r} is not a number")
        if v <= 0:
            raise InvalidInputError(f"{what}: values must be positive, got {v}")
    for a, b in zip(values[:-1], values[1:], strict=True):
        if b <= a:
            raise InvalidInputError(f"{what}: values must be sorted and distinct, got {a} then {b}")


# ---- the model --------------------------------------------------------------------------------------


def _with_option(spec: str, key: str, value: Any) -> str:
    """``spec`` with ``?key=value`` set (replacing the same key if the query has it)."""
    base, _, query = spec.partition("?")
    kept = [part for part in query.split("&") if part and part.split("=", 1)[0] != key]
    return f"{base}?{'&'.join([*kept, f'{key}={value}'])}"


def _factory_keywords(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keyword names ``factory`` accepts, and whether it takes ``**kwargs``."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return set(), True
    names = {
        p.name
        for p in signature.parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())


def _check_keyword(factory: Callable[..., Any], key: str, what: str) -> None:
    names, var = _factory_keywords(factory)
    if key not in names and not var:
        listed = ", ".join(sorted(names)) or "none"
        raise InvalidInputError(f"{what} has no keyword {key!r} (its keywords: {listed})")


def _user_factory(spec: str) -> Callable[..., Any]:
    """The callable a ``pkg.mod:factory`` spec names (imported, not called)."""
    from graphprof.models.user import find_user_object, is_user_spec

    base = spec.partition("?")[0]
    if not is_user_spec(base):
        raise InvalidInputError(f"--set needs a factory (pkg.module:make_model or file.py:make_model), got {spec!r}")
    obj = find_user_object(spec)
    if isinstance(obj, nn.Module) or not callable(obj):
        raise InvalidInputError(f"{spec} is not a factory: --set needs a function or class that takes keywords")
    return cast("Callable[..., Any]", obj)


def _check_axis(model: Any, axis: Axis, key: str | None) -> str | None:
    """Refuse an axis the model cannot have, before any work; returns the keyword for ``layers``/``set``."""
    from graphprof.models import spec_family

    if isinstance(model, str):
        family = spec_family(model)
        what = model
        if axis is Axis.SEQ_LEN and family is not None and family != "hf":
            raise InvalidInputError(f"{what} ({family}) has no sequence length: seq-len sweeps are for transformers (hf:...)")
        if axis is Axis.RESOLUTION and family == "hf":
            raise InvalidInputError(f"{what} takes token ids, not images: it has no resolution (sweep seq-len)")
        if axis is Axis.RESOLUTION and family is not None and family not in _IMAGE_FAMILIES:
            raise InvalidInputError(f"{what} ({family}) has no image input to change the resolution of")
        if axis is Axis.LAYERS:
            if family == "hf":
                return key or HF_LAYERS_KEY
            if family is None and ":" in model:
                _check_keyword(_user_factory(model), key or FACTORY_LAYERS_KEY, model)
                return key or FACTORY_LAYERS_KEY
            raise InvalidInputError(f"{what} has no depth to set: a layers sweep needs an hf: model or a factory with num_layers")
        if axis is Axis.SET:
            if not key:
                raise InvalidInputError("a set sweep needs the factory keyword: --set key=v1,v2")
            _check_keyword(_user_factory(model), key, model)
            return key
        return None
    if axis in (Axis.LAYERS, Axis.SET):
        if isinstance(model, (nn.Module, PreparedModel)) or not callable(model):
            raise InvalidInputError(f"a {axis.value} sweep builds the model at every point: pass a factory or a name, not a built model")
        chosen = key or (FACTORY_LAYERS_KEY if axis is Axis.LAYERS else None)
        if not chosen:
            raise InvalidInputError("a set sweep needs the factory keyword (key=...)")
        _check_keyword(model, chosen, getattr(model, "__name__", "the factory"))
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


def _point_options(pm: PreparedModel, axis: Axis, value: Any) -> dict[str, Any]:
    if axis is Axis.BATCH:
        return {"batch_size": _integer(value, "batch size")}
    if axis is Axis.RESOLUTION:
        return {"input_shape": _resolution_shape(pm, _integer(value, "resolution"))}
    if axis is Axis.SEQ_LEN:
        return {"seq_len": _integer(value, "sequence length")}
    return {}


def _integer(value: Any, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"a {what} must be a whole number, got {value!r}")
    return value


# ---- measurement (issue 9) -------------------------------------------------------------------------


@dataclass(frozen=True)
class _PointMeasurement:
    seconds: float
    peak_bytes: int


def _measure_point(prepared: PreparedModel, *, device: str, **options: Any) -> _PointMeasurement:
    """One measured point: the median plain forward (seconds) and the peak memory (bytes), from
    :func:`graphprof.measure.run.measure_prepared` without the per-layer runs and the breakdown."""
    from graphprof.measure.run import measure_prepared

    measured = measure_prepared(prepared, device=device, iters=20, warmup=3, layer_runs=1, breakdown=False, **options)
    return _PointMeasurement(seconds=measured.forward.median / 1e3, peak_bytes=measured.memory.peak_bytes)


def _load_measure() -> Callable[..., Any]:
    """The function that measures one point (a seam the tests replace to simulate an out-of-memory device)."""
    return _measure_point


def _is_out_of_memory(exc: BaseException) -> bool:
    from graphprof.errors import MeasurementError

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    seen: BaseException | None = exc
    while seen is not None:  # measure_prepared reports a CUDA OOM as a MeasurementError naming the batch
        if oom is not None and isinstance(seen, oom):
            return True
        seen = seen.__cause__ if isinstance(seen, MeasurementError) else None
    return False


# ---- the sweep --------------------------------------------------------------------------------------


def check_sweep(model: Any, axis: str | Axis, values: Sequence[float] | str, key: str | None = None) -> tuple[Axis, list[Any], str | None]:
    """Everything :func:`sweep` checks before any work: ``(axis, values, factory keyword)``, or
    :class:`InvalidInputError` for bad values, an axis the model lacks, or a factory without the keyword."""
    chosen_axis = Axis.parse(axis)
    points = parse_values(values, f"{chosen_axis.value} values") if isinstance(values, str) else list(values)
    check_values(points, f"{chosen_axis.value} values")
    if chosen_axis in (Axis.BATCH, Axis.RESOLUTION, Axis.SEQ_LEN):
        for v in points:
            _integer(v, chosen_axis.value)
    return chosen_axis, points, _check_axis(model, chosen_axis, key)


def sweep(
    model: nn.Module | str | PreparedModel | Callable[..., nn.Module],
    axis: Axis | str,
    values: Sequence[float] | str,
    *,
    key: str | None = None,
    measure: bool = False,
    device: str | None = None,
    hardware: Hardware | str | None = None,
    input_shape: Sequence[int] | str | None = None,
    example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
    example_kwargs: dict[str, Any] | None = None,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    mode: str = "eval",
    keep_profiles: bool = False,
    on_point: Callable[[int, float, SweepRow | None], None] | None = None,
) -> Sweep:
    """Profile ``model`` at each of ``values`` along ``axis``; see the module docstring.

    ``model`` is a name (``"resnet50"``, ``"hf:llama"``, ``"pkg.mod:factory"``), an ``nn.Module`` (with
    ``input_shape`` or ``example_inputs``), a :class:`PreparedModel`, or a factory callable (for the
    ``layers``/``set`` axes, called with ``key=value`` at each point; ``key`` defaults to ``num_layers``
    on the ``layers`` axis). ``values`` is a list or a string (:func:`parse_values`). Bad values, an axis
    the model lacks, or a factory without the keyword raise :class:`InvalidInputError` before any work.
    ``measure=True`` adds measured time and memory per point on ``device`` (``graphprof.measure``); a
    device out-of-memory stops the sweep and sets :attr:`Sweep.stopped_at`. ``on_point(index, value, row)``
    is called before each point (``row`` ``None``) and after it.
    """
    chosen_axis, points, chosen_key = check_sweep(model, axis, values, key)
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    measure_fn = _load_measure() if measure else None
    notes: list[str] = []
    prepare_options: dict[str, Any] = {
        "input_shape": input_shape, "example_inputs": example_inputs, "example_kwargs": example_kwargs,
        "batch_size": batch_size, "dtype": dtype, "mode": mode,
    }  # fmt: skip
    if measure and device is not None:
        prepare_options["device"] = "cpu"  # the measured run needs weights; issue 9's measure moves the model

    def prepared_at(value: Any) -> PreparedModel:
        """The prepared model of a point that changes the model itself (layers, set)."""
        if isinstance(model, str):
            spec = _with_option(model, chosen_key or "", value)
            return prepare(spec, **prepare_options)
        factory = functools.partial(cast("Callable[..., nn.Module]", model), **{chosen_key or "": value})
        built = factory()
        if not isinstance(built, nn.Module):
            raise InvalidInputError(f"the factory returned {type(built).__name__}, not an nn.Module")
        options = {k: v for k, v in prepare_options.items() if k != "device"}
        return prepare(built, model_name=f"{getattr(model, '__name__', 'factory')}({chosen_key}={value})", **options)

    shared: PreparedModel | None = None
    if chosen_axis not in (Axis.LAYERS, Axis.SET):
        if isinstance(model, PreparedModel):
            shared = model
        elif isinstance(model, (str, nn.Module)):
            shared = prepare(model, **prepare_options)
        else:
            built = model()
            if not isinstance(built, nn.Module):
                raise InvalidInputError(f"the factory returned {type(built).__name__}, not an nn.Module")
            options = {k: v for k, v in prepare_options.items() if k != "device"}
            shared = prepare(built, model_name=getattr(model, "__name__", None), **options)
        for v in points:  # every point's inputs, checked before the first run
            shared.inputs(**_point_options(shared, chosen_axis, v))

    rows: list[SweepRow] = []
    profiles: list[Profile] = []
    stopped_at: float | None = None
    name = shared.name if shared is not None else (model if isinstance(model, str) else getattr(model, "__name__", "model"))
    for index, value in enumerate(points):
        if on_point is not None:
            on_point(index, value, None)
        pm = shared if shared is not None else prepared_at(value)
        options = _point_options(pm, chosen_axis, value)
        profile = pm.profile(**options)
        measured_seconds: float | None = None
        measured_peak: int | None = None
        if measure_fn is not None:
            try:
                result = measure_fn(pm, device=device or ("cuda" if torch.cuda.is_available() else "cpu"), **options)
            except Exception as exc:
                if not _is_out_of_memory(exc):
                    raise
                stopped_at = value
                notes.append(f"out of device memory at {chosen_axis.value} {value}: the sweep stopped there")
                break
            measured_seconds = float(result.seconds)
            measured_peak = int(result.peak_bytes)
        row = SweepRow(
            value=value,
            inputs=format_inputs(profile.inputs),
            params=profile.total_params,
            macs=profile.total_macs,
            flops=profile.total_flops,
            bytes=profile.total_bytes,
            peak_activation_bytes=profile.peak_activation_bytes,
            estimated_seconds=classify(profile, hw).seconds if hw is not None else None,
            measured_seconds=measured_seconds,
            measured_peak_bytes=measured_peak,
            capture_reused=profile.capture_reused,
        )
        rows.append(row)
        if keep_profiles:
            profiles.append(profile)
        if on_point is not None:
            on_point(index, value, row)
    recaptured = [r.value for r in rows[1:] if not r.capture_reused] if shared is not None else []
    if recaptured:
        notes.append(f"captured again at {', '.join(str(v) for v in recaptured)} (the graph is specialised to its input shapes)")
    return Sweep(
        model=name,
        axis=chosen_axis,
        key=chosen_key,
        values=tuple(points),
        rows=tuple(rows),
        hardware=hw.name if hw is not None else None,
        measured=measure,
        stopped_at=stopped_at,
        notes=tuple(notes),
        profiles=tuple(profiles),
    )



class ScalingExperiment:
    """The seed framework's scaling experiment over ``model_factory(**kwargs)``, on graphprof's sweeps.

    ``run(name, values)`` sweeps ``name``: an axis (``batch``, ``resolution``, ``seq-len``) or a keyword
    of the factory; ``run_layer_scaling(values)`` sweeps ``num_layers``; ``print_summary()`` prints every
    sweep run so far (Rich). This class is the one place in the library that prints: it is the seed's API,
    kept so its users' code ports with an import change. ``device`` is where ``measure=True`` runs.

    >>> exp = ScalingExperiment(make_model, "cpu", input_shape=(1, 16))   # doctest: +SKIP
    >>> exp.run("hidden_dim", [64, 128]); exp.run_layer_scaling([2, 4]); exp.print_summary()  # doctest: +SKIP
    """

    def __init__(
        self,
        model_factory: Callable[..., nn.Module],
        device: str | torch.device | None = None,
        *,
        input_shape: Sequence[int] | str | None = None,
        example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
        example_kwargs: dict[str, Any] | None = None,
        hardware: Hardware | str | None = None,
        measure: bool = False,
    ) -> None:
        self.model_factory = model_factory
        self.device = None if device is None else str(device)
        self.options: dict[str, Any] = {
            "input_shape": input_shape, "example_inputs": example_inputs, "example_kwargs": example_kwargs,
            "hardware": hardware, "measure": measure, "device": self.device,
        }  # fmt: skip
        self.results: dict[str, Sweep] = {}

    def run(self, name: str, values: Sequence[float]) -> Sweep:
        """Sweep ``name`` (an axis, or a factory keyword) over ``values``; kept under ``results[name]``."""
        axis_names = {a.value for a in (Axis.BATCH, Axis.RESOLUTION, Axis.SEQ_LEN)}
        normalised = name.replace("_", "-")
        if normalised in axis_names:
            result = sweep(self.model_factory, normalised, values, **self.options)
        else:
            result = sweep(self.model_factory, Axis.SET, values, key=name, **self.options)
        self.results[name] = result
        return result

    def run_layer_scaling(self, values: Sequence[int] = (2, 4, 6, 8, 12, 16)) -> Sweep:
        """Sweep the factory's ``num_layers`` (the seed's default depths)."""
        return self.run(FACTORY_LAYERS_KEY, values)

    def print_summary(self) -> None:
        """Print each sweep's table and growth fits with Rich."""
        from rich.console import Console

        from graphprof.render.sweep import render_sweep

        console = Console()
        for result in self.results.values():
            console.print(render_sweep(result))
