"""``prepare``: resolve, warm up and capture a model once; profile it (and run other passes) many times.

:class:`PreparedModel` is the one place where a model object is handled: built (once), warmed up,
captured, and run by :func:`graphprof.runloop.run_model` with whatever observers a pass brings.
:func:`graphprof.profile_model` is ``prepare(...).profile()``; sweeps, measurement and graphs reuse the
same prepared model.

Another batch size, resolution or sequence length reuses the capture where the graph allows it: an FX
graph is shape-generic and the eager capture has no graph; a Dynamo export is redone only when its
guards fail (:meth:`graphprof.capture.CapturedGraph.accepts`). The profile says when it had to capture
again (``capture_reused``).

>>> import graphprof
>>> pm = graphprof.prepare("resnet18")
>>> [pm.profile(batch_size=b).total_macs // 1_000_000 for b in (1, 2)]
[1814, 3628]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    slice_batch,
    warm_up,
)
from graphprof.count import count_costs
from graphprof.errors import CaptureError, InvalidInputError, ModelBuildError, ShapePropagationError
from graphprof.guard import guard_user_code
from graphprof.inputs import describe_inputs, materialize, resize_inputs
from graphprof.lowering import Lowering, lowering_context, parse_lowering
from graphprof.moe import moe_note
from graphprof.options import Mode, parse_dtype, parse_mode, parse_shape
from graphprof.params import parameter_tensors
from graphprof.propagate import DataDependentError, Trace, propagate
from graphprof.result import Profile
from graphprof.runloop import Observer

__all__ = ["PreparedModel", "prepare"]

#: Families whose forward pass reads tensor values, so a model built on the meta device cannot be
#: propagated: detection post-processing (nonzero, nms: data-dependent shapes, run for real) and YOLO
#: (its detect head reads its ``stride`` buffer with ``.item()``; FakeTensors made from real tensors
#: keep such small constants, meta tensors do not). They are built on the CPU straight away.
REAL_VALUE_FAMILIES = frozenset({"detection", "yolo"})

_KEEP: Any = object()

#: Above this many input elements the warm-up materialises only the first sample of a placeholder batch.
_WARM_UP_ELEMENTS = 1 << 24


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer); CPU for a model without either."""
    for t in model.parameters():
        return t.device
    for b in model.buffers():
        return b.device
    return torch.device("cpu")


