"""The dry-run profile: a session's run counted, aggregated by module and assembled into a :class:`Profile`.

The pipeline above the session: run with observers (dry run) -> count cost -> aggregate by module ->
:class:`~graphprof.cost.result.Profile`. Classification (roofline) and rendering consume the profile
afterwards. ``profile_model`` (one model) and ``compare_models`` (several, side by side) are the
one-call API over it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from typing_extensions import Unpack

from graphprof.base.choices import Execution, Lowering, Method, Mode
from graphprof.base.collector import full_collections_deferred
from graphprof.base.display import NotebookDisplay
from graphprof.base.guard import guard_user_code
from graphprof.base.inputs import describe_inputs
from graphprof.base.ladder import Fallback, Rung
from graphprof.base.options import ModelOptions, RunSpec
from graphprof.capture.methods import NOT_TRIED
from graphprof.cost.aggregate import aggregate_modules
from graphprof.cost.count import count_costs
from graphprof.cost.result import Profile
from graphprof.cost.roofline import with_roofline
from graphprof.errors import GraphprofError
from graphprof.run.events import Observer
from graphprof.run.lowering import moe_note
from graphprof.run.params import parameter_tensors
from graphprof.run.propagate import Trace
from graphprof.session import RunCall, Session, SessionRun, open_session
from graphprof.version import __version__

__all__ = ["profile_session", "build_profile", "profile_model", "compare_models", "iter_compare", "ModelOutcome"]


def profile_session(session: Session, spec: RunSpec | None = None, observers: Sequence[Observer] = ()) -> Profile:
    """The cost of one forward (and, in train mode, backward) pass of ``session`` at ``spec``'s inputs.

    The first profile at the prepared inputs reuses the run that validated the capture."""
    call = session.resolve(spec or RunSpec()).with_observers(observers)
    if session.first is not None and session.is_first(call):
        return build_profile(session, session.first, call)
    start = time.perf_counter()
    run = session.run_call(call)
    if not run.timings:
        run.timings.append(("propagate", time.perf_counter() - start))
    return build_profile(session, run, call)


def _versions() -> tuple[tuple[str, str], ...]:
    versions = [("graphprof", __version__), ("torch", torch.__version__)]
    try:
        import torchvision

        versions.append(("torchvision", torchvision.__version__))
    except ImportError:  # pragma: no cover - torchvision is a dependency
        pass
    return tuple(versions)


def _notes(session: Session, run: SessionRun, rows: list[Any], run_dtype: torch.dtype | None) -> list[str]:
    notes = list(session.notes) + run.notes
    skipped = dict(run.capture.graph.attempts).get(Method.DYNAMO, "")
    if run.capture.graph.method is Method.EAGER and skipped.startswith(f"{NOT_TRIED}: "):
        notes.append(f"Dynamo export {skipped} (rows are modules; --capture dynamo forces it)")
    notes.extend(n for n in (moe_note(rows, session.model),) if n)
    if run.trace.real_ops:
        ran = ", ".join(f"{op} x{n}" for op, n in run.trace.real_ops)
        notes.append(f"a dry run but for {ran}: ran on the input's real index values, because later shapes depend on them")
    notes.extend(_empty_notes(run.trace))
    graph_params = sum(r.params for r in rows)
    total_params = sum(p.numel() for p in parameter_tensors(session.model))
    if graph_params != total_params and not isinstance(session.model, torch.jit.ScriptModule):
        notes.append(f"{total_params - graph_params:,} parameters are not used by the captured forward pass")
    if run_dtype is not None:
        notes.append(f"counted as {str(run_dtype).removeprefix('torch.')} (the model itself was not converted)")
    return notes


def _empty_notes(trace: Trace) -> list[str]:
    """The guard against silent zeros: a value-dependent shape that came out 0 on the input's real values,
    and layers with weights that read an empty tensor on the dry run (their counts are 0)."""
    notes = []
    if trace.empty_ops:
        ran = ", ".join(f"{op} x{n}" for op, n in trace.empty_ops)
        notes.append(f"WARNING: {ran} gave an empty tensor on the input's real index values: what follows counts no work for it")
    if trace.empty_layers:
        shown = ", ".join(trace.empty_layers[:5]) + (f" and {len(trace.empty_layers) - 5} more" if len(trace.empty_layers) > 5 else "")
        notes.append(f"WARNING: {shown} read weights beside an empty tensor on the dry run and count 0 there; check the input")
    return notes


def _fallbacks(session: Session, run: SessionRun) -> tuple[Fallback, ...]:
    """The dry run's ladder for ``run``, rung by rung (:mod:`graphprof.base.ladder`)."""
    cap, trace = run.capture, run.trace
    capture = Fallback(Rung.CAPTURE, cap.graph.method.value, tuple(cap.graph.attempts))
    if trace.real_ops:
        ran = ", ".join(f"{op} x{n}" for op, n in trace.real_ops)
        values = Fallback(
            Rung.VALUES,
            f"the input's real index values for {ran}",
            (("shapes from metadata alone", "later shapes depend on these ops' values"),),
        )
    else:
        values = Fallback(Rung.VALUES, "real tensors throughout" if not trace.fake else "no op needed values")
    if cap.execution is Execution.DRY_RUN:
        execution = Fallback(Rung.EXECUTION, "dry run")
    else:
        execution = Fallback(Rung.EXECUTION, "real run", (("dry run", cap.execution_note),))
    return tuple(f for f in (session.build, capture, trace.tensors, values, execution) if f is not None)


