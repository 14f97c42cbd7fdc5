"""The real run of a model: model-level times, per-layer times, memory, traces -> :class:`Measurement`.

It takes plain data (the model, its inputs, the run's mode and dtype, :class:`MeasureOptions`), so it
stands below :class:`graphprof.prepared.PreparedModel`, whose ``measure()`` calls it. The model-level
times are :mod:`graphprof.measure.timing`'s ``profile_forward`` / ``profile_backward`` /
``profile_training_step``, the loops the seed's API documents.

Order of work, so that nothing large is allocated before the options are known to be good:

1. check the options (iterations, device present) and that the model fits the device's free memory;
2. a working module on the device: the model itself when it already lives there in the right dtype,
   else a copy (a model on the meta device is materialised with seeded values; the user's model is
   never moved or converted);
3. model-level times without instrumentation (forward; in train mode backward and a training step);
4. ``layer_runs`` forwards on the run loop with :class:`LayerRanges` under ``torch.profiler``, one
   Chrome trace each when asked;
5. the allocator's peak for one forward (or training step), and MemTracker's breakdown.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from graphprof.base import limits
from graphprof.base.choices import Mode, Optimizer
from graphprof.base.inputs import describe_inputs, format_inputs, materialize
from graphprof.base.limits import require_fits, weight_bytes
from graphprof.base.tied import keep_ties
from graphprof.capture.methods import preserved_state
from graphprof.devices.local import detect_host
from graphprof.errors import GraphprofError, InvalidInputError, MeasurementError, OutputError, first_line
from graphprof.measure.kineto import quiet_kineto
from graphprof.measure.layers import LayerRanges, attribute, kernel_busy_us
from graphprof.measure.memory import peak_during, tracked_breakdown
from graphprof.measure.result import ForwardFaults, LayerTime, MeasuredMemory, Measurement, OpTime
from graphprof.measure.timing import (
    ProfilingContext,
    RuntimeStats,
    call_model,
    check_runs,
    default_loss,
    faulted_bytes,
    profile_backward,
    profile_forward,
    profile_training_step,
)
from graphprof.measure.trace import claim_trace_path
from graphprof.run.loop import run_model

__all__ = [
    "MeasureOptions",
    "cast_inputs",
    "is_out_of_memory",
    "default_device",
    "materialized",
    "resolve_device",
    "free_memory",
    "measure_run",
]


def default_device() -> str:
    """``"cuda"`` when a GPU is present, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to measure on; :class:`InvalidInputError` for an unknown one or CUDA without a GPU."""
    try:
        dev = torch.device(device if device is not None else default_device())
    except (RuntimeError, TypeError) as exc:
        raise InvalidInputError(f"unknown device {device!r} (use cpu or cuda)") from exc
    if dev.type not in ("cpu", "cuda"):
        raise InvalidInputError(f"measuring on {dev.type!r} is not supported (use cpu or cuda)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError("--device cuda: no CUDA GPU is available on this machine (torch.cuda.is_available() is False)")
    return dev


def free_memory(device: torch.device) -> int | None:
    """Bytes the device can still give: ``cudaMemGetInfo`` on CUDA, else the host's
    (:func:`graphprof.base.limits.available_memory`: ``MemAvailable`` on Linux)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return limits.available_memory()  # looked up on the module: one figure for every check, lowered alike in tests


def _tensor_bytes(tree: Any) -> int:
    """Bytes of the tensors in a nested structure (inputs, an optimizer's state)."""
    return sum(t.numel() * t.element_size() for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor))