def _short(exc: BaseException, limit: int = 300) -> str:
    """The message on one line; a very long one ends at a word, never mid-word."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _versions() -> tuple[tuple[str, str], ...]:
    versions = [("graphprof", __version__), ("torch", torch.__version__)]
    try:
        import torchvision

        versions.append(("torchvision", torchvision.__version__))
    except ImportError:  # pragma: no cover - torchvision is a dependency
        pass
    return tuple(versions)


def as_args(example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None) -> tuple[Any, ...]:
    """``example_inputs`` as a tuple of positional arguments (one tensor is one argument)."""
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


@dataclass
class _Capture:
    """A capture that propagated, and how its run goes (``dry-run`` or ``real``)."""

    graph: CapturedGraph
    execution: str
    execution_note: str


@dataclass
class _Run:
    trace: Trace
    capture: _Capture
    reused: bool
    notes: list[str]
    timings: list[tuple[str, float]]


@dataclass(eq=False)
class PreparedModel:
    """A model resolved, warmed up and captured once. See the module docstring.

    ``model``/``args``/``kwargs`` are the model as built (or given) and its example inputs; ``family``
    is a model family (``classification``, ``yolo``, ``hf``, ...) or ``custom`` for a module object.
    """

    name: str
    family: str
    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    mode: Mode
    dtype: torch.dtype | None
    methods: tuple[str, ...]
    allow_real: bool
    lowering: Lowering = Lowering.CPU
    warm: bool = True
    notes: tuple[str, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    _captures: dict[bool, _Capture] = field(default_factory=dict, repr=False)
    _first: _Run | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    @property
    def capture_method(self) -> str:
        cap = self._captures.get(self.mode is Mode.TRAIN)
        return cap.graph.method if cap else "-"

    # ---- inputs ------------------------------------------------------------------------------------
    def inputs(
        self,
        *,
        batch_size: int | None = None,
        input_shape: Sequence[int] | str | None = None,
        seq_len: int | None = None,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The example inputs with another batch size, input shape or sequence length (nothing is built)."""
        return resize_inputs(
            self.args, self.kwargs, batch_size=batch_size, input_shape=parse_shape(input_shape), seq_len=seq_len, what=self.name
        )

    # ---- runs --------------------------------------------------------------------------------------
    def _capture(self, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer], timings: list[tuple[str, float]], attempts: list[tuple[str, str]] | None = None) -> tuple[_Capture, Trace]:
        """Capture with the first method that works *and* whose graph propagates; a graph that captures
        but cannot be run (a traced constant the code mutates, say) moves on to the next method."""
        attempts = list(attempts or [])
        remaining = self.methods
        while True:
            captured = capture_graph(self.model, args, kwargs, methods=remaining)
            captured.attempts[:0] = attempts
            timings.append(("capture", captured.seconds))
            t = time.perf_counter()
            try:
                cap, trace = self._propagate(
                    _Capture(captured, "dry-run", "FakeTensor: shapes only, no arithmetic, no weights read"),
                    args, kwargs, train, dtype, observers,
                )  # fmt: skip
            except ShapePropagationError as exc:
                later = remaining[remaining.index(captured.method) + 1 :]
                if isinstance(exc, DataDependentError) or not later:
                    raise
                attempts = [*captured.attempts, (captured.method, f"captured, but shape propagation failed: {_short(exc)}")]
                remaining = later
                continue
            timings.append(("propagate", time.perf_counter() - t))
            return cap, trace

    def _propagate(self, cap: _Capture, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer]) -> tuple[_Capture, Trace]:
        """One run of ``cap``; a dry run that needs real values runs for real when that is allowed."""
        if cap.execution == "dry-run":
            try:
                modes = [lowering_context(self.lowering)]
                return cap, propagate(cap.graph, self.model, args, kwargs, train=train, dtype=dtype, observers=observers, modes=modes)
            except DataDependentError as exc:
                if not self.allow_real or self.device.type == "meta":
                    raise
                note = f"ran for real on the given input: the dry run cannot go on ({_short(exc)})"
                cap = _Capture(cap.graph, "real", note)
        device = self.device
        real_args, real_kwargs = materialize(args, device), materialize(kwargs, device)
        trace = propagate(cap.graph, self.model, real_args, real_kwargs, train=train, dtype=dtype, fake=False, observers=observers)
        return cap, trace

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer]) -> _Run:
        timings: list[tuple[str, float]] = []
        notes: list[str] = []
        with preserved_state(self.model):
            cap = self._captures.get(train)
            if cap is None:
                self._warm_up(args, kwargs, notes, timings)
                self.model.train(train)
                cap, trace = self._capture(args, kwargs, train, dtype, observers, timings)
                self._captures[train] = cap
                return _Run(trace, cap, False, notes, timings)
            self.model.train(train)
            if cap.graph.accepts(args, kwargs):
                t = time.perf_counter()
                try:
                    cap, trace = self._propagate(cap, args, kwargs, train, dtype, observers)
                    timings.append(("propagate", time.perf_counter() - t))
                    return _Run(trace, cap, True, notes, timings)
                except ShapePropagationError as exc:
                    if isinstance(exc, DataDependentError):
                        raise
                    why = f"the {cap.graph.method} graph did not propagate for these inputs ({_short(exc)})"
            else:
                why = f"the {cap.graph.method} graph is specialised to other input shapes (its guards failed)"
            notes.append(f"captured again: {why}")
            self._warm_up(args, kwargs, notes, timings)
            self.model.train(train)
            fresh, trace = self._capture(args, kwargs, train, dtype, observers, timings)
            return _Run(trace, fresh, False, notes, timings)

    def _warm_up(self, args: tuple[Any, ...], kwargs: dict[str, Any], notes: list[str], timings: list[tuple[str, float]]) -> None:
        """One real forward before a capture (lazy state such as YOLO's anchors); the caller restores the
        model. Meta placeholders get values, the whole batch only when it is small."""
        if not self.warm:
            return
        t = time.perf_counter()
        device = self.device
        whole = sum(x.numel() for x in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor))
        warm = (args, kwargs) if whole <= _WARM_UP_ELEMENTS else (slice_batch(args), slice_batch(kwargs))
        note = warm_up(self.model, materialize(warm[0], device), materialize(warm[1], device))
        if note:
            notes.append(note)
        timings.append(("warm-up", time.perf_counter() - t))

    def run(
        self,
        observers: Sequence[Observer],
        *,
        batch_size: int | None = None,
        input_shape: Sequence[int] | str | None = None,
        seq_len: int | None = None,
        example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
        example_kwargs: dict[str, Any] | None = None,
        dtype: str | torch.dtype | None = _KEEP,
        mode: Mode | str | None = None,
    ) -> Trace:
        """One dry run (or real run, where the model needs values) with ``observers`` riding along.

        The pass behind :meth:`profile`; other passes (an edge builder, say) call it with their own
        observers. The model is left as found.
        """
        args, kwargs, train, run_dtype = self._options(batch_size, input_shape, seq_len, example_inputs, example_kwargs, dtype, mode)
        return self._run(args, kwargs, train, run_dtype, observers).trace

    def graph(
        self, *, depth: int | None = None, hardware: Any = None, detail: bool = True, measurement: Any = None, **options: Any
    ) -> tuple[Any, Any]:
        """The module graph and (with ``detail``) the operator graph of one run: ``(Graph, Graph | None)``.

        ``depth`` folds module-graph nodes into their module at that depth; ``hardware`` (a
        :class:`~graphprof.hardware.Hardware`) adds roofline estimates; ``measurement`` (from
        :meth:`measure`) adds each node's measured time; ``options`` as for :meth:`run`.
        """
        from graphprof.graph.build import GraphBuilder
        from graphprof.graph.measured import with_measured_times

        builder = GraphBuilder(depth=depth, hardware=hardware, detail=detail)
        self.run([builder], **options)
        module_graph, detail_graph = builder.module_graph(self.name), builder.detail_graph(self.name)
        if measurement is not None:
            module_graph = with_measured_times(module_graph, measurement)
            detail_graph = with_measured_times(detail_graph, measurement) if detail_graph is not None else None
        return module_graph, detail_graph

    def _options(self, batch_size: Any, input_shape: Any, seq_len: Any, example_inputs: Any, example_kwargs: Any, dtype: Any, mode: Any) -> tuple[tuple[Any, ...], dict[str, Any], bool, torch.dtype | None]:
        if example_inputs is not None or example_kwargs is not None:
            args, kwargs = as_args(example_inputs), dict(example_kwargs or {})
            args, kwargs = resize_inputs(args, kwargs, batch_size=batch_size, input_shape=parse_shape(input_shape), seq_len=seq_len, what=self.name)
        else:
            args, kwargs = self.inputs(batch_size=batch_size, input_shape=input_shape, seq_len=seq_len)
        run_mode = self.mode if mode is None else parse_mode(mode)
        run_dtype = self.dtype if dtype is _KEEP else parse_dtype(dtype)
        return args, kwargs, run_mode is Mode.TRAIN, run_dtype

    def profile(
        self,
        *,
        batch_size: int | None = None,
        input_shape: Sequence[int] | str | None = None,
        seq_len: int | None = None,
        example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
        example_kwargs: dict[str, Any] | None = None,
        dtype: str | torch.dtype | None = _KEEP,
        mode: Mode | str | None = None,
        observers: Sequence[Observer] = (),
    ) -> Profile:
        """The cost of one forward (and, in train mode, backward) pass at these inputs: a :class:`Profile`.

        With no argument, the inputs of :func:`prepare`. ``batch_size`` / ``input_shape`` / ``seq_len``
        derive inputs of another size (:meth:`inputs`); ``dtype`` and ``mode`` default to the prepared
        ones. ``observers`` ride along on the run.
        """
        args, kwargs, train, run_dtype = self._options(batch_size, input_shape, seq_len, example_inputs, example_kwargs, dtype, mode)
        first = self._first
        if (
            first is not None and not observers and args is self.args and kwargs is self.kwargs
            and train == (self.mode is Mode.TRAIN) and run_dtype == self.dtype
        ):  # fmt: skip
            run = first
        else:
            start = time.perf_counter()
            run = self._run(args, kwargs, train, run_dtype, observers)
            if not run.timings:
                run.timings.append(("propagate", time.perf_counter() - start))
        return self._build(run, args, kwargs, train, run_dtype)

    def measure(self, **options: Any) -> Any:
        """A real run on a device (CUDA when present): a :class:`graphprof.measure.Measurement`.

        Options as :func:`graphprof.measure.measure_prepared` (``device``, ``iters``, ``warmup``,
        ``trace_dir``, ``mode``, ``optimizer``, ``batch_size``, ...). The model is left as found.
        """
        from graphprof.measure.run import measure_prepared

        return measure_prepared(self, **options)

    def _build(self, run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, run_dtype: torch.dtype | None) -> Profile:
        t = time.perf_counter()
        rows, unsupported = count_costs(run.trace)
        modules = aggregate_modules(rows, self.model)
        params = parameter_tensors(self.model)
        buffers = list(self.model.buffers())
        count_seconds = time.perf_counter() - t

        notes = list(self.notes) + run.notes
        cap = run.capture
        if self.methods == DEFAULT_METHODS and cap.graph.method == "eager":
            notes.append("Dynamo export skipped (tens of seconds where symbolic tracing fails): rows are modules; --capture dynamo forces it")
        notes.extend(n for n in (moe_note(rows, self.model),) if n)
        graph_params = sum(r.params for r in rows)
        total_params = sum(p.numel() for p in params)
        if graph_params != total_params:
            notes.append(f"{total_params - graph_params:,} parameters are not used by the captured forward pass")
        if run_dtype is not None:
            notes.append(f"counted as {str(run_dtype).removeprefix('torch.')} (the model itself was not converted)")
        param_dtype = run_dtype or (params[0].dtype if params else torch.float32)
        timings = [*(self.timings if run is self._first else ()), *run.timings, ("count", count_seconds)]
        return Profile(
            model_name=self.name,
            family=self.family,
            mode=Mode.TRAIN.value if train else Mode.EVAL.value,
            dtype=str(param_dtype).removeprefix("torch."),
            inputs=describe_inputs(args, kwargs, run_dtype),
            capture_method=cap.graph.method,
            capture_attempts=tuple(cap.graph.attempts),
            capture_reused=run.reused,
            execution=cap.execution,
            execution_note=cap.execution_note,
            lowering=self.lowering.value if cap.execution == "dry-run" else Lowering.CPU.value,
            layers=tuple(rows),
            modules=tuple(modules),
            total_params=total_params,
            trainable_params=sum(p.numel() for p in params if p.requires_grad),
            param_bytes=sum(p.numel() * (run_dtype.itemsize if run_dtype and p.is_floating_point() else p.element_size()) for p in params),
            buffer_bytes=sum(b.numel() * b.element_size() for b in buffers),
            graph_params=graph_params,
            input_bytes=run.trace.input_bytes,
            output_bytes=run.trace.output_bytes,
            peak_activation_bytes=run.trace.peak_activation_bytes,
            num_subgraphs=cap.graph.num_subgraphs,
            unsupported=tuple(unsupported),
            notes=tuple(notes),
            versions=_versions(),
            timings=tuple(timings),
        )


