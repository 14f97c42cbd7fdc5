"""The real run of a prepared model: model-level times, per-layer times, memory, traces -> :class:`Measurement`.

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

import copy
import datetime
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from graphprof.capture import CapturedGraph
from graphprof.errors import InvalidInputError, MeasurementError, OutputError
from graphprof.inputs import describe_inputs, format_inputs, materialize
from graphprof.measure.host import detect_host
from graphprof.measure.layers import LayerRanges, attribute, kernel_busy_us
from graphprof.measure.memory import peak_during, tracked_breakdown
from graphprof.measure.result import LayerTime, MeasuredMemory, Measurement, OpTime
from graphprof.measure.timing import (
    ProfilingContext,
    RuntimeStats,
    benchmark_function,
    call_model,
    check_runs,
    default_loss,
)
from graphprof.measure.trace import trace_path
from graphprof.runloop import run_model

if TYPE_CHECKING:
    from graphprof.prepared import PreparedModel

__all__ = ["MeasurementError", "OPTIMIZERS", "default_device", "resolve_device", "free_memory", "measure_prepared"]

OPTIMIZERS = ("sgd", "adamw")


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
    """Bytes the device can still give: ``cudaMemGetInfo`` on CUDA, ``MemAvailable`` on Linux, else ``None``."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _state_bytes(model: nn.Module, dtype: torch.dtype | None) -> int:
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        size = dtype.itemsize if dtype is not None and t.is_floating_point() else t.element_size()
        total += t.numel() * size
    return total


def _tensor_bytes(tree: Any) -> int:
    """Bytes of the tensors in a nested structure (inputs, an optimizer's state)."""
    return sum(t.numel() * t.element_size() for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor))


def _materialized(model: nn.Module, device: torch.device, dtype: torch.dtype | None, seed: int) -> tuple[nn.Module, str | None]:
    """A module on ``device`` in ``dtype`` to run: ``model`` itself when it is already there, else a copy.

    A model on the meta device has no values: the copy gets seeded ones (normal(0, 0.02) for floating
    parameters, zeros for buffers, then each module's own ``reset_parameters``), which time like trained
    weights.
    """
    tensors = [*model.parameters(), *model.buffers()]
    on_device = all(t.device == device or (device.type == "cuda" and t.device.type == "cuda" and device.index is None) for t in tensors)
    right_dtype = dtype is None or all(t.dtype == dtype for t in tensors if t.is_floating_point())
    if tensors and on_device and right_dtype:
        return model, None
    meta = any(t.is_meta for t in tensors)
    if not meta:
        work = copy.deepcopy(model).to(device)
        return (work.to(dtype) if dtype is not None else work), f"measured on a copy of the model on {device}"
    work = copy.deepcopy(model).to_empty(device=device)
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
        work = work.to(dtype)
    return work, "built on the meta device: measured with seeded random weights"


