"""Chrome/Perfetto traces named by module: the ``@capture_model`` class decorator and ``parse_model_trace``.

Every trace graphprof writes has a ``record_function`` range per module call (``graphprof.layer::
<module path>``), so a trace is read back by layer without Python stacks: each op belongs to the
innermost range around it. Files are named ``{model}_forward_{NNN}.json`` (seed 003).

As seed 003's decorator, ``@capture_model`` is a pass-through unless profiling is switched on, by its
``enabled=True`` argument or by ``GRAPHPROF_CAPTURE=1`` in the environment. When on, each forward
writes a new trace, numbered per process and model name from the first number no file in the folder
holds (never overwriting one), and hands its path to ``on_trace`` when given. Nothing here prints:
seed 003's decorator, which prints each forward's layer summary, is
:func:`graphprof.compat.seed003.capture_model`, at the edge. A folder that cannot be written, or a
profiler that cannot start, is one warning (:class:`TraceWarning`) and the forward runs unprofiled.

``parse_model_trace`` returns ``None`` with a one-line :class:`TraceWarning` for a file that is missing
or is not a trace (seed 003); :func:`read_model_trace` is its strict twin, raising
:class:`~graphprof.errors.InvalidInputError`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from graphprof.base.atomic import write_atomic
from graphprof.base.limits import require_file
from graphprof.base.redact import redact_strings, redactor
from graphprof.errors import InvalidInputError, OutputError
from graphprof.measure.kineto import quiet_kineto
from graphprof.measure.layers import RANGE_PREFIX
from graphprof.measure.result import OUTSIDE
from graphprof.run.hooks import module_call_hooks

__all__ = [
    "CAPTURE_ENV",
    "TRACE_DIR_ENV",
    "SEED003_SWITCH",
    "redact_trace",
    "TRACE_MAX_BYTES",
    "TraceWarning",
    "capture_model",
    "claim_trace_path",
    "module_ranges",
    "parse_model_trace",
    "read_model_trace",
    "trace_path",
]

#: ``GRAPHPROF_CAPTURE=1`` switches every ``@capture_model`` on (the decorator is a pass-through otherwise).
CAPTURE_ENV = "GRAPHPROF_CAPTURE"
#: Where ``@capture_model`` writes its traces when its ``trace_dir`` is not given (default: the working folder).
TRACE_DIR_ENV = "GRAPHPROF_TRACE_DIR"
#: Seed 003's switch, read by its printing decorator (:mod:`graphprof.compat.seed003`), not by this one:
#: a class decorated here while it is set gets one warning saying so.
SEED003_SWITCH = "CHISEL_BACKEND_RUN"

#: How torch names a module call in a trace recorded ``with_stack=True``: a ``python_function`` event ``nn.Module: Linear_0``.
MODULE_FRAME_PREFIX = "nn.Module: "

M = TypeVar("M", bound=type)


class TraceWarning(UserWarning):
    """A trace could not be written or read: the forward ran unprofiled, or the file gave ``None``."""


def trace_path(directory: str | os.PathLike[str], model_name: str, index: int) -> Path:
    """``directory/{model_name}_forward_{index:03d}.json`` (``index`` counts from 1); a long name is cut
    so that the file name stays within the 255 bytes file systems allow."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in model_name)[:200] or "model"
    return Path(directory) / f"{safe}_forward_{index:03d}.json"


@contextlib.contextmanager
def module_ranges(model: nn.Module) -> Iterator[None]:
    """A ``record_function`` range around every call of ``model``'s modules, named by module path.

    Global forward hooks, removed on exit; nothing is attached to the model. The root is ``(model)``.
    """
    paths = {id(m): (name or "(model)") for name, m in model.named_modules()}
    stack: list[Any] = []

    def pre(module: nn.Module, args: Any) -> None:
        path = paths.get(id(module))
        rf = None
        if path is not None:
            rf = torch.autograd.profiler.record_function(RANGE_PREFIX + path)
            rf.__enter__()
        stack.append(rf)

    def post(module: nn.Module, args: Any, output: Any) -> None:
        if stack:
            rf = stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)

    try:
        with module_call_hooks(pre, post):
            yield
    finally:
        while stack:
            rf = stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)


