"""The session at the bottom of every pass: a model resolved, warmed up and captured once, then run.

:class:`Session` is the one place where a model object is handled: built (once), warmed up, captured,
and run by :func:`graphprof.run.loop.run_model` with whatever observers a pass brings
(:meth:`Session.run`). It knows nothing of the passes above it: the dry-run profile
(:mod:`graphprof.profile`), measurement (:mod:`graphprof.measure`), graphs (:mod:`graphprof.graph`) and
sweeps (:mod:`graphprof.sweep`) each take a session (or plain data) and bring their own observers.
:func:`graphprof.prepare` opens a session with those passes as methods
(:class:`graphprof.prepared.PreparedModel`).

Another batch size, resolution or sequence length reuses the capture where the graph allows it: an FX
graph is shape-generic and the eager capture has no graph. The first Dynamo export is specialised to the
first inputs' sizes (no symbolic sizes to guard: pyg:gps profiled 2.4x faster); the first call at other sizes
exports again with symbolic sizes and keeps that graph, which is redone only when its guards fail
(:meth:`graphprof.capture.methods.CapturedGraph.accepts`). A run says when it had to capture again
(:attr:`SessionRun.reused`).

>>> s = open_session("resnet18")
>>> s.run([]).output_bytes   # the logits of one image, float32
4000
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from torch import nn
from typing_extensions import Unpack

from graphprof.base.choices import Execution, Lowering, Method, Mode, WarmUp
from graphprof.base.guard import guard_user_code
from graphprof.base.inputs import materialize, resize_inputs
from graphprof.base.ladder import Fallback, Rung
from graphprof.base.options import ModelOptions, RunSpec, parse_shape
from graphprof.capture.methods import CapturedGraph, default_methods, preserved_state, slice_batch, warm_up, warm_up_reason
from graphprof.capture.plan import CapturePlan
from graphprof.errors import CaptureError, DataDependentError, InvalidInputError, ModelBuildError, ShapePropagationError, one_line
from graphprof.models.family import CUSTOM
from graphprof.models.hf_attention import structured, structured_for
from graphprof.run.events import Observer
from graphprof.run.lowering import lowering_context, parse_lowering
from graphprof.run.propagate import Trace, propagate

__all__ = ["Session", "SessionRun", "RunCall", "open_session", "build_model", "BuiltModel", "model_device", "unwrap_model"]

#: Above this many input elements the warm-up materialises only the first sample of a placeholder batch.
_WARM_UP_ELEMENTS = 1 << 24


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer); CPU for a model without either."""
    for t in model.parameters():
        return t.device
    for b in model.buffers():
        return b.device
    return torch.device("cpu")


