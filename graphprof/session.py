"""The session at the bottom of every pass: a model resolved, warmed up and captured once, then run.

:class:`Session` is the one place where a model object is handled: built (once), warmed up, captured,
and run by :func:`graphprof.run.loop.run_model` with whatever observers a pass brings
(:meth:`Session.run`). It knows nothing of the passes above it: the dry-run profile
(:mod:`graphprof.profile`), measurement (:mod:`graphprof.measure`), graphs (:mod:`graphprof.graph`) and
sweeps (:mod:`graphprof.sweep`) each take a session (or plain data) and bring their own observers.
:func:`graphprof.prepare` opens a session with those passes as methods
(:class:`graphprof.prepared.PreparedModel`).

Another batch size, resolution or sequence length reuses the capture where the graph allows it: an FX
graph is shape-generic and the eager capture has no graph; a Dynamo export is redone only when its
guards fail (:meth:`graphprof.capture.methods.CapturedGraph.accepts`). A run says when it had to capture again
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

from graphprof.base.choices import WarmUp
from graphprof.base.guard import guard_user_code
from graphprof.base.inputs import materialize, resize_inputs
from graphprof.base.options import Mode, ModelOptions, RunSpec, parse_shape
from graphprof.capture.methods import (
    DEFAULT_METHODS,
    METHODS,
    NOT_TRIED,
    CapturedGraph,
    capture_graph,
    default_methods,
    dynamo_skip_reason,
    family_of,
    preserved_state,
    slice_batch,
    warm_up,
    warm_up_reason,
)
from graphprof.errors import CaptureError, InvalidInputError, ModelBuildError, ShapePropagationError
from graphprof.models.family import CUSTOM
from graphprof.run.loop import Observer
from graphprof.run.lowering import Lowering, lowering_context, parse_lowering
from graphprof.run.propagate import DataDependentError, Trace, propagate

__all__ = ["Session", "SessionRun", "open_session", "model_device", "unwrap_model"]

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


@dataclass
class _Capture:
    """A capture that propagated, and how its run goes (``dry-run`` or ``real``)."""

    graph: CapturedGraph
    execution: str
    execution_note: str


@dataclass
class SessionRun:
    """One run of a session: its trace, the capture it ran on (reused or fresh), notes and stage times."""

    trace: Trace
    capture: _Capture
    reused: bool
    notes: list[str]
    timings: list[tuple[str, float]]


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
    methods: tuple[str, ...]
    allow_real: bool
    lowering: Lowering = Lowering.CPU
    warm: str | None = None
    notes: tuple[str, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    _captures: dict[bool, _Capture] = field(default_factory=dict, repr=False)
    first: SessionRun | None = field(default=None, repr=False)

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

    def resolve(self, spec: RunSpec) -> tuple[tuple[Any, ...], dict[str, Any], bool, torch.dtype | None]:
        """The inputs, train flag and dtype of one run of ``spec``: ``(args, kwargs, train, dtype)``.

        With neither ``example_inputs`` nor a size change, the prepared inputs themselves (the same
        objects, so the first profile reuses the validating run)."""
        if spec.replaces_inputs:
            args, kwargs = spec.example_inputs or (), dict(spec.example_kwargs or {})
            sized = resize_inputs(args, kwargs, batch_size=spec.batch_size, input_shape=spec.input_shape, seq_len=spec.seq_len, what=self.name)
            args, kwargs = sized
        else:
            args, kwargs = self.inputs(batch_size=spec.batch_size, input_shape=spec.input_shape, seq_len=spec.seq_len)
        dtype, mode = spec.resolved(self.dtype, self.mode)
        return args, kwargs, mode is Mode.TRAIN, dtype

    # ---- runs --------------------------------------------------------------------------------------
    def run(self, observers: Sequence[Observer], spec: RunSpec | None = None) -> Trace:
        """One dry run (or real run, where the model needs values) with ``observers`` riding along.

        The model is left as found."""
        args, kwargs, train, dtype = self.resolve(spec or RunSpec())
        return self.run_inputs(args, kwargs, train, dtype, observers).trace

    def run_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer]) -> SessionRun:
        """One run on these inputs, capturing first where no capture (or no fitting one) exists yet."""
        timings: list[tuple[str, float]] = []
        notes: list[str] = []
        with preserved_state(self.model):
            cap = self._captures.get(train)
            if cap is None:
                self._warm_up(args, kwargs, notes, timings)
                self.model.train(train)
                cap, trace = self._capture(args, kwargs, train, dtype, observers, timings)
                self._captures[train] = cap
                return SessionRun(trace, cap, False, notes, timings)
            self.model.train(train)
            reused = self._rerun(cap, args, kwargs, train, dtype, observers, timings) if cap.graph.accepts(args, kwargs) else None
            if isinstance(reused, SessionRun):
                return reused
            why = reused or f"the {cap.graph.method} graph is specialised to other input shapes (its guards failed)"
            notes.append(f"captured again: {why}")
            self._warm_up(args, kwargs, notes, timings)
            self.model.train(train)
            fresh, trace = self._capture(args, kwargs, train, dtype, observers, timings)
            return SessionRun(trace, fresh, False, notes, timings)

    def _rerun(self, cap: _Capture, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer], timings: list[tuple[str, float]]) -> SessionRun | str:
        """Run an existing capture again; the reason to capture again when its graph does not propagate."""
        t = time.perf_counter()
        try:
            cap, trace = self._propagate(cap, args, kwargs, train, dtype, observers)
        except ShapePropagationError as exc:
            if isinstance(exc, DataDependentError):
                raise
            return f"the {cap.graph.method} graph did not propagate for these inputs ({_short(exc)})"
        timings.append(("propagate", time.perf_counter() - t))
        return SessionRun(trace, cap, True, [], timings)

    def _capture(self, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer], timings: list[tuple[str, float]], attempts: list[tuple[str, str]] | None = None) -> tuple[_Capture, Trace]:
        """Capture with the first method that works *and* whose graph propagates; a graph that captures
        but cannot be run (a traced constant the code mutates, say) moves on to the next method.

        In the default order, where symbolic tracing fails the eager capture is tried before Dynamo: when
        it puts every op that costs anything in a leaf module, Dynamo's graph would hold the same ops
        under the same layers, and its export (a second or more) would add nothing. That try stays a dry
        run: a model whose shapes depend on its data goes on to Dynamo, whose graph, run for real, frees its
        values as it goes."""
        skipped = dynamo_skip_reason(family_of(self.model, self.family), self.methods)
        attempts = list(attempts or []) + ([("dynamo.export", f"{NOT_TRIED}: {skipped}")] if skipped else [])
        remaining = tuple(m for m in self.methods if not (skipped and m == "dynamo.export"))
        eager_first = remaining == DEFAULT_METHODS
        while True:
            methods = tuple(m for m in remaining if m != "dynamo.export") if eager_first else remaining
            captured = capture_graph(self.model, args, kwargs, methods=methods)
            captured.attempts[:0] = attempts
            timings.append(("capture", captured.seconds))
            t = time.perf_counter()
            trial = eager_first and captured.method == "eager"  # the eager try before Dynamo stays a dry run
            try:
                cap, trace = self._propagate(
                    _Capture(captured, "dry-run", "FakeTensor: shapes only, no arithmetic, no weights read"),
                    args, kwargs, train, dtype, observers, real_ok=not trial,
                )  # fmt: skip
            except ShapePropagationError as exc:
                later = remaining[remaining.index(captured.method) + 1 :]
                if trial and isinstance(exc, DataDependentError):
                    attempts, eager_first = [a for a in captured.attempts if a[0] != "eager"], False
                    remaining = tuple(m for m in remaining if m != "fx.symbolic_trace")
                    continue  # data-dependent shapes: Dynamo's graph, run for real, frees as it goes
                if isinstance(exc, DataDependentError) or not later:
                    raise
                attempts = [*captured.attempts, (captured.method, f"captured, but shape propagation failed: {_short(exc)}")]
                remaining, eager_first = later, False
                continue
            if trial and not _only_leaves_compute(self.model, trace):
                attempts, eager_first = [a for a in captured.attempts if a[0] != "eager"], False
                remaining = tuple(m for m in remaining if m != "fx.symbolic_trace")
                continue  # arithmetic outside leaf modules: Dynamo's graph gives it layers of its own
            if trial and "dynamo.export" in remaining:
                captured.attempts.append(("dynamo.export", f"{NOT_TRIED}: {DYNAMO_ADDS_NOTHING}"))
            captured.attempts.sort(key=lambda a: METHODS.index(a[0]) if a[0] in METHODS else len(METHODS))
            timings.append(("propagate", time.perf_counter() - t))
            return cap, trace

    def _propagate(self, cap: _Capture, args: tuple[Any, ...], kwargs: dict[str, Any], train: bool, dtype: torch.dtype | None, observers: Sequence[Observer], real_ok: bool = True) -> tuple[_Capture, Trace]:
        """One run of ``cap``; a dry run that needs real values runs for real when that is allowed (and ``real_ok``)."""
        if cap.execution == "dry-run":
            try:
                modes = [lowering_context(self.lowering)]
                return cap, propagate(cap.graph, self.model, args, kwargs, train=train, dtype=dtype, observers=observers, modes=modes)
            except DataDependentError as exc:
                if not (self.allow_real and real_ok) or self.device.type == "meta":
                    raise
                note = f"ran for real on the given input: the dry run cannot go on ({_short(exc)})"
                cap = _Capture(cap.graph, "real", note)
        device = self.device
        real_args, real_kwargs = materialize(args, device), materialize(kwargs, device)
        trace = propagate(cap.graph, self.model, real_args, real_kwargs, train=train, dtype=dtype, fake=False, observers=observers)
        return cap, trace

    def _warm_up(self, args: tuple[Any, ...], kwargs: dict[str, Any], notes: list[str], timings: list[tuple[str, float]]) -> None:
        """One real forward before a capture (lazy state such as YOLO's anchors); the caller restores the
        model. Meta placeholders get values, the whole batch only when it is small."""
        if self.warm is None:
            return
        t = time.perf_counter()
        device = self.device
        whole = sum(x.numel() for x in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor))
        warm = (args, kwargs) if whole <= _WARM_UP_ELEMENTS else (slice_batch(args), slice_batch(kwargs))
        note = warm_up(self.model, materialize(warm[0], device), materialize(warm[1], device))
        notes.append(note or f"warmed up with one real forward: {self.warm}")
        timings.append(("warm-up", time.perf_counter() - t))


#: Why ``auto`` took the eager capture without trying Dynamo (see :meth:`Session._capture`).
DYNAMO_ADDS_NOTHING = "the eager capture puts every op that costs anything in a leaf module, so Dynamo's graph would add nothing"


def _only_leaves_compute(model: nn.Module, trace: Trace) -> bool:
    """True when every call with a cost ran inside a leaf module (no arithmetic in a container's forward)."""
    from graphprof.formulas import OpStatus, op_status

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
    warm_up = WarmUp.parse(options.get("warm_up", WarmUp.AUTO))
    build = _BuildOptions(cls, parse_lowering(options.get("target")), tuple(methods) if methods is not None else None, options.get("model_name"), warm_up)
    proposals = options.get("proposals")
    if isinstance(model_or_name, str):
        return _open_by_name(model_or_name, spec, run_dtype, run_mode, build, options.get("device"), options.get("allow_unsafe_load", False), proposals)  # type: ignore[no-any-return]
    if not isinstance(model_or_name, nn.Module):
        raise InvalidInputError(f"model must be a name or a torch.nn.Module, got {type(model_or_name).__name__}")
    if proposals is not None:
        raise InvalidInputError("proposals applies to a model named from the zoo; set your own model's attributes")
    args, kwargs = _module_inputs(spec)
    name = build.model_name or type(unwrap_model(model_or_name)[0]).__name__
    methods_used = build.methods or default_methods(model_or_name)
    return _open_module(build, model_or_name, args, kwargs, name, CUSTOM, [], run_dtype, run_mode, methods_used, [])  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _BuildOptions:
    cls: type[Session]
    lowering: Lowering
    methods: tuple[str, ...] | None
    model_name: str | None
    warm_up: WarmUp = WarmUp.AUTO


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


def _open_by_name(
    spec_text: str,
    spec: RunSpec,
    run_dtype: torch.dtype | None,
    mode: Mode,
    options: _BuildOptions,
    device: str | None,
    allow_unsafe_load: bool,
    proposals: int | None,
) -> Any:
    """Build the named model on the meta device when its family allows it (no weights allocated, no
    init cost); when the dry run needs real values there, build it again on the CPU and run for real."""
    from graphprof.models import family_traits, resolve_model, spec_family

    last_error: Exception | None = None
    # a family whose forward reads tensor values (Family.needs_real_values) is built on the CPU straight away
    # and so is every model warmed up always (its one real forward needs real weights)
    real = family_traits(spec_family(spec_text)).needs_real_values or options.warm_up is WarmUp.ALWAYS
    first = "meta" if device is None and not real else device
    for build_device in dict.fromkeys((first, device)):
        start = time.perf_counter()
        with _float32_default():
            resolved = resolve_model(
                spec_text, input_shape=spec.input_shape, batch_size=spec.batch_size, device=build_device,
                allow_unsafe_load=allow_unsafe_load, proposals=proposals,
            )  # fmt: skip
        args, kwargs = tuple(resolved.args), dict(resolved.kwargs)
        if spec.replaces_inputs:
            args, kwargs = spec.example_inputs or (), dict(spec.example_kwargs or {})
        on_meta = model_device(resolved.model).type == "meta"
        notes = list(resolved.notes)
        if on_meta:
            notes.append("built on the meta device: no weights allocated, nothing computed")
        elif last_error is not None:
            notes.append(f"built on the CPU: the dry run on the meta device failed ({_short(last_error)})")
        try:
            return _open_module(
                options, resolved.model, args, kwargs, options.model_name or resolved.name, resolved.family, notes,
                run_dtype, mode, options.methods or default_methods(resolved.model), [("resolve", time.perf_counter() - start)],
                allow_real=not on_meta,
            )  # fmt: skip
        except (DataDependentError, ShapePropagationError, ModelBuildError, CaptureError) as exc:
            if not on_meta or build_device == device:
                raise
            last_error = exc
    raise AssertionError("unreachable")  # pragma: no cover


def _open_module(
    options: _BuildOptions,
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
) -> Any:
    """Warm up (only a model that needs it) and capture one built model (the first run validates the
    capture); leaves it as found."""
    module, unwrapped = unwrap_model(module)
    notes = [*notes, *unwrapped]
    if isinstance(module, torch.jit.ScriptModule):
        notes.append(
            "a TorchScript module: its aten calls were recorded as it ran (hooks cannot see inside it, so its "
            "cost is one row and its parameters are not attributed to layers)"
        )
    warm = warm_up_reason(module, family, options.warm_up)
    if warm is None and model_device(module).type != "meta":
        why = "asked for (warm_up='never')" if options.warm_up is WarmUp.NEVER else "nothing in the model initialises lazily"
        notes = [*notes, f"no warm-up: {why}, so none of its arithmetic ran before the dry run"]
    session = options.cls(name, family, module, args, kwargs, mode, run_dtype, methods, allow_real, options.lowering, warm)
    run = session.run_inputs(args, kwargs, mode is Mode.TRAIN, run_dtype, ())
    session.notes = tuple(notes + run.notes)
    session.timings = tuple(timings + run.timings)
    run.notes, run.timings = [], []
    session.first = run
    return session