def _cast_inputs(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    def cast(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        t = t.to(device)
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    return tree_map(cast, materialize(value, device))


def _oom(exc: BaseException, what: str) -> MeasurementError:
    return MeasurementError(f"CUDA out of memory while measuring {what}: {str(exc).splitlines()[0]}")


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


def _optimizer(name: str, params: Any) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-3)


def measure_prepared(
    prepared: PreparedModel,
    *,
    device: str | torch.device | None = None,
    iters: int = 50,
    warmup: int = 5,
    layer_runs: int = 3,
    trace_dir: str | Path | None = None,
    batch_size: int | None = None,
    input_shape: Sequence[int] | str | None = None,
    seq_len: int | None = None,
    dtype: Any = None,
    mode: str | None = None,
    optimizer: str = "sgd",
    breakdown: bool = True,
    seed: int = 0,
) -> Measurement:
    """Measure ``prepared`` for real on ``device`` (CUDA when present): see the module docstring.

    ``dtype=None`` keeps the prepared dtype. Raises :class:`InvalidInputError` before allocating anything
    for bad options, a missing GPU or a model that does not fit, and :class:`MeasurementError` for a CUDA
    out-of-memory error during the run (naming the batch).
    """
    check_runs(iters, warmup)
    if isinstance(layer_runs, bool) or not isinstance(layer_runs, int) or layer_runs < 1:
        raise InvalidInputError(f"layer runs must be a positive integer, got {layer_runs!r}")
    if optimizer not in OPTIMIZERS:
        raise InvalidInputError(f"unknown optimizer {optimizer!r} (use one of: {', '.join(OPTIMIZERS)})")
    dev = resolve_device(device)
    args, kwargs, train, run_dtype = prepared._options(batch_size, input_shape, seq_len, None, None, prepared.dtype if dtype is None else dtype, mode)
    model = prepared.model
    batch_text = format_inputs(describe_inputs(args, kwargs, run_dtype))

    # 1. does it fit? parameters and buffers (a copy when the model is elsewhere), inputs, gradients and
    # optimizer state in train mode; activations are the dry run's estimate, added by the caller's profile
    state = _state_bytes(model, run_dtype)
    input_bytes = sum(t.numel() * (run_dtype.itemsize if run_dtype is not None and t.is_floating_point() else t.element_size()) for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))
    need = state + input_bytes + (state * (3 if optimizer == "adamw" else 2) if train else 0)
    free = free_memory(dev)
    if trace_dir is not None:
        try:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create the trace directory {trace_dir}: {exc}") from exc
    if free is not None and need > free:
        raise InvalidInputError(
            f"measuring {prepared.name} on {dev} needs at least {_gib(need)} (weights, inputs"
            f"{', gradients and optimizer state' if train else ''}) but only {_gib(free)} is free"
        )

    notes: list[str] = []
    try:
        work, note = _materialized(model, dev, run_dtype, seed)
        if note:
            notes.append(note)
        run_args, run_kwargs = _cast_inputs(args, dev, run_dtype), _cast_inputs(kwargs, dev, run_dtype)
        batch = run_kwargs if not run_args else (run_args if not run_kwargs else None)

        def forward() -> Any:
            if batch is None:
                return work(*run_args, **run_kwargs)
            return call_model(work, batch)

        cuda = dev.type == "cuda"
        with ProfilingContext(work, disable_dropout=True, eval_mode=not train, seed=seed):
            # 3. model level, no instrumentation
            grad = torch.enable_grad if train else torch.no_grad

            def plain_forward() -> None:
                with grad():
                    forward()

            fwd = benchmark_function(plain_forward, num_runs=iters, warmup_runs=warmup, device=dev)
            bwd = step = None
            opt_name = None
            if train:
                saved_grads = {p: p.grad for p in work.parameters()}
                bwd = benchmark_function(lambda loss: loss.backward(), num_runs=iters, warmup_runs=warmup, device=dev, setup=lambda: (default_loss(forward()),))
                opt = _optimizer(optimizer, [p for p in work.parameters() if p.requires_grad])
                saved = {k: v.detach().clone() for k, v in work.state_dict(keep_vars=True).items()} if work is model else None

                def training_step() -> None:
                    opt.zero_grad(set_to_none=True)
                    default_loss(forward()).backward()
                    opt.step()

                step = benchmark_function(training_step, num_runs=iters, warmup_runs=warmup, device=dev)
                opt_name = optimizer
                if saved is not None:
                    with torch.no_grad():
                        for k, v in work.state_dict(keep_vars=True).items():
                            v.copy_(saved[k])
                for p, g in saved_grads.items():
                    p.grad = g

            # 4. per layer: forwards on the run loop, ranges per module, under the profiler
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            eager = CapturedGraph("eager", None)
            ranges = LayerRanges()
            runs, busy, wall, traces = [], [], [], []
            run_model(eager, work, run_args, run_kwargs, [], fake=False)  # warm the hooks' path once
            for i in range(layer_runs):
                with profile(activities=activities, record_shapes=trace_dir is not None) as prof:
                    if cuda:
                        torch.cuda.synchronize(dev)
                    t = time.perf_counter()
                    try:
                        run_model(eager, work, run_args, run_kwargs, [ranges], fake=False)
                    finally:
                        ranges.close()
                    if cuda:
                        torch.cuda.synchronize(dev)
                        wall.append((time.perf_counter() - t) * 1e3)
                    else:  # the forward the layer ranges cover, without the run loop's set-up around it
                        wall.append(ranges.span_seconds * 1e3)
                events = prof.events()
                runs.append(attribute(events))
                if cuda:
                    busy.append(kernel_busy_us(events))
                if trace_dir is not None:
                    path = trace_path(trace_dir, prepared.name, i + 1)
                    try:
                        prof.export_chrome_trace(str(path))
                    except OSError as exc:
                        raise OutputError(f"cannot write the trace {path}: {exc}") from exc
                    traces.append(str(path))
            layers, ops = _mean_times(runs, ranges.types, cuda)
            instrumented = RuntimeStats.from_samples(wall, [], layer_runs, "perf_counter")

            # 5. memory: the allocator's peak for one forward (or training step), then the breakdown
            mem_opt = _optimizer(optimizer, [p for p in work.parameters() if p.requires_grad]) if train else None
            saved_params = {p: p.detach().clone() for p in work.parameters()} if train and work is model else {}
            saved_grads = {p: p.grad for p in work.parameters()}

            def one_step() -> None:
                if not train:
                    with torch.no_grad():
                        forward()
                    return
                assert mem_opt is not None
                default_loss(forward()).backward()
                mem_opt.step()
                mem_opt.zero_grad(set_to_none=True)

            if train:
                one_step()  # optimizer state exists before the measured step, as in a training loop
            # live before the measured step: weights, buffers, inputs and (train) the optimizer's state
            resident = _state_bytes(work, None) + _tensor_bytes((run_args, run_kwargs)) + (_tensor_bytes(mem_opt.state) if mem_opt is not None else 0)
            run_peak, reserved = peak_during(one_step, dev)
            tracked = None
            if breakdown:
                try:
                    tracked = tracked_breakdown(work, one_step, dev, mem_opt)
                except Exception as exc:  # MemTracker is private API: its failure costs the breakdown only
                    if cuda and isinstance(exc, torch.cuda.OutOfMemoryError):
                        raise
                    notes.append(f"no memory breakdown: MemTracker failed ({type(exc).__name__}: {exc})")
            with torch.no_grad():
                for p, v in saved_params.items():
                    p.copy_(v)
            for p, g in saved_grads.items():
                p.grad = g
    except torch.cuda.OutOfMemoryError as exc:
        raise _oom(exc, f"{prepared.name} with batch {batch_text}") from exc

    if train:
        notes.append("per-layer times are of the forward pass")
    memory = MeasuredMemory(
        device=str(dev),
        peak_bytes=resident + run_peak,
        run_peak_bytes=run_peak,
        resident_bytes=resident,
        reserved_bytes=reserved,
        source="torch.cuda.max_memory_allocated" if cuda else "torch.profiler allocator events (profile_memory=True)",
        breakdown=tracked,
    )
    return Measurement(
        model_name=prepared.name,
        device=str(dev),
        dtype=str(run_dtype or next((p.dtype for p in work.parameters()), torch.float32)).removeprefix("torch."),
        mode="train" if train else "eval",
        inputs=batch_text,
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=detect_host(dev),
        forward=fwd,
        instrumented_forward=instrumented,
        layers=layers,
        ops=ops,
        memory=memory,
        backward=bwd,
        training_step=step,
        optimizer=opt_name,
        kernel_busy_us=statistics.fmean(busy) if busy else None,
        layer_runs=layer_runs,
        traces=tuple(traces),
        notes=tuple(notes),
    )