@dataclass(frozen=True)
class RunCall:
    """One run's inputs and how it runs: the values that travel together through a session's run."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    train: bool
    dtype: torch.dtype | None
    observers: Sequence[Observer] = ()

    def with_observers(self, observers: Sequence[Observer]) -> RunCall:
        return RunCall(self.args, self.kwargs, self.train, self.dtype, tuple(observers))


@dataclass(frozen=True)
class _Capture:
    """A capture that ran, and how its runs go (a dry run, or real where the dry run needs values)."""

    graph: CapturedGraph
    execution: Execution
    execution_note: str


_DRY_RUN_NOTE = "FakeTensor: shapes only, no arithmetic, no weights read"


@dataclass
class SessionRun:
    """One run of a session: its trace, the capture it ran on (reused or fresh), notes and stage times."""

    trace: Trace
    capture: _Capture
    reused: bool
    notes: list[str]
    timings: list[tuple[str, float]]


class _Stale(Exception):
    """An existing capture that no longer runs for these inputs; the message says why."""


@dataclass(eq=False)
class Session:
    """A model resolved, warmed up and captured once. See the module docstring.

    ``model``/``args``/``kwargs`` are the model as built (or given) and its example inputs; ``family``
    is a model family (``classification``, ``yolo``, ``hf``, ...) or ``custom`` for a module object.
    ``first`` is the run that validated the capture, kept so that the first profile costs nothing more.
    ``warm`` says why one real forward runs before each capture (:func:`~graphprof.capture.methods.warm_up_reason`),
    or is ``None``: then nothing of the model's arithmetic runs on a dry run.
    """

    name: str
    family: str
    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    mode: Mode
    dtype: torch.dtype | None
    methods: tuple[Method, ...]
    allow_real: bool
    lowering: Lowering = Lowering.CPU
    warm: str | None = None
    notes: tuple[str, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    #: the ``build`` rung of the dry run's ladder (:mod:`graphprof.base.ladder`): where the model was built
    build: Fallback | None = None
    #: a transformers object counted with graphprof's structured attention on its dry runs
    #: (:func:`graphprof.models.hf_attention.structured_for`)
    structured_attention: bool = False
    _captures: dict[bool, _Capture] = field(default_factory=dict, repr=False)
    first: SessionRun | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    @property
    def capture_method(self) -> str:
        cap = self._captures.get(self.mode is Mode.TRAIN)
        return cap.graph.method.value if cap else "-"

    # ---- inputs ------------------------------------------------------------------------------------
    def inputs(
        self, *, batch_size: int | None = None, input_shape: Sequence[int] | str | None = None, seq_len: int | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The example inputs with another batch size, input shape or sequence length (nothing is built)."""
        return resize_inputs(
            self.args, self.kwargs, batch_size=batch_size, input_shape=parse_shape(input_shape), seq_len=seq_len, what=self.name
        )

    def resolve(self, spec: RunSpec) -> RunCall:
        """The inputs, train flag and dtype of one run of ``spec``.

        With neither ``example_inputs`` nor a size change, the prepared inputs themselves (the same
        objects, so the first profile reuses the validating run)."""
        if spec.replaces_inputs:
            args, kwargs = spec.example_inputs or (), dict(spec.example_kwargs or {})
            sized = resize_inputs(
                args, kwargs, batch_size=spec.batch_size, input_shape=spec.input_shape, seq_len=spec.seq_len, what=self.name
            )
            args, kwargs = sized
        else:
            args, kwargs = self.inputs(batch_size=spec.batch_size, input_shape=spec.input_shape, seq_len=spec.seq_len)
        dtype, mode = spec.resolved(self.dtype, self.mode)
        return RunCall(args, kwargs, mode is Mode.TRAIN, dtype)

    def is_first(self, call: RunCall) -> bool:
        """Whether ``call`` is the run that validated the capture (the prepared inputs, no observers)."""
        return (
            self.first is not None and not call.observers and call.args is self.args and call.kwargs is self.kwargs
            and call.train == (self.mode is Mode.TRAIN) and call.dtype == self.dtype
        )  # fmt: skip

    # ---- runs --------------------------------------------------------------------------------------
    def run(self, observers: Sequence[Observer], spec: RunSpec | None = None) -> Trace:
        """One dry run (or real run, where the model needs values) with ``observers`` riding along.

        The model is left as found."""
        return self.run_call(self.resolve(spec or RunSpec()).with_observers(observers)).trace

    def run_call(self, call: RunCall) -> SessionRun:
        """One run of ``call``, capturing first where no capture (or no fitting one) exists yet."""
        notes: list[str] = []
        with preserved_state(self.model):
            cap = self._captures.get(call.train)
            if cap is not None:
                try:
                    return self._rerun(cap, call)
                except _Stale as why:
                    notes.append(f"captured again: {why}")
            timings = self._warm_up(call, notes)
            self.model.train(call.train)
            # the first capture is specialised to these sizes; a second one, for other sizes, is symbolic
            fresh, trace, capture_timings = self._capture(call, static_shapes=cap is None)
            if cap is None or cap.graph.static_shapes:
                self._captures[call.train] = fresh
            return SessionRun(trace, fresh, False, notes, timings + capture_timings)

    def _rerun(self, cap: _Capture, call: RunCall) -> SessionRun:
        """Run an existing capture again; :class:`_Stale` (saying why) when it does not hold for ``call``."""
        if not cap.graph.accepts(call.args, call.kwargs):
            raise _Stale(f"the {cap.graph.method} graph is specialised to other input shapes (its guards failed)")
        self.model.train(call.train)
        start = time.perf_counter()
        try:
            cap, trace = self._propagate(cap, call)
        except ShapePropagationError as exc:
            if isinstance(exc, DataDependentError):
                raise
            raise _Stale(f"the {cap.graph.method} graph did not propagate for these inputs ({one_line(exc)})") from exc
        return SessionRun(trace, cap, True, [], [("propagate", time.perf_counter() - start)])

    def _capture(self, call: RunCall, static_shapes: bool) -> tuple[_Capture, Trace, list[tuple[str, float]]]:
        """Capture with the first method whose graph also runs (:class:`~graphprof.capture.plan.CapturePlan`)."""
        plan = CapturePlan.for_model(self.model, self.family, self.methods, static_shapes=static_shapes)

        def run(graph: CapturedGraph, real_ok: bool) -> tuple[_Capture, Trace]:
            # a fresh capture's first run is a dry run; _propagate says when it had to run for real
            return self._propagate(_Capture(graph, Execution.DRY_RUN, _DRY_RUN_NOTE), call, real_ok=real_ok)

        def leaves_only(outcome: tuple[_Capture, Trace]) -> bool:
            return _only_leaves_compute(self.model, outcome[1])

        _, (cap, trace) = plan.capture(self.model, call.args, call.kwargs, run, leaves_only)
        return cap, trace, plan.timings

    def _propagate(self, cap: _Capture, call: RunCall, real_ok: bool = True) -> tuple[_Capture, Trace]:
        """One run of ``cap``; a dry run that needs real values runs for real when that is allowed (and ``real_ok``)."""
        if cap.execution is Execution.DRY_RUN:
            try:
                modes = [lowering_context(self.lowering)]
                with structured(self.model) if self.structured_attention else contextlib.nullcontext():
                    trace = propagate(
                        cap.graph,
                        self.model,
                        call.args,
                        call.kwargs,
                        train=call.train,
                        dtype=call.dtype,
                        observers=call.observers,
                        modes=modes,
                    )
                return cap, trace
            except DataDependentError as exc:
                if not (self.allow_real and real_ok) or self.device.type == "meta":
                    raise
                note = f"ran for real on the given input: the dry run cannot go on ({one_line(exc)})"
                cap = _Capture(cap.graph, Execution.REAL, note)
        device = self.device
        real_args, real_kwargs = materialize(call.args, device), materialize(call.kwargs, device)
        trace = propagate(
            cap.graph, self.model, real_args, real_kwargs, train=call.train, dtype=call.dtype, fake=False, observers=call.observers
        )
        return cap, trace

    def _warm_up(self, call: RunCall, notes: list[str]) -> list[tuple[str, float]]:
        """One real forward before a capture (lazy state such as YOLO's anchors); the caller restores the
        model. Meta placeholders get values, the whole batch only when it is small. Its timing, if it ran."""
        if self.warm is None:
            return []
        t = time.perf_counter()
        device = self.device
        args, kwargs = call.args, call.kwargs
        whole = sum(x.numel() for x in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor))
        warm = (args, kwargs) if whole <= _WARM_UP_ELEMENTS else (slice_batch(args), slice_batch(kwargs))
        note = warm_up(self.model, materialize(warm[0], device), materialize(warm[1], device))
        notes.append(note or f"warmed up with one real forward: {self.warm}")
        return [("warm-up", time.perf_counter() - t)]