def build_profile(session: Session, run: SessionRun, call: RunCall) -> Profile:
    """Count ``run``'s ops (a run of ``call``), aggregate them by module and assemble the :class:`Profile`."""
    run_dtype = call.dtype
    t = time.perf_counter()
    rows, unsupported = count_costs(run.trace)
    modules = aggregate_modules(rows, session.model)
    params = parameter_tensors(session.model)
    count_seconds = time.perf_counter() - t
    cap = run.capture
    param_dtype = run_dtype or (params[0].dtype if params else torch.float32)
    timings = [*(session.timings if run is session.first else ()), *run.timings, ("count", count_seconds)]
    profile = Profile(
        model_name=session.name,
        family=session.family,
        mode=Mode.TRAIN if call.train else Mode.EVAL,
        dtype=str(param_dtype).removeprefix("torch."),
        inputs=describe_inputs(call.args, call.kwargs, run_dtype),
        capture_method=cap.graph.method,
        capture_attempts=tuple(cap.graph.attempts),
        capture_reused=run.reused,
        execution=cap.execution,
        execution_note=cap.execution_note,
        fallbacks=_fallbacks(session, run),
        lowering=session.lowering if cap.execution is Execution.DRY_RUN else Lowering.CPU,
        layers=tuple(rows),
        modules=tuple(modules),
        total_params=sum(p.numel() for p in params),
        trainable_params=sum(p.numel() for p in params if p.requires_grad),
        param_bytes=sum(p.numel() * (run_dtype.itemsize if run_dtype and p.is_floating_point() else p.element_size()) for p in params),
        buffer_bytes=sum(b.numel() * b.element_size() for b in session.model.buffers()),
        graph_params=sum(r.params for r in rows),
        input_bytes=run.trace.input_bytes,
        output_bytes=run.trace.output_bytes,
        peak_activation_bytes=run.trace.peak_activation_bytes,
        peak_activation_layer=run.trace.peak_activation_layer,
        allocations=run.trace.allocations,
        num_subgraphs=cap.graph.num_subgraphs,
        unsupported=tuple(unsupported),
        notes=tuple(_notes(session, run, rows, run_dtype)),
        versions=_versions(),
        timings=tuple(timings),
    )
    return with_roofline(profile)  # the fixed threshold; with_roofline(profile, hardware) for a device


@guard_user_code
@full_collections_deferred()  # the process's full collection is not this dry run's (graphprof.base.collector)
def profile_model(model: nn.Module | str, **options: Unpack[ModelOptions]) -> Profile:
    """Profile a model by name (``"resnet18"``, ``"yolov8n"``, ``"hf:llama"``, ``"pkg.mod:factory"``) or object.

    >>> import graphprof
    >>> p = graphprof.profile_model("resnet18")
    >>> p.total_params, p.capture_method
    (11689512, 'fx.symbolic_trace')

    ``methods`` forces capture methods, tried in order (see :data:`graphprof.capture.methods.METHODS`); by
    default symbolic tracing, then Dynamo export (not tried for the families whose record says it costs
    too long: transformers, timm, YOLO, detectors; the summary says so), then the eager capture.

    A model object needs ``input_shape`` (a float input of that shape: a dry run, so nothing is
    allocated and no random numbers are drawn) or ``example_inputs``/``example_kwargs``. The model is
    left exactly as it was found. Equivalent to ``prepare(...).profile()``.

    ``target`` (``"cpu"`` by default, or ``"cuda"``) is the device the costs are for: for ``"cuda"`` the
    dry run records the fused attention kernels a GPU runs (see :mod:`graphprof.run.lowering`);
    :attr:`Profile.lowering` says which was used.

    ``proposals`` sets a two-stage detector's region proposals per image (a model named from the
    torchvision zoo; default: the model's maximum, which a note states).

    ``allow_unsafe_load=True`` lets a named file run code as it loads (a pickled ``.pt`` unpickled with
    ``weights_only=False``, a YOLO yaml whose fields ultralytics evaluates); only for files you trust.
    """
    session: Session = open_session(model, **options)
    return profile_session(session)


@dataclass(frozen=True)
class ModelOutcome:
    """One model of :func:`compare_models`: its profile, or the error that stopped it."""

    spec: str
    profile: Profile | None
    error: Exception | None

    @property
    def ok(self) -> bool:
        return self.profile is not None


class Comparison(list[ModelOutcome], NotebookDisplay):
    """The outcomes of :func:`compare_models`, in order: a list, shown as the comparison page in a notebook."""


def compare_models(
    models: Sequence[str | nn.Module], *, on_result: Callable[[ModelOutcome], None] | None = None, **options: Any
) -> Comparison:
    """Profile each model with the same ``options`` (as :func:`profile_model` takes them).

    A model that fails does not stop the others: its :class:`ModelOutcome` holds the error (a
    :class:`~graphprof.errors.GraphprofError` for a mistake graphprof can name, any other exception
    for a bug).
    ``on_result`` is called after each model (a progress display, say).
    """
    outcomes = Comparison()
    for outcome in iter_compare(models, **options):
        outcomes.append(outcome)
        if on_result is not None:
            on_result(outcome)
    return outcomes


def iter_compare(models: Sequence[str | nn.Module], **options: Any) -> Iterator[ModelOutcome]:
    """:func:`compare_models` one model at a time."""
    for model in models:
        spec = model if isinstance(model, str) else type(model).__name__
        try:
            yield ModelOutcome(spec, profile_model(model, **options), None)
        except GraphprofError as exc:
            yield ModelOutcome(spec, None, exc)
        except Exception as exc:  # not graphprof's own error: a bug, or the model's code; the others go on
            yield ModelOutcome(spec, None, exc)