def materialized(model: nn.Module, device: torch.device, dtype: torch.dtype | None, seed: int) -> tuple[nn.Module, str | None]:
    """A module on ``device`` in ``dtype`` to run: ``model`` itself when it is already there, else a copy.

    A model on the meta device has no values: the copy gets seeded ones (normal(0, 0.02) for floating
    parameters, zeros for buffers, then each module's own ``reset_parameters``), which time like trained
    weights. Tied parameters stay one parameter in the copy (:func:`graphprof.base.tied.keep_ties`).
    """
    tensors = [*model.parameters(), *model.buffers()]
    on_device = all(t.device == device or (device.type == "cuda" and t.device.type == "cuda" and device.index is None) for t in tensors)
    right_dtype = dtype is None or all(t.dtype == dtype for t in tensors if t.is_floating_point())
    if tensors and on_device and right_dtype:
        return model, None
    meta = any(t.is_meta for t in tensors)
    if not meta:
        work = keep_ties(copy.deepcopy(model), lambda m: m.to(device) if dtype is None else m.to(device).to(dtype))
        return work, f"measured on a copy of the model on {device}"
    work = keep_ties(copy.deepcopy(model), lambda m: m.to_empty(device=device))  # from meta: one parameter per name
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        torch.manual_seed(seed)
        for p in work.parameters():
            if p.is_floating_point():
                p.normal_(0.0, 0.02)
        for b in work.buffers():
            b.zero_()
        for m in work.modules():
            reset = getattr(m, "reset_parameters", None)
            if callable(reset):
                reset()
    if dtype is not None:
        work = keep_ties(work, lambda m: m.to(dtype))
    return work, "built on the meta device: measured with seeded random weights"