@guard_user_code
def prepare(
    model_or_name: nn.Module | str,
    *,
    input_shape: Sequence[int] | str | None = None,
    example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
    example_kwargs: dict[str, Any] | None = None,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    mode: Mode | str = Mode.EVAL,
    methods: Sequence[str] | None = None,
    model_name: str | None = None,
    device: str | None = None,
    allow_unsafe_load: bool = False,
    target: str | None = None,
    proposals: int | None = None,
) -> PreparedModel:
    """Resolve (build) a model, warm it up and capture it once; see :class:`PreparedModel`.

    ``model_or_name`` is a name (``"resnet18"``, ``"yolov8n"``, ``"hf:llama"``, ``"pkg.mod:factory"``)
    or an ``nn.Module`` with ``input_shape`` or ``example_inputs``/``example_kwargs``. Named models are
    built on the meta device when the family allows it; ``device="cpu"`` builds them with weights
    (what a real run or a reference counter needs). ``methods`` forces capture methods, tried in order.
    ``allow_unsafe_load=True`` lets a named file run code as it loads, and ``target="cuda"`` costs the
    fused kernels a GPU runs (see :func:`graphprof.profile_model`). ``proposals`` sets a two-stage
    detector's region proposals per image (a model named from the torchvision zoo).
    The user's model is left exactly as it was found.
    """
    run_mode = parse_mode(mode)
    run_dtype = parse_dtype(dtype)
    lowering = parse_lowering(target)
    shape = parse_shape(input_shape)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0):
        raise InvalidInputError(f"batch size must be a positive integer, got {batch_size!r}")
    forced = tuple(methods) if methods is not None else None
    if isinstance(model_or_name, str):
        return _prepare_by_name(
            model_or_name, shape, batch_size, example_inputs, example_kwargs, run_dtype, run_mode, model_name, forced, device,
            allow_unsafe_load, lowering, proposals,
        )  # fmt: skip
    if not isinstance(model_or_name, nn.Module):
        raise InvalidInputError(f"model must be a name or a torch.nn.Module, got {type(model_or_name).__name__}")
    if proposals is not None:
        raise InvalidInputError("proposals applies to a model named from the zoo; set your own model's attributes")
    from graphprof.models.compiled import unwrap_compiled

    module, compiled = unwrap_compiled(model_or_name)
    if example_inputs is not None or example_kwargs is not None:
        args, kwargs = as_args(example_inputs), dict(example_kwargs or {})
        if batch_size is not None:
            args, kwargs = resize_inputs(args, kwargs, batch_size=batch_size)
    elif shape is not None:
        if batch_size is not None:
            shape = (batch_size, *shape[1:])
        # a placeholder on the meta device: the dry run makes it a FakeTensor on the model's device, and
        # only a warm-up or a real run gives it values (seeded, never the global RNG)
        args, kwargs = (torch.empty(shape, device="meta"),), {}
    else:
        raise InvalidInputError("a model object needs input_shape or example_inputs/example_kwargs")
    name = model_name or type(module).__name__
    return _prepare_module(
        module, args, kwargs, name, "custom", [compiled] if compiled else [], run_dtype, run_mode, forced or default_methods(module), [], lowering=lowering
    )