def _only_leaves_compute(model: nn.Module, trace: Trace) -> bool:
    """True when every call with a cost ran inside a leaf module (no arithmetic in a container's forward)."""
    from graphprof.base.choices import OpStatus
    from graphprof.formulas import op_status

    leaves = {name for name, m in model.named_modules() if next(m.children(), None) is None}
    for key in [*trace.keys, trace.unattributed]:
        costly = any(op_status(c.func) is OpStatus.COUNTED for c in key.calls)
        if costly and (key.module or "") not in leaves:
            return False
    return True


S = TypeVar("S", bound=Session)


def unwrap_model(model: nn.Module) -> tuple[nn.Module, list[str]]:
    """The module inside the wrappers users hand over, with a note each: ``DataParallel`` /
    ``DistributedDataParallel`` (what they run on each replica: on one device, ``DataParallel`` simply
    calls it) and ``torch.compile``'s ``OptimizedModule`` (:func:`graphprof.models.compiled.unwrap_compiled`);
    any other model as it is."""
    from graphprof.models.compiled import unwrap_compiled

    notes = []
    while True:
        if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
            notes.append(f"profiled the module inside {type(model).__name__} (its .module): the wrapper adds no arithmetic")
            model = model.module
            continue
        inner, note = unwrap_compiled(model)
        if note is None:
            return model, notes
        model, notes = inner, [*notes, note]