_numbering_lock = threading.Lock()
#: the last number handed out per (folder, file-name stem), for this process
_last_number: dict[tuple[str, str], int] = {}


def claim_trace_path(directory: str | os.PathLike[str], model_name: str) -> tuple[Path, int]:
    """The next free ``directory/{model_name}_forward_{NNN}.json`` and its number, created empty to claim it.

    Numbers count per process and model name (every instance of a class shares them) and skip every
    file already there, so no trace is ever overwritten, by this process or by another one (the file
    is created with ``O_EXCL``). Raises ``OSError`` when the folder cannot be made or written.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem = trace_path(folder, model_name, 1).name
    key = (str(folder.resolve()), stem)
    with _numbering_lock:
        index = _last_number.get(key, 0)
        while True:
            index += 1
            path = trace_path(folder, model_name, index)
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                continue
            _last_number[key] = index
            return path, index


def _switched_on(enabled: bool | None, switches: tuple[str, ...]) -> bool:
    if enabled is not None:
        return enabled
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in switches)


_inside = threading.local()


def _profiler(record_shapes: bool, profile_memory: bool, profiler_kwargs: dict[str, Any]) -> Any:
    from torch.profiler import ProfilerActivity, profile

    options = dict(profiler_kwargs)
    if "activities" not in options:
        options["activities"] = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    return profile(record_shapes=record_shapes, profile_memory=profile_memory, **options)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside torch and this file: the user's call of the model."""
    frame, level = sys._getframe(1), 1
    skip = (os.path.dirname(torch.__file__), __file__)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


