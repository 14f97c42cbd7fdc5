"""The sweep itself: one model profiled (and, if asked, measured) at each value of one axis.

A sweep is built on :func:`graphprof.prepare`: the model is resolved, warmed up and captured once, and
each point is one :meth:`PreparedModel.profile` (a dry run on the same capture). Only the ``layers``
axis and a factory keyword (``set``) change the model itself, so they prepare once per point.
The library never prints: progress is reported to an ``on_point`` callback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn

from graphprof.base.choices import SweepAxis
from graphprof.base.guard import guard_user_code
from graphprof.base.inputs import format_inputs
from graphprof.cost.result import Profile
from graphprof.cost.roofline import classify
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import GraphprofError, InvalidInputError, MeasurementError
from graphprof.measure.run import is_out_of_memory
from graphprof.prepared import PreparedModel, prepare
from graphprof.scaling.axis import check_sweep, point_options, with_option
from graphprof.scaling.result import Sweep, SweepRow

__all__ = ["sweep"]

#: ``on_point(index, value, row)``: before each point (``row`` is ``None``) and after it.
OnPoint = Callable[[int, float, "SweepRow | None"], None]


@dataclass(frozen=True)
class _PointMeasurement:
    seconds: float
    peak_bytes: int


def _measure_point(prepared: PreparedModel, *, device: str, **options: Any) -> _PointMeasurement:
    """One measured point: the median plain forward (seconds) and the peak memory (bytes), from
    :meth:`PreparedModel.measure` without the per-layer runs and the breakdown."""
    measured = prepared.measure(device=device, iters=20, warmup=3, layer_runs=1, breakdown=False, **options)
    return _PointMeasurement(seconds=measured.forward.median / 1e3, peak_bytes=measured.memory.peak_bytes)


def _load_measure() -> Callable[..., Any]:
    """The function that measures one point (a seam the tests replace to simulate an out-of-memory device)."""
    return _measure_point


def _is_out_of_memory(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:  # measure_run reports an allocator's failure as a MeasurementError naming the batch
        if is_out_of_memory(seen):
            return True
        seen = seen.__cause__ if isinstance(seen, MeasurementError) else None
    return False


@dataclass
class _Points:
    """Where a sweep stands: the model (shared by every point, or built per point), its rows so far."""

    model: Any
    axis: SweepAxis
    key: str | None
    prepare_options: dict[str, Any]
    shared: PreparedModel | None = None
    rows: list[SweepRow] = field(default_factory=list)
    profiles: list[Profile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped_at: float | None = None

    def prepared_at(self, value: Any) -> PreparedModel:
        """The prepared model of a point: the shared one, or (layers, set) the model built at ``value``."""
        if self.shared is not None:
            return self.shared
        if isinstance(self.model, str):
            return prepare(with_option(self.model, self.key or "", value), **self.prepare_options)
        factory = functools.partial(cast("Callable[..., nn.Module]", self.model), **{self.key or "": value})
        name = f"{getattr(self.model, '__name__', 'factory')}({self.key}={value})"
        return prepare(_built(factory), model_name=name, **self._object_options())

    def share(self, points: Sequence[Any]) -> None:
        """Prepare the one model every point of a batch/resolution/seq-len sweep shares, and check every
        point's inputs before the first run."""
        model = self.model
        if isinstance(model, PreparedModel):
            self.shared = model
        elif isinstance(model, (str, nn.Module)):
            self.shared = prepare(model, **self.prepare_options)
        else:
            self.shared = prepare(_built(model), model_name=getattr(model, "__name__", None), **self._object_options())
        for v in points:
            self.shared.inputs(**point_options(self.shared, self.axis, v))

    def _object_options(self) -> dict[str, Any]:
        return {k: v for k, v in self.prepare_options.items() if k != "device"}


def _built(factory: Callable[[], Any]) -> nn.Module:
    built = factory()
    if not isinstance(built, nn.Module):
        raise InvalidInputError(f"the factory returned {type(built).__name__}, not an nn.Module")
    return built