def _prepare_by_name(
    spec: str,
    shape: tuple[int, ...] | None,
    batch_size: int | None,
    example_inputs: Any,
    example_kwargs: dict[str, Any] | None,
    run_dtype: torch.dtype | None,
    mode: Mode,
    model_name: str | None,
    methods: tuple[str, ...] | None,
    device: str | None,
    allow_unsafe_load: bool = False,
    lowering: Lowering = Lowering.CPU,
    proposals: int | None = None,
) -> PreparedModel:
    """Build the named model on the meta device when its family allows it (no weights allocated, no
    init cost); when the dry run needs real values there, build it again on the CPU and run for real."""
    from graphprof.models import resolve_model, spec_family

    last_error: Exception | None = None
    family = spec_family(spec)
    first = "meta" if device is None and family not in REAL_VALUE_FAMILIES else device
    for build_device in dict.fromkeys((first, device)):
        start = time.perf_counter()
        resolved = resolve_model(
            spec, input_shape=shape, batch_size=batch_size, device=build_device, allow_unsafe_load=allow_unsafe_load,
            proposals=proposals,
        )
        args, kwargs = tuple(resolved.args), dict(resolved.kwargs)
        if example_inputs is not None or example_kwargs is not None:
            args, kwargs = as_args(example_inputs), dict(example_kwargs or {})
        on_meta = model_device(resolved.model).type == "meta"
        timings = [("resolve", time.perf_counter() - start)]
        notes = list(resolved.notes)
        if on_meta:
            notes.append("built on the meta device: no weights allocated, nothing computed")
        elif last_error is not None:
            notes.append(f"built on the CPU: the dry run on the meta device failed ({_short(last_error)})")
        try:
            return _prepare_module(
                resolved.model, args, kwargs, model_name or resolved.name, resolved.family, notes,
                run_dtype, mode, methods or default_methods(resolved.model), timings, allow_real=not on_meta,
                lowering=lowering, warm=resolved.family != "detection",
            )  # fmt: skip
        except (DataDependentError, ShapePropagationError, ModelBuildError, CaptureError) as exc:
            if not on_meta or build_device == device:
                raise
            last_error = exc
    raise AssertionError("unreachable")  # pragma: no cover


def _prepare_module(
    module: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    family: str,
    notes: list[str],
    run_dtype: torch.dtype | None,
    mode: Mode,
    methods: tuple[str, ...],
    timings: list[tuple[str, float]],
    *,
    allow_real: bool = True,
    lowering: Lowering = Lowering.CPU,
    warm: bool = True,
) -> PreparedModel:
    """Warm up and capture one built model (the first run validates the capture); leaves it as found.

    ``warm=False`` skips the warm-up, for graphprof's own builds that hold no lazily built state
    (torchvision detection models, whose real run would otherwise run twice)."""
    pm = PreparedModel(name, family, module, args, kwargs, mode, run_dtype, methods, allow_real, lowering, warm)
    run = pm._run(args, kwargs, mode is Mode.TRAIN, run_dtype, ())
    pm.notes = tuple(notes + run.notes)
    pm.timings = tuple(timings + run.timings)
    run.notes, run.timings = [], []
    pm._first = run
    return pm