class _Capture:
    """The profiled forward of one decorated class: settings, and the folders already warned about."""

    def __init__(self, original: Callable[..., Any], name: str, enabled: bool | None, trace_dir: Any,
                 on_trace: Callable[[Path], None] | None, switches: tuple[str, ...],
                 profiler_args: tuple[bool, bool, dict[str, Any]]) -> None:  # fmt: skip
        self.original, self.name, self.enabled, self.trace_dir = original, name, enabled, trace_dir
        self.on_trace, self.switches, self.profiler_args = on_trace, switches, profiler_args
        self.warned: set[str] = set()

    def warn_once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(
                f"@capture_model({self.name!r}): {message}; the forward runs unprofiled", TraceWarning, stacklevel=_caller_level()
            )

    def __call__(self, module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if not _switched_on(self.enabled, self.switches) or getattr(_inside, "active", False):
            return self.original(module, *args, **kwargs)
        if torch._C._autograd._profiler_enabled():  # the caller's own profiler: a second one would stop it
            self.warn_once("running", "another torch.profiler is running (it records this forward; no file of ours)")
            return self.original(module, *args, **kwargs)
        directory = Path(self.trace_dir if self.trace_dir is not None else os.environ.get(TRACE_DIR_ENV, "."))
        try:
            path, _ = claim_trace_path(directory, self.name)
        except OSError as exc:
            self.warn_once(str(directory), f"cannot write traces into {str(directory)!r} ({exc.strerror or exc})")
            return self.original(module, *args, **kwargs)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(quiet_kineto())
                prof = stack.enter_context(_profiler(*self.profiler_args))
            except (RuntimeError, ValueError, TypeError) as exc:  # another profiler running, a bad profiler argument
                stack.close()
                path.unlink(missing_ok=True)
                self.warn_once("profiler", f"torch.profiler could not start ({exc})")
                return self.original(module, *args, **kwargs)
            _inside.active = True
            try:
                with module_ranges(module), torch.autograd.profiler.record_function(RANGE_PREFIX + "(model)"):
                    out = self.original(module, *args, **kwargs)
            finally:
                _inside.active = False
        try:
            prof.export_chrome_trace(str(path))
        except (OSError, RuntimeError) as exc:
            path.unlink(missing_ok=True)
            self.warn_once(str(directory), f"cannot write the trace {str(path)!r} ({exc})")
            return out
        if self.on_trace is not None:
            self.on_trace(path)
        return out


def capture_model(
    model_name: str | None = None,
    record_shapes: bool = True,
    profile_memory: bool = True,
    *,
    enabled: bool | None = None,
    trace_dir: str | os.PathLike[str] | None = None,
    on_trace: Callable[[Path], None] | None = None,
    switches: tuple[str, ...] = (CAPTURE_ENV,),
    **profiler_kwargs: Any,
) -> Callable[[M], M]:
    """Class decorator: when switched on, every forward is profiled into its own Chrome trace.

    A pass-through unless ``enabled=True``, or ``enabled`` is left ``None`` and one of the environment
    variables ``switches`` (``GRAPHPROF_CAPTURE``) is ``1``. When on, each forward
    writes ``{model_name}_forward_{NNN}.json`` into ``trace_dir`` (default ``$GRAPHPROF_TRACE_DIR``, else
    the working folder), numbered per process and model name, skipping every existing file (see
    :func:`claim_trace_path`), and calls ``on_trace(path)`` once the trace is written (seed 003's
    printing decorator is :func:`graphprof.compat.seed003.capture_model`). ``model_name`` defaults to the class name. ``profiler_kwargs``
    go to ``torch.profiler.profile`` (``activities`` defaults to the CPU, plus CUDA when available). A
    forward called inside a profiled forward is not profiled again. A folder that cannot be written or
    a profiler that cannot start gives one :class:`TraceWarning` per folder, and the forward runs as is.

    >>> @capture_model(model_name="Tiny")
    ... class Tiny(nn.Linear): pass
    >>> Tiny(2, 2)(torch.ones(1, 2)).shape  # GRAPHPROF_CAPTURE unset: no trace
    torch.Size([1, 2])
    """

    def decorate(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise InvalidInputError(f"@capture_model decorates an nn.Module class, not {cls!r}")
        if (
            SEED003_SWITCH not in switches
            and enabled is None
            and _switched_on(None, (SEED003_SWITCH,))
            and not _switched_on(None, switches)
        ):
            warnings.warn(
                f"@capture_model({model_name or cls.__name__!r}): {SEED003_SWITCH} is seed 003's switch, which "
                "graphprof.capture_model does not read: from graphprof.compat.seed003 import capture_model (it reads "
                f"it and prints each forward's summary), or set {switches[0] if switches else CAPTURE_ENV}=1",
                TraceWarning,
                stacklevel=2,
            )
        original = cls.forward
        capture = _Capture(original, model_name or cls.__name__, enabled, trace_dir, on_trace, tuple(switches),
                           (record_shapes, profile_memory, profiler_kwargs))  # fmt: skip

        @functools.wraps(original)
        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            return capture(self, *args, **kwargs)

        cls.forward = forward
        return cls

    return decorate


# ---- reading a trace back -----------------------------------------------------------------------------
#: Deepest nesting of an op's ``Input Dims`` kept as a shape (a tensor list is 3 deep); deeper is dropped.
_MAX_DIMS_DEPTH = 4


class _Malformed(Exception):
    """A trace file that is not what graphprof writes (the message says what)."""


def _frozen(value: Any, depth: int = 0) -> Any:
    """``Input Dims`` as nested tuples of ints, or ``None`` when it is anything else (or nests too deep)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list) and depth < _MAX_DIMS_DEPTH:
        items = tuple(_frozen(v, depth + 1) for v in value)
        return None if any(item is None for item in items) else items
    return None


#: The largest trace file read: a forward's trace is a few MiB; a longer recording is better split.
TRACE_MAX_BYTES = 128 * 2**20
#: Memory a parse may take per byte of JSON: ``[],`` (3 bytes) becomes a 56-byte list and an 8-byte slot.
_JSON_GROWTH = 22.0

#: Largest timestamp or duration accepted, in microseconds (about 31 years): beyond it a sum could overflow.
_MAX_US = 1e15


def _number(event: dict[str, Any], key: str) -> float:
    value = event.get(key)
    number = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an integer too large for a float
            number = float(value)
    if not 0 <= number <= _MAX_US:  # also refuses NaN
        raise _Malformed(f"an event {str(event.get('name', '?'))[:60]!r} has {key}={repr(value)[:40]}, not a number of microseconds >= 0")
    return number


def _load_spans(trace_file: str | os.PathLike[str]) -> list[tuple[dict[str, Any], float, float]]:
    """The trace's complete CPU op and range events as ``(event, start, duration)``, checked."""
    try:
        require_file(trace_file, "a Chrome trace", cap=TRACE_MAX_BYTES, growth=_JSON_GROWTH)  # before a byte is read
    except FileNotFoundError as exc:
        raise _Malformed("no such file") from exc
    try:
        with open(trace_file, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as exc:
        raise _Malformed("no such file") from exc
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, not UTF-8, not JSON, nested too deep
        raise _Malformed(f"not a readable JSON file ({type(exc).__name__}: {str(exc)[:100]})") from exc
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise _Malformed("no traceEvents list")
    spans = []
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "python_function"):
            if not isinstance(e.get("name", ""), str):
                raise _Malformed(f"an event has a name that is not a string: {e.get('name')!r:.60}")
            if e.get("cat") != "python_function" or e["name"].startswith(MODULE_FRAME_PREFIX):
                spans.append((e, _number(e, "ts"), _number(e, "dur")))
    return _layer_ranges(spans)


def _layer_ranges(spans: list[tuple[dict[str, Any], float, float]]) -> list[tuple[dict[str, Any], float, float]]:
    """The spans with one layer range per module call: graphprof's own ranges where the trace has them;
    else, in a trace recorded ``with_stack=True`` by anyone, torch's module frames (``nn.Module: Linear_0``,
    named ``Linear_0``: the class and its instance's number, as the profiler gives no attribute path)."""
    frames = [s for s in spans if s[0].get("cat") == "python_function"]
    if not frames:
        return spans
    ops = [s for s in spans if s[0].get("cat") != "python_function"]
    if any(e.get("name", "").startswith(RANGE_PREFIX) for e, _, _ in ops):
        return ops  # graphprof's ranges name the layers by path; the frames would count every call twice
    renamed = [({**e, "name": RANGE_PREFIX + e["name"][len(MODULE_FRAME_PREFIX) :]}, start, dur) for e, start, dur in frames]
    return ops + renamed


def _thread(event: dict[str, Any]) -> tuple[str, str]:
    return (repr(event.get("pid")), repr(event.get("tid")))


def _layer_stats(spans: list[tuple[dict[str, Any], float, float]]) -> dict[str, dict[str, Any]]:
    """Per layer: self time (us), calls, the shapes and names of the ops called directly in it."""
    spans = sorted(spans, key=lambda s: (_thread(s[0]), s[1], -s[2]))
    stats: dict[str, dict[str, Any]] = {}

    def entry(layer: str) -> dict[str, Any]:
        return stats.setdefault(layer, {"total_time_us": 0.0, "call_count": 0, "shapes": set(), "operations": set(), "input_shape": None})

    # a sweep per thread: a stack of open spans; each span's self time = its duration minus its children's
    stack: list[tuple[int, float, str, bool]] = []  # (index, end, owning layer, is a layer range)
    thread: Any = None
    self_time = [dur for _, _, dur in spans]
    owner: list[str] = []
    for i, (e, start, dur) in enumerate(spans):
        if _thread(e) != thread:
            stack, thread = [], _thread(e)
        while stack and stack[-1][1] <= start:
            stack.pop()
        name = e.get("name", "")
        is_range = name.startswith(RANGE_PREFIX)
        layer = name[len(RANGE_PREFIX) :] if is_range else (stack[-1][2] if stack else OUTSIDE)
        direct = not stack or stack[-1][3]  # an op called in the layer itself, not inside another op
        if stack:
            self_time[stack[-1][0]] -= dur
        owner.append(layer)
        stack.append((i, start + dur, layer, is_range))
        s = entry(layer)
        if is_range:
            s["call_count"] += 1
        elif direct:
            s["operations"].add(name)
            args = e.get("args")
            dims = _frozen(args.get("Input Dims")) if isinstance(args, dict) else None
            if dims:
                s["shapes"].add(dims)
                if s["input_shape"] is None and isinstance(dims[0], tuple) and dims[0]:
                    s["input_shape"] = dims[0]  # not a scalar: train-mode BatchNorm first bumps its step counter
    for layer, seconds in zip(owner, self_time, strict=True):
        # a child overrunning its parent (clock rounding, or a hand-made file) leaves the parent 0, not less
        stats[layer]["total_time_us"] += max(seconds, 0.0)
    for s in stats.values():
        s["total_time_us"] = round(s["total_time_us"])
    return stats


def read_model_trace(trace_file: str | os.PathLike[str], model_name: str = "Unknown") -> dict[str, Any]:
    """:func:`parse_model_trace`, raising :class:`~graphprof.errors.InvalidInputError` for a file that is
    missing or not a trace (what it found is named) instead of returning ``None``."""
    try:
        stats = _layer_stats(_load_spans(trace_file))
    except _Malformed as exc:
        raise InvalidInputError(f"{trace_file}: not a readable Chrome trace: {exc}") from exc
    return {"model_name": model_name, "trace_file": str(trace_file), "layer_stats": stats}


def parse_model_trace(trace_file: str | os.PathLike[str], model_name: str = "Unknown") -> dict[str, Any] | None:
    """Per-layer summary of a trace (seed 003's ``parse_model_trace``), or ``None``.

    Returns ``{"model_name", "trace_file", "layer_stats": {layer: {"total_time_us", "call_count",
    "shapes", "operations", "input_shape"}}}`` where layers are module paths in the order they first
    ran, ``total_time_us`` (an int, microseconds) is the layer's *self* time (its ops and Python, not
    its sub-modules', so layers sum to the forward), ``shapes`` the input dims of the ops called
    directly in it, ``operations`` their names and ``input_shape`` the first input of the first of them
    that is not a scalar. Ops outside every module go to ``"(outside layers)"``. A trace graphprof did
    not write is read by the module frames torch records ``with_stack=True`` (layers ``Conv2d_0``,
    ``Linear_1``: class and instance number); without them every op is outside the layers. A missing file, or one that is not a trace
    (not JSON, no event list, a duration or timestamp that is not a finite number of microseconds >= 0,
    NaN refused), gives one
    :class:`TraceWarning` naming it and ``None``, as seed 003's does.
    """
    try:
        return read_model_trace(trace_file, model_name)
    except InvalidInputError as exc:
        warnings.warn(str(exc), TraceWarning, stacklevel=2)
        return None


def redact_trace(path: str | os.PathLike[str], model_name: str) -> Path:
    """A Chrome trace ``--trace`` wrote, redacted: its ``host_name`` left out, every string through
    :func:`graphprof.base.redact.redact_text`, and, when ``model_name`` names a private path (``/home/ada/m.py:build``), the file
    renamed after the redacted name (``_home__m.py_build_forward_001.json``) with ``traceName`` the new
    file's own name; the original is removed. The path of the trace kept."""
    source = Path(path)
    redact = redactor()
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OutputError(f"cannot redact the trace {source}: {exc}") from exc
    if isinstance(data, dict):
        data.pop("host_name", None)
    data = redact_strings(data, redact)
    target = source
    if redact(model_name) != model_name:
        try:
            target, _ = claim_trace_path(source.parent, redact(model_name))
        except OSError as exc:
            raise OutputError(f"cannot redact the trace {source}: {exc.strerror or exc}") from exc
    if isinstance(data, dict) and "traceName" in data:
        data["traceName"] = target.name
    write_atomic(target, json.dumps(data))
    if target != source:
        source.unlink(missing_ok=True)
    return target