def _row(value: Any, profile: Profile, hw: Hardware | None, measured: _PointMeasurement | None) -> SweepRow:
    return SweepRow(
        value=value,
        inputs=format_inputs(profile.inputs),
        params=profile.total_params,
        macs=profile.total_macs,
        flops=profile.total_flops,
        bytes=profile.total_bytes,
        peak_activation_bytes=profile.peak_activation_bytes,
        estimated_seconds=classify(profile, hw).seconds if hw is not None else None,
        measured_seconds=float(measured.seconds) if measured is not None else None,
        measured_peak_bytes=int(measured.peak_bytes) if measured is not None else None,
        capture_reused=profile.capture_reused,
    )


def _run_points(
    state: _Points, points: Sequence[Any], hw: Hardware | None, measure_on: str | None, keep_profiles: bool, on_point: OnPoint | None
) -> None:
    """Profile (and measure) each point in turn; a device out of memory stops the sweep cleanly."""
    measure_fn = _load_measure() if measure_on is not None else None
    for index, value in enumerate(points):
        if on_point is not None:
            on_point(index, value, None)
        pm = state.prepared_at(value)
        options = point_options(pm, state.axis, value)
        profile = pm.profile(**options)
        measured = None
        if measure_fn is not None:
            try:
                measured = measure_fn(pm, device=measure_on, **options)
            except Exception as exc:
                if not _is_out_of_memory(exc):
                    raise
                state.stopped_at = value
                state.notes.append(f"out of device memory at {state.axis.value} {value}: the sweep stopped there")
                return
        row = _row(value, profile, hw, measured)
        state.rows.append(row)
        if keep_profiles:
            state.profiles.append(profile)
        if on_point is not None:
            on_point(index, value, row)


@guard_user_code
def sweep(
    model: nn.Module | str | PreparedModel | Callable[..., nn.Module],
    axis: SweepAxis | str,
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
    on_point: OnPoint | None = None,
) -> Sweep:
    """Profile ``model`` at each of ``values`` along ``axis``; see :mod:`graphprof.scaling`.

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
    prepare_options: dict[str, Any] = {
        "input_shape": input_shape, "example_inputs": example_inputs, "example_kwargs": example_kwargs,
        "batch_size": batch_size, "dtype": dtype, "mode": mode,
    }  # fmt: skip
    if measure and device is not None:
        prepare_options["device"] = "cpu"  # the measured run needs weights; measure() moves a copy to the device
    state = _Points(model, chosen_axis, chosen_key, prepare_options)
    if chosen_axis not in (SweepAxis.LAYERS, SweepAxis.SET):
        state.share(points)
    measure_on = (device or ("cuda" if torch.cuda.is_available() else "cpu")) if measure else None
    try:
        _run_points(state, points, hw, measure_on, keep_profiles, on_point)
    except GraphprofError as exc:  # the points already done go with the error (the CLI shows them)
        exc.partial = _result(state, points, hw, measure)  # type: ignore[attr-defined]
        raise
    return _result(state, points, hw, measure)


def _result(state: _Points, points: Sequence[Any], hw: Hardware | None, measure: bool) -> Sweep:
    shared, model = state.shared, state.model
    recaptured = [r.value for r in state.rows[1:] if not r.capture_reused] if shared is not None else []
    if recaptured:
        state.notes.append(f"captured again at {', '.join(str(v) for v in recaptured)} (the graph is specialised to its input shapes)")
    name = shared.name if shared is not None else (model if isinstance(model, str) else getattr(model, "__name__", "model"))
    return Sweep(
        model=name,
        axis=state.axis,
        key=state.key,
        values=tuple(points),
        rows=tuple(state.rows),
        hardware=hw.name if hw is not None else None,
        measured=measure,
        stopped_at=state.stopped_at,
        notes=tuple(state.notes),
        profiles=tuple(state.profiles),
    )