@guard_user_code
def open_session(model_or_name: nn.Module | str, *, cls: type[S] = Session, **options: Unpack[ModelOptions]) -> S:  # type: ignore[assignment]  # the default is the base class itself
    """Resolve (build) a model, warm it up and capture it once: a ``cls`` (a :class:`Session`).

    ``options`` are :func:`graphprof.prepare`'s (which documents them); ``cls`` is the session class
    to open (``prepare`` opens a :class:`~graphprof.prepared.PreparedModel`).
    """
    unknown = sorted(set(options) - set(ModelOptions.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (the model options are: {', '.join(ModelOptions.__annotations__)})")
    spec = RunSpec.of(
        batch_size=options.get("batch_size"), input_shape=options.get("input_shape"), example_inputs=options.get("example_inputs"),
        example_kwargs=options.get("example_kwargs"), dtype=options.get("dtype"), mode=options.get("mode", Mode.EVAL),
    )  # fmt: skip
    run_dtype, run_mode = spec.resolved(None, Mode.EVAL)
    methods = options.get("methods")
    build = _BuildOptions(
        cls, parse_lowering(options.get("target")), tuple(Method(m) for m in methods) if methods is not None else None,
        options.get("model_name"), run_dtype, run_mode, WarmUp.parse(options.get("warm_up", WarmUp.AUTO)),
    )  # fmt: skip
    proposals = options.get("proposals")
    if isinstance(model_or_name, str):
        return _open_by_name(  # type: ignore[no-any-return]
            model_or_name, spec, build, options.get("device"), options.get("allow_unsafe_load", False), proposals
        )
    if not isinstance(model_or_name, nn.Module):
        raise InvalidInputError(f"model must be a name or a torch.nn.Module, got {type(model_or_name).__name__}")
    if proposals is not None:
        raise InvalidInputError("proposals applies to a model named from the zoo; set your own model's attributes")
    args, kwargs = _module_inputs(spec)
    name = build.model_name or type(unwrap_model(model_or_name)[0]).__name__
    return _open_module(build, _Built(model_or_name, args, kwargs, name, CUSTOM))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class BuiltModel:
    """A model as a session builds it, before any warm-up or capture: ``real`` where it was built on the
    CPU because its forward reads values (a graph model's edge list)."""

    name: str
    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    real: bool


def build_model(
    model_or_name: nn.Module | str,
    *,
    batch_size: int | None = None,
    input_shape: Sequence[int] | str | None = None,
    example_inputs: tuple[Any, ...] | None = None,
    example_kwargs: dict[str, Any] | None = None,
) -> BuiltModel:
    """Resolve a model as :func:`open_session` does, without warming it up or capturing it (a training
    step runs its own copy): a named model built on the meta device (on the CPU where its family's forward
    reads values), or a module object with its example inputs or a meta placeholder of ``input_shape``."""
    from graphprof.models import family_traits, spec_family

    spec = RunSpec.of(batch_size=batch_size, input_shape=input_shape, example_inputs=example_inputs, example_kwargs=example_kwargs)
    if isinstance(model_or_name, str):
        real = family_traits(spec_family(model_or_name)).needs_real_values
        r, args, kwargs = _resolve_named(model_or_name, spec, "cpu" if real else "meta")
        return BuiltModel(r.name, r.model, args, kwargs, real)
    if not isinstance(model_or_name, nn.Module):
        raise InvalidInputError(f"model must be a name or a torch.nn.Module, got {type(model_or_name).__name__}")
    args, kwargs = _module_inputs(spec)
    on_meta = any(t.device.type == "meta" for t in model_or_name.parameters())
    return BuiltModel(type(model_or_name).__name__, model_or_name, args, kwargs, not on_meta and _reads_values(model_or_name))


def _reads_values(model: nn.Module) -> bool:
    """Whether a module object's forward reads values: graph models' message passing reads the edge list."""
    return any(type(m).__module__.startswith("torch_geometric") for m in model.modules())


@dataclass(frozen=True)
class _BuildOptions:
    """How every model of one :func:`open_session` call is opened."""

    cls: type[Session]
    lowering: Lowering
    methods: tuple[Method, ...] | None
    model_name: str | None
    dtype: torch.dtype | None
    mode: Mode
    warm_up: WarmUp = WarmUp.AUTO


@dataclass(frozen=True)
class _Built:
    """A model as built (or handed over), with its example inputs and what is known of it so far."""

    module: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    family: str
    notes: tuple[str, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    allow_real: bool = True
    build: Fallback | None = None


@contextlib.contextmanager
def _float32_default() -> Iterator[None]:
    """Named models are built as their libraries define them, in float32, whatever the caller's default
    dtype (``torch.set_default_dtype(torch.float64)`` would otherwise give double weights and float inputs);
    the caller's default is put back. ``dtype=`` counts another precision."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _module_inputs(spec: RunSpec) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The example inputs of a model object: given ones, or a meta placeholder of ``input_shape``."""
    if spec.replaces_inputs:
        args, kwargs = spec.example_inputs or (), dict(spec.example_kwargs or {})
        if spec.batch_size is not None:
            args, kwargs = resize_inputs(args, kwargs, batch_size=spec.batch_size)
        return args, kwargs
    if spec.input_shape is None:
        raise InvalidInputError("a model object needs input_shape or example_inputs/example_kwargs")
    shape = spec.input_shape if spec.batch_size is None else (spec.batch_size, *spec.input_shape[1:])
    # a placeholder on the meta device: the dry run makes it a FakeTensor on the model's device, and
    # only a warm-up or a real run gives it values (seeded, never the global RNG)
    return (torch.empty(shape, device="meta"),), {}


def _resolve_named(
    spec_text: str, spec: RunSpec, device: str | None, allow_unsafe_load: bool = False, proposals: int | None = None
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A named model built on ``device`` in float32 (:func:`_float32_default`), and the inputs of the run:
    its example inputs, or the caller's ``example_inputs``/``example_kwargs`` in their place."""
    from graphprof.models import resolve_model

    with _float32_default():
        resolved = resolve_model(
            spec_text, input_shape=spec.input_shape, batch_size=spec.batch_size, device=device,
            allow_unsafe_load=allow_unsafe_load, proposals=proposals,
        )  # fmt: skip
    if spec.replaces_inputs:
        return resolved, tuple(spec.example_inputs or ()), dict(spec.example_kwargs or {})
    return resolved, tuple(resolved.args), dict(resolved.kwargs)


def _open_by_name(
    spec_text: str, spec: RunSpec, options: _BuildOptions, device: str | None, allow_unsafe_load: bool, proposals: int | None
) -> Any:
    """Build the named model on the meta device when its family allows it (no weights allocated, no
    init cost); when the dry run needs real values there, build it again on the CPU and run for real."""
    from graphprof.models import family_traits, spec_family

    last_error: Exception | None = None
    # a family whose forward reads tensor values (Family.needs_real_values) is built on the CPU straight away
    # and so is every model warmed up always (its one real forward needs real weights)
    real = family_traits(spec_family(spec_text)).needs_real_values or options.warm_up is WarmUp.ALWAYS
    first = "meta" if device is None and not real else device
    counted: nn.Module | None = None  # the meta build, whose weights a real build after it would allocate
    for build_device in dict.fromkeys((first, device)):
        if build_device != "meta":  # a real build is a decision: refused up front when its weights cannot fit
            _require_room(spec_text, spec, build_device, counted, _why_real(options.warm_up, device, last_error), proposals)
        start = time.perf_counter()
        resolved, args, kwargs = _resolve_named(spec_text, spec, build_device, allow_unsafe_load, proposals)
        on_meta = model_device(resolved.model).type == "meta"
        counted = resolved.model if on_meta else None
        notes = list(resolved.notes)
        if on_meta:
            notes.append("built on the meta device: no weights allocated, nothing computed")
        elif last_error is not None:
            notes.append(f"built on the CPU: the dry run on the meta device failed ({one_line(last_error)})")
        built = _Built(
            resolved.model, args, kwargs, options.model_name or resolved.name, resolved.family, tuple(notes),
            (("resolve", time.perf_counter() - start),), allow_real=not on_meta,
            build=_build_rung(build_device, on_meta, real, last_error, options.warm_up),
        )  # fmt: skip
        try:
            return _open_module(options, built)
        except (DataDependentError, ShapePropagationError, ModelBuildError, CaptureError) as exc:
            if not on_meta or build_device == device:
                raise
            last_error = exc
    raise AssertionError("unreachable")  # pragma: no cover


def _why_real(warm_up: WarmUp, device: str | None, error: Exception | None) -> str:
    """Why a named model is built with real weights, and how to do without (for :func:`_require_room`)."""
    if error is not None:
        return f"its dry run on the meta device failed ({one_line(error, 120)}), so it would run on the CPU: try a smaller configuration"
    if warm_up is WarmUp.ALWAYS:
        return "warm_up='always' (--capture-warmup always) runs it for real: leave it out for a dry run on the meta device"
    return f"device={device!r} asks for its weights (as --export-onnx does): leave it out for a dry run on the meta device"


def _require_room(spec_text: str, spec: RunSpec, device: str | None, counted: nn.Module | None, why: str, proposals: int | None) -> None:
    """Before a named model is built with real weights: refuse it in one line when its weights alone exceed the
    memory this machine has (:func:`graphprof.base.limits.require_fits`). The weights are counted on the meta
    build that came first, else on one made now for a catalogue family; a user's factory, file or a family whose
    forward reads values is built as asked (graphprof runs a user's code once)."""
    from graphprof.base.limits import require_fits, weight_bytes
    from graphprof.models import family_traits, spec_family

    if counted is None:
        family = spec_family(spec_text)
        if family is None or family_traits(family).needs_real_values:
            return
        counted = _resolve_named(spec_text, spec, "meta", False, proposals)[0].model
        if model_device(counted).type != "meta":
            return  # its builder computes with real tensors: built for real already
    require_fits(weight_bytes(counted), f"building {spec_text} with real weights on {device or 'cpu'}", skip=why)


def _build_rung(device: str | None, on_meta: bool, real: bool, error: Exception | None, warm_up: WarmUp) -> Fallback:
    """Where a named model was built, and why not on the meta device when it was not."""
    if on_meta:
        return Fallback(Rung.BUILD, "meta device")
    where = f"{device} (real weights)" if device else "CPU (real weights)"
    if error is not None:
        return Fallback(Rung.BUILD, where, (("meta device", f"its dry run: {one_line(error)}"),))
    if device is not None and not real:
        return Fallback(Rung.BUILD, where, (("meta device", f"not tried: device={device!r} was asked for"),))
    why = "warm_up='always' runs one real forward" if warm_up is WarmUp.ALWAYS else "its family's forward reads values"
    return Fallback(Rung.BUILD, where, (("meta device", f"not tried: {why}"),))


def _open_module(options: _BuildOptions, built: _Built) -> Any:
    """Warm up (only a model that needs it) and capture one built model (the first run validates the
    capture); leaves it as found."""
    module, unwrapped = unwrap_model(built.module)
    notes = [*built.notes, *unwrapped]
    if isinstance(module, torch.jit.ScriptModule):
        notes.append(
            "a TorchScript module: its aten calls were recorded as it ran (hooks cannot see inside it, so its "
            "cost is one row and its parameters are not attributed to layers)"
        )
    methods = options.methods or default_methods(module)
    warm = warm_up_reason(module, built.family, options.warm_up, methods)
    if warm is None and model_device(module).type != "meta":
        why = "asked for (warm_up='never')" if options.warm_up is WarmUp.NEVER else "nothing in the model initialises lazily"
        notes.append(f"no warm-up: {why}, so none of its arithmetic ran before the dry run")
    session = options.cls(
        built.name, built.family, module, built.args, built.kwargs, options.mode, options.dtype, methods, built.allow_real,
        options.lowering, warm,
    )  # fmt: skip
    structured = structured_for(module, built.kwargs) if built.family == CUSTOM else None
    if structured is not None:
        session.structured_attention, note = structured
        notes.append(note)
    run = session.run_call(RunCall(built.args, built.kwargs, options.mode is Mode.TRAIN, options.dtype))
    session.notes = tuple(notes + run.notes)
    session.timings = built.timings + tuple(run.timings)
    session.build = built.build or Fallback(Rung.BUILD, f"as given ({model_device(module)})")
    run.notes, run.timings = [], []
    session.first = run
    return session