def cast_inputs(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    def cast(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        t = t.to(device)
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    return tree_map(cast, materialize(value, device))


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocator's failure: CUDA's ``OutOfMemoryError``, Python's ``MemoryError``, or the CPU allocator's
    ``RuntimeError`` ("DefaultCPUAllocator: can't allocate memory")."""
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in str(exc) or "out of memory" in str(exc).lower())


def _run_failed(exc: BaseException, dev: torch.device, what: str) -> MeasurementError:
    """The measurement's own error for a failure during the real run: out of memory (naming the batch),
    or the model's exception (its type and first line)."""
    first = first_line(exc)
    if is_out_of_memory(exc):
        where = "CUDA" if dev.type == "cuda" else "host"
        return MeasurementError(f"out of {where} memory while measuring {what}: {type(exc).__name__}: {first}")
    return MeasurementError(f"the model raised while measuring {what}: {type(exc).__name__}: {first}")


def _mean_times(runs: list[Any], types: dict[str, str], cuda: bool) -> tuple[tuple[LayerTime, ...], tuple[OpTime, ...]]:
    n = len(runs)
    order: list[str] = []
    for r in runs:
        order += [name for name in r.order if name not in order]
    layers = tuple(
        LayerTime(
            name=name,
            type=types.get(name, "-"),
            calls=round(sum(r.calls.get(name, 0) for r in runs) / n),
            cpu_us=sum(r.cpu_us.get(name, 0.0) for r in runs) / n,
            kernel_us=sum(r.kernel_us.get(name, 0.0) for r in runs) / n if cuda else None,
        )
        for name in order
    )
    keys: list[tuple[str, str]] = []
    for r in runs:
        keys += [k for k in r.op_cpu_us if k not in keys]
    ops = tuple(
        OpTime(
            layer=k[0],
            op=k[1],
            calls=round(sum(r.op_calls.get(k, 0) for r in runs) / n),
            cpu_us=sum(r.op_cpu_us.get(k, 0.0) for r in runs) / n,
            kernel_us=sum(r.op_kernel_us.get(k, 0.0) for r in runs) / n if cuda else None,
            dispatched_calls=round(sum(r.dispatched_calls.get(k, 0) for r in runs) / n),
            dispatched_cpu_us=sum(r.dispatched_cpu_us.get(k, 0.0) for r in runs) / n,
            dispatched_kernel_us=sum(r.dispatched_kernel_us.get(k, 0.0) for r in runs) / n if cuda else None,
        )
        for k in keys
    )
    return layers, ops


def _optimizer(name: Optimizer | str, params: Any) -> torch.optim.Optimizer:
    if Optimizer.parse(name) is Optimizer.SGD:
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-3)


@dataclass(frozen=True)
class MeasureOptions:
    """How to measure: the device (CUDA when present), timed and warm-up iterations, instrumented
    per-layer runs, a folder for Chrome traces, the optimizer of a training step, the memory breakdown
    (MemTracker) and the seed of random weights and dropout."""

    device: str | torch.device | None = None
    iters: int = 50
    warmup: int = 5
    layer_runs: int = 3
    trace_dir: str | Path | None = None
    optimizer: str = "adamw"
    breakdown: bool = True
    seed: int = 0
    #: the dry run's peak activation bytes, counted in the check that the run fits (0: not known)
    activation_bytes: int = 0

    def check(self) -> torch.device:
        """The device to measure on, once every option is known to be good (:class:`InvalidInputError`)."""
        check_runs(self.iters, self.warmup)
        if isinstance(self.layer_runs, bool) or not isinstance(self.layer_runs, int) or self.layer_runs < 1:
            raise InvalidInputError(f"layer runs must be a positive integer, got {self.layer_runs!r}")
        Optimizer.parse(self.optimizer)
        return resolve_device(self.device)


class _Bound(nn.Module):
    """A model called with positional inputs and fixed keyword ones, for the seed-style timing helpers."""

    def __init__(self, model: nn.Module, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.model = model
        self._kwargs = kwargs

    def forward(self, *args: Any) -> Any:
        return self.model(*args, **self._kwargs)


def _batch(work: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[nn.Module, Any]:
    """``(module, batch)`` such that ``call_model(module, batch)`` is ``work(*args, **kwargs)``."""
    if not kwargs:
        return work, args
    if not args:
        return work, kwargs
    return _Bound(work, kwargs), args


def _check_fits(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    dev: torch.device,
    dtype: torch.dtype | None,
    train: bool,
    options: MeasureOptions,
) -> None:
    """Refuse, before allocating anything, a run whose weights, inputs, peak activations (the dry run's
    figure, when given) and, in train mode, gradients and optimizer state exceed the device's free memory."""
    state = weight_bytes(model, dtype)
    input_bytes = sum(
        t.numel() * (dtype.itemsize if dtype is not None and t.is_floating_point() else t.element_size())
        for t in torch.utils._pytree.tree_leaves((args, kwargs))
        if isinstance(t, torch.Tensor)
    )
    need = (
        state
        + input_bytes
        + options.activation_bytes
        + (state * (3 if Optimizer.parse(options.optimizer) is Optimizer.ADAMW else 2) if train else 0)
    )
    free = free_memory(dev)
    if free is not None:  # the one check before a real allocation (graphprof.base.limits.require_fits)
        what = f"measuring {name} on {dev} (weights, inputs, activations{', gradients and optimizer state' if train else ''})"
        require_fits(need, what, budget=free, skip="leave out the real run (--measure) for the dry run's estimate alone")


def _trace_folder(trace_dir: str | Path | None) -> None:
    if trace_dir is None:
        return
    try:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the trace directory {trace_dir}: {exc}") from exc


@dataclass
class _ModelTimes:
    forward: RuntimeStats
    backward: RuntimeStats | None = None
    training_step: RuntimeStats | None = None
    #: the median bytes a timed plain forward faulted in (CPU, eval), else ``None``
    fault_bytes: float | None = None


@dataclass(frozen=True)
class _Run:
    """One measured run: ``work`` (the user's ``model`` or its copy on the device) called with ``args``/``kwargs``."""

    work: nn.Module
    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    dev: torch.device
    train: bool
    options: MeasureOptions

    def batch(self) -> tuple[nn.Module, Any]:
        return _batch(self.work, self.args, self.kwargs)

    def optimizer(self) -> torch.optim.Optimizer:
        return _optimizer(self.options.optimizer, [p for p in self.work.parameters() if p.requires_grad])


def _model_times(run: _Run) -> _ModelTimes:
    """Forward (with grad in train mode), then in train mode backward alone and a whole training step,
    uninstrumented. A training step on the user's own model puts its parameters back afterwards."""
    module, batch = run.batch()
    n, warm, dev = run.options.iters, run.options.warmup, run.dev
    faults: list[float] | None = [] if _counts_faults(run) else None
    times = _ModelTimes(profile_forward(module, batch, num_runs=n, warmup_runs=warm, grad=run.train, device=dev, faults=faults))
    if faults and len(faults) > warm:
        times.fault_bytes = statistics.median(faults[warm:])
    if run.train:
        times.backward = profile_backward(module, batch, num_runs=n, warmup_runs=warm, device=dev)
        restore = run.work is run.model
        times.training_step = profile_training_step(
            module, batch, run.optimizer(), num_runs=n, warmup_runs=warm, restore=restore, device=dev
        )
    return times


def _counts_faults(run: _Run) -> bool:
    """Whether the run counts its forwards' page faults: a CPU forward in eval mode."""
    return run.dev.type == "cpu" and not run.train


def _faults(times: _ModelTimes, profiled: list[float]) -> ForwardFaults | None:
    """Both counts, where the timed plain forwards were counted (:func:`_counts_faults`)."""
    if times.fault_bytes is None or not profiled:
        return None
    return ForwardFaults(times.fault_bytes, statistics.median(profiled))


#: What :func:`_layer_times` returns: layer and op times, the instrumented forward, the GPU's busy time, the traces
#: written and each profiled forward's faulted bytes.
_LayerTimes = tuple[tuple[LayerTime, ...], tuple[OpTime, ...], RuntimeStats, float | None, tuple[str, ...], list[float]]


def _layer_times(run: _Run, name: str) -> _LayerTimes:
    """``layer_runs`` forwards on the run loop with :class:`LayerRanges` under ``torch.profiler`` (a
    Chrome trace each when asked): mean layer and op times, the instrumented forward, the GPU's busy time, and
    the bytes of fresh pages each profiled forward faulted in."""
    from torch.profiler import ProfilerActivity, profile

    work, args, kwargs, dev, options = run.work, run.args, run.kwargs, run.dev, run.options
    cuda = dev.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    ranges = LayerRanges()
    runs, busy, wall, traces, faults = [], [], [], [], []
    run_model(None, work, args, kwargs, [], fake=False)  # warm the hooks' path once (None: the model itself runs)
    traced = options.trace_dir is not None  # a trace file carries shapes and memory events, as seed 003's do
    for _ in range(options.layer_runs):
        with quiet_kineto(), profile(activities=activities, record_shapes=traced, profile_memory=traced) as prof:
            if cuda:
                torch.cuda.synchronize(dev)
            t = time.perf_counter()
            try:
                faults.append(faulted_bytes(lambda: run_model(None, work, args, kwargs, [ranges], fake=False)))
            finally:
                ranges.close()
            if cuda:
                torch.cuda.synchronize(dev)
            # on the CPU, the forward the layer ranges cover, without the run loop's set-up around it
            wall.append((time.perf_counter() - t) * 1e3 if cuda else ranges.span_seconds * 1e3)
        events = prof.events()
        runs.append(attribute(events))
        if cuda:
            busy.append(kernel_busy_us(events))
        if options.trace_dir is not None:
            traces.append(_export_trace(prof, options.trace_dir, name))
    layers, ops = _mean_times(runs, ranges.types, cuda)
    instrumented = RuntimeStats.from_samples(wall, [], options.layer_runs, "perf_counter")
    return layers, ops, instrumented, (statistics.fmean(busy) if busy else None), tuple(traces), faults


def _export_trace(prof: Any, trace_dir: str | Path, name: str) -> str:
    """Write one profiled forward's Chrome trace under the next free number (never over an existing file)."""
    try:
        path, _ = claim_trace_path(trace_dir, name)
        prof.export_chrome_trace(str(path))
    except OSError as exc:
        raise OutputError(f"cannot write a trace of {name} in {trace_dir}: {exc}") from exc
    return str(path)


def _memory(run: _Run, notes: list[str]) -> MeasuredMemory:
    """The allocator's peak for one forward (or training step), then MemTracker's breakdown; parameters
    and gradients of the user's own model are put back afterwards."""
    work, dev = run.work, run.dev
    cuda = dev.type == "cuda"
    mem_opt = run.optimizer() if run.train else None
    saved_params = {p: p.detach().clone() for p in work.parameters()} if run.train and work is run.model else {}
    saved_grads = {p: p.grad for p in work.parameters()}
    module, batch = run.batch()

    def one_step() -> None:
        if mem_opt is None:
            with torch.no_grad():
                call_model(module, batch)
            return
        default_loss(call_model(module, batch)).backward()
        mem_opt.step()
        mem_opt.zero_grad(set_to_none=True)

    try:
        if mem_opt is not None:
            one_step()  # optimizer state exists before the measured step, as in a training loop
        # live before the measured step: weights, buffers, inputs and (train) the optimizer's state
        resident = (
            weight_bytes(work, None) + _tensor_bytes((run.args, run.kwargs)) + (_tensor_bytes(mem_opt.state) if mem_opt is not None else 0)
        )
        run_peak, reserved = peak_during(one_step, dev)
        tracked = _breakdown(work, one_step, dev, mem_opt, notes) if run.options.breakdown else None
    finally:
        with torch.no_grad():
            for p, v in saved_params.items():
                p.copy_(v)
        for p, g in saved_grads.items():
            p.grad = g
    return MeasuredMemory(
        device=str(dev),
        peak_bytes=resident + run_peak,
        run_peak_bytes=run_peak,
        resident_bytes=resident,
        reserved_bytes=reserved,
        source="torch.cuda.max_memory_allocated" if cuda else "torch.profiler allocator events (profile_memory=True)",
        breakdown=tracked,
    )


def _breakdown(work: nn.Module, step: Any, dev: torch.device, opt: torch.optim.Optimizer | None, notes: list[str]) -> Any:
    try:
        return tracked_breakdown(work, step, dev, opt)
    except Exception as exc:  # MemTracker is private API: its failure costs the breakdown only
        if dev.type == "cuda" and isinstance(exc, torch.cuda.OutOfMemoryError):
            raise
        notes.append(f"no memory breakdown: MemTracker failed ({type(exc).__name__}: {exc})")
        return None


def measure_run(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    name: str,
    train: bool = False,
    dtype: torch.dtype | None = None,
    options: MeasureOptions = MeasureOptions(),
) -> Measurement:
    """Measure ``model(*args, **kwargs)`` for real: see the module docstring.

    Raises :class:`InvalidInputError` before allocating anything for bad options, a missing GPU or a
    model that does not fit, and :class:`MeasurementError` for a CUDA out-of-memory error during the run
    (naming the batch). The model is left as found (a copy is measured when it lives elsewhere).
    """
    dev = options.check()
    batch_text = format_inputs(describe_inputs(args, kwargs, dtype))
    _check_fits(model, args, kwargs, name, dev, dtype, train, options)
    _trace_folder(options.trace_dir)
    notes: list[str] = []
    try:
        work, note = materialized(model, dev, dtype, options.seed)
        notes += [note] if note else []
        run_args, run_kwargs = cast_inputs(args, dev, dtype), cast_inputs(kwargs, dev, dtype)
        # the user's own model keeps its buffers (BatchNorm statistics), attributes and flags; a train-mode
        # run records autograd whatever the caller's grad mode
        kept = preserved_state(model) if work is model else contextlib.nullcontext()
        with kept, torch.enable_grad() if train else contextlib.nullcontext():
            with ProfilingContext(work, disable_dropout=True, eval_mode=not train, seed=options.seed):
                run = _Run(work, model, run_args, run_kwargs, dev, train, options)
                times = _model_times(run)
                layers, ops, instrumented, busy, traces, profiled_faults = _layer_times(run, name)
                memory = _memory(run, notes)
    except GraphprofError:
        raise
    except Exception as exc:
        raise _run_failed(exc, dev, f"{name} with batch {batch_text}") from exc
    if train:
        notes.append("per-layer times are of the forward pass")
    return Measurement(
        model_name=name,
        device=str(dev),
        dtype=str(dtype or next((p.dtype for p in work.parameters()), torch.float32)).removeprefix("torch."),
        mode=Mode.TRAIN if train else Mode.EVAL,
        inputs=batch_text,
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=detect_host(dev),
        forward=times.forward,
        instrumented_forward=instrumented,
        layers=layers,
        ops=ops,
        memory=memory,
        backward=times.backward,
        training_step=times.training_step,
        optimizer=Optimizer.parse(options.optimizer) if train else None,
        kernel_busy_us=busy,
        layer_runs=options.layer_runs,
        traces=traces,
        notes=tuple(notes),
        faults=_faults(times, profiled_faults),
    )
