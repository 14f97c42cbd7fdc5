"""``profile_model``: run graphprof's passes in order and return a :class:`~graphprof.result.Profile`.

resolve model -> warm up -> capture graph -> propagate shapes (dry run) -> count cost -> aggregate by
module. Classification (roofline) and rendering consume the ``Profile`` afterwards.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from graphprof import __version__
from graphprof.aggregate import aggregate_modules
from graphprof.capture import (
    DEFAULT_METHODS,
    CapturedGraph,
    capture_graph,
    default_methods,
    preserved_state,
    warm_up,
)
from graphprof.count import count_costs
from graphprof.errors import CaptureError, InvalidInputError, ModelBuildError, ShapePropagationError
from graphprof.moe import moe_note
from graphprof.params import parameter_tensors
from graphprof.propagate import DataDependentError, Trace, propagate
from graphprof.result import Profile

__all__ = ["Mode", "profile_model", "parse_dtype", "parse_shape"]


class Mode(str, enum.Enum):
    """What is counted: inference (``eval``, no grad) or a training step (``train``: forward + backward)."""

    EVAL = "eval"
    TRAIN = "train"


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
    key = value.strip().lower().removeprefix("torch.")
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


def _model_device(model: nn.Module) -> torch.device:
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


def _describe(value: Any) -> list[str]:
    if isinstance(value, torch.Tensor):
        return ["x".join(str(s) for s in value.shape) + f" {str(value.dtype).removeprefix('torch.')}"]
    if isinstance(value, (list, tuple)):
        inner = [d for v in value for d in _describe(v)]
        return [f"list of {len(value)}: " + ", ".join(inner)] if isinstance(value, list) else inner
    if isinstance(value, dict):
        return [f"{k}={d}" for k, v in value.items() for d in _describe(v)]
    return []


def _versions() -> tuple[tuple[str, str], ...]:
    versions = [("graphprof", __version__), ("torch", torch.__version__)]
    try:
        import torchvision

        versions.append(("torchvision", torchvision.__version__))
    except ImportError:  # pragma: no cover - torchvision is a dependency
        pass
    return tuple(versions)


def profile_model(
    model: nn.Module | str,
    *,
    input_shape: Sequence[int] | str | None = None,
    example_inputs: tuple | list | torch.Tensor | None = None,
    example_kwargs: dict[str, Any] | None = None,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    mode: Mode | str = Mode.EVAL,
    model_name: str | None = None,
    methods: Sequence[str] | None = None,
    proposals: int | None = None,
) -> Profile:
    """Profile a model by name (``"resnet18"``, ``"yolov8n"``, ``"hf:llama"``, ``"pkg.mod:factory"``) or object.

    >>> import graphprof
    >>> p = graphprof.profile_model("resnet18")
    >>> p.total_params, p.capture_method
    (11689512, 'fx.symbolic_trace')

    ``methods`` forces capture methods, tried in order (see :data:`graphprof.capture.METHODS`); by
    default symbolic tracing, then the eager capture (Dynamo only when asked for).

    ``proposals`` sets a two-stage detector's region proposals per image (a model named from the
    torchvision zoo; default: the model's maximum, which a note states).

    A model object needs ``input_shape`` (a float tensor of that shape, on the model's device) or
    ``example_inputs``/``example_kwargs``. The model is left exactly as it was found.
    """
    mode = Mode(mode) if not isinstance(mode, Mode) else mode
    run_dtype = parse_dtype(dtype)
    shape = parse_shape(input_shape)
    if batch_size is not None and batch_size <= 0:
        raise InvalidInputError(f"batch size must be positive, got {batch_size}")
    methods = tuple(methods) if methods is not None else None
    if isinstance(model, str):
        return _profile_by_name(
            model, shape, batch_size, example_inputs, example_kwargs, run_dtype, mode, model_name, methods, proposals
        )
    if proposals is not None:
        raise InvalidInputError("proposals applies to a model named from the zoo; set your own model's attributes")
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a name or a torch.nn.Module, got {type(model).__name__}")
    if example_inputs is not None or example_kwargs is not None:
        args, kwargs = _as_args(example_inputs), dict(example_kwargs or {})
    elif shape is not None:
        if batch_size is not None:
            shape = (batch_size, *shape[1:])
        args, kwargs = (torch.randn(shape, device=_model_device(model)),), {}
    else:
        raise InvalidInputError("a model object needs input_shape or example_inputs/example_kwargs")
    name = model_name or type(model).__name__
    return _profile_module(model, args, kwargs, name, "custom", [], run_dtype, mode, methods or default_methods(model), [])


#: Families whose forward pass reads tensor values, so a model built on the meta device cannot be
#: propagated: detection post-processing (nonzero, nms: data-dependent shapes, run for real) and YOLO
#: (its detect head reads its ``stride`` buffer with ``.item()``; FakeTensors made from real tensors
#: keep such small constants, meta tensors do not). They are built on the CPU straight away.
_REAL_VALUE_FAMILIES = frozenset({"detection", "yolo"})


def _profile_by_name(
    spec: str,
    shape: tuple[int, ...] | None,
    batch_size: int | None,
    example_inputs: Any,
    example_kwargs: dict[str, Any] | None,
    run_dtype: torch.dtype | None,
    mode: Mode,
    model_name: str | None,
    methods: tuple[str, ...] | None,
    proposals: int | None = None,
) -> Profile:
    """Build the named model on the meta device first (no weights allocated, no init cost); when the
    dry run needs real values there, build it again on the CPU and run for real."""
    from graphprof.models import resolve_model

    last_error: Exception | None = None
    for device in ("meta", None):
        start = time.perf_counter()
        resolved = resolve_model(spec, input_shape=shape, batch_size=batch_size, device=device, proposals=proposals)
        args, kwargs = tuple(resolved.args), dict(resolved.kwargs)
        if example_inputs is not None or example_kwargs is not None:
            args, kwargs = _as_args(example_inputs), dict(example_kwargs or {})
        on_meta = _model_device(resolved.model).type == "meta"
        if device == "meta" and resolved.family in _REAL_VALUE_FAMILIES:
            continue  # their post-processing needs values: build for real straight away
        if device == "meta" and not on_meta:
            device = None  # the family cannot be built on meta (quantized): this is the CPU build
        timings = [("resolve", time.perf_counter() - start)]
        notes = list(resolved.notes)
        if device == "meta":
            notes.append("built on the meta device: no weights allocated, nothing computed")
        elif last_error is not None:
            notes.append(f"built on the CPU: the dry run on the meta device failed ({_short(last_error)})")
        try:
            return _profile_module(
                resolved.model, args, kwargs, model_name or resolved.name, resolved.family, notes,
                run_dtype, mode, methods or default_methods(resolved.model), timings, allow_real=device is None,
                warm=resolved.family != "detection",
            )  # fmt: skip
        except (DataDependentError, ShapePropagationError, ModelBuildError, CaptureError) as exc:
            if device is None:
                raise
            last_error = exc
    raise AssertionError("unreachable")  # pragma: no cover


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 120 else text[:117] + "..."


def _profile_module(
    module: nn.Module,
    args: tuple,
    kwargs: dict,
    name: str,
    family: str,
    notes: list[str],
    run_dtype: torch.dtype | None,
    mode: Mode,
    methods: tuple[str, ...],
    timings: list[tuple[str, float]],
    *,
    allow_real: bool = True,
    warm: bool = True,
) -> Profile:
    """Warm up, capture, propagate, count and aggregate one built model; leaves it as found.

    ``warm=False`` skips the warm-up, for graphprof's own builds that hold no lazily built state
    (torchvision detection models, whose real run would otherwise run twice)."""
    train = mode is Mode.TRAIN
    with preserved_state(module):
        t = time.perf_counter()
        warm_note = warm_up(module, args, kwargs) if warm else None
        if warm_note:
            notes.append(warm_note)
        timings.append(("warm-up", time.perf_counter() - t))
        module.train(train)
        captured, trace, execution, execution_note = _capture_and_propagate(
            module, args, kwargs, methods, train, run_dtype, allow_real, timings
        )
        if methods == DEFAULT_METHODS and captured.method == "eager":
            notes.append("Dynamo export skipped (tens of seconds where symbolic tracing fails); --capture dynamo forces it")
        t = time.perf_counter()
        rows, unsupported = count_costs(trace)
        notes.extend(n for n in (moe_note(rows, module),) if n)
        modules = aggregate_modules(rows, module)
        timings.append(("count", time.perf_counter() - t))
        params = parameter_tensors(module)
        buffers = list(module.buffers())

    graph_params = sum(r.params for r in rows)
    total_params = sum(p.numel() for p in params)
    if graph_params != total_params:
        notes.append(
            f"{total_params - graph_params:,} parameters are not used by the captured forward pass"
        )
    if run_dtype is not None:
        notes.append(f"counted as {str(run_dtype).removeprefix('torch.')} (the model itself was not converted)")
    param_dtype = run_dtype or (params[0].dtype if params else torch.float32)
    return Profile(
        model_name=name,
        family=family,
        mode=mode.value,
        dtype=str(param_dtype).removeprefix("torch."),
        input_shapes=tuple(_describe(args) + _describe(kwargs)),
        capture_method=captured.method,
        capture_attempts=tuple(captured.attempts),
        execution=execution,
        execution_note=execution_note,
        layers=tuple(rows),
        modules=tuple(modules),
        total_params=total_params,
        trainable_params=sum(p.numel() for p in params if p.requires_grad),
        param_bytes=sum(p.numel() * (run_dtype.itemsize if run_dtype and p.is_floating_point() else p.element_size()) for p in params),
        buffer_bytes=sum(b.numel() * b.element_size() for b in buffers),
        graph_params=graph_params,
        input_bytes=trace.input_bytes,
        output_bytes=trace.output_bytes,
        peak_activation_bytes=trace.peak_activation_bytes,
        num_subgraphs=captured.num_subgraphs,
        unsupported=tuple(unsupported),
        notes=tuple(notes),
        versions=_versions(),
        timings=tuple(timings),
    )


def _capture_and_propagate(
    module: nn.Module,
    args: tuple,
    kwargs: dict,
    methods: tuple[str, ...],
    train: bool,
    run_dtype: torch.dtype | None,
    allow_real: bool,
    timings: list[tuple[str, float]],
) -> tuple[CapturedGraph, Trace, str, str]:
    """Capture with the first method that works *and* whose graph propagates; a graph that captures
    but cannot be run (a traced constant the code mutates, say) moves on to the next method."""
    attempts: list[tuple[str, str]] = []
    remaining = methods
    while True:
        captured = capture_graph(module, args, kwargs, methods=remaining)
        captured.attempts[:0] = attempts
        timings.append(("capture", captured.seconds))
        t = time.perf_counter()
        execution, note = "dry-run", "FakeTensor: shapes only, no arithmetic, no weights read"
        try:
            try:
                trace = propagate(captured, module, args, kwargs, train=train, dtype=run_dtype, fake=True)
            except DataDependentError as exc:
                if not allow_real or _model_device(module).type == "meta":
                    raise
                execution = "real"
                note = f"ran for real on the given input: the dry run cannot go on ({_short(exc)})"
                trace = propagate(captured, module, args, kwargs, train=train, dtype=run_dtype, fake=False)
        except ShapePropagationError as exc:
            later = remaining[remaining.index(captured.method) + 1 :]
            if isinstance(exc, DataDependentError) or not later:
                raise
            attempts = [*captured.attempts, (captured.method, f"captured, but shape propagation failed: {_short(exc)}")]
            remaining = later
            continue
        timings.append(("propagate", time.perf_counter() - t))
        return captured, trace, execution, note


def _as_args(example_inputs: tuple | list | torch.Tensor | None) -> tuple:
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)
