"""Chrome/Perfetto traces named by module: the ``@capture_model`` class decorator and ``parse_model_trace``.

Every trace graphprof writes has a ``record_function`` range per module call (``graphprof.layer::
<module path>``), so a trace is read back by layer without Python stacks: each op belongs to the
innermost range around it. Files are named ``{model}_forward_{NNN}.json`` (seed 003).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from graphprof.errors import InvalidInputError
from graphprof.measure.layers import RANGE_PREFIX
from graphprof.measure.result import OUTSIDE

__all__ = ["CAPTURE_ENV", "capture_model", "module_ranges", "parse_model_trace", "trace_path"]

#: ``GRAPHPROF_CAPTURE=0`` turns every ``@capture_model`` off (the forward runs untouched).
CAPTURE_ENV = "GRAPHPROF_CAPTURE"

M = TypeVar("M", bound=type)


def trace_path(directory: str | os.PathLike[str], model_name: str, index: int) -> Path:
    """``directory/{model_name}_forward_{index:03d}.json`` (``index`` counts from 1)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name) or "model"
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

    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(pre),
        torch.nn.modules.module.register_module_forward_hook(post, always_call=True),
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        while stack:
            rf = stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)


_inside = threading.local()


def capture_model(
    model_name: str | None = None,
    record_shapes: bool = True,
    profile_memory: bool = True,
    *,
    enabled: bool | None = None,
    trace_dir: str | os.PathLike[str] | None = None,
    **profiler_kwargs: Any,
) -> Callable[[M], M]:
    """Class decorator: every forward of an instance is profiled and writes its own Chrome trace.

    Traces go to ``trace_dir`` (default: ``$GRAPHPROF_TRACE_DIR``, else the working directory) as
    ``{model_name}_forward_{NNN}.json``, numbered per instance from 001; ``model_name`` defaults to the
    class name. ``enabled=False``, or ``GRAPHPROF_CAPTURE=0`` in the environment, leaves the forward
    untouched. ``profiler_kwargs`` go to ``torch.profiler.profile`` (``activities`` defaults to the CPU,
    plus CUDA when available). A forward called inside a profiled forward is not profiled again.

    >>> @capture_model(model_name="Tiny", enabled=False)
    ... class Tiny(nn.Linear): pass
    >>> Tiny(2, 2)(torch.ones(1, 2)).shape
    torch.Size([1, 2])
    """

    def decorate(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise InvalidInputError(f"@capture_model decorates an nn.Module class, not {cls!r}")
        original = cls.forward
        name = model_name or cls.__name__
        counts: weakref.WeakKeyDictionary[nn.Module, int] = weakref.WeakKeyDictionary()

        @functools.wraps(original)
        def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            on = enabled if enabled is not None else os.environ.get(CAPTURE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
            if not on or getattr(_inside, "active", False):
                return original(self, *args, **kwargs)
            from torch.profiler import ProfilerActivity, profile

            options = dict(profiler_kwargs)
            if "activities" not in options:
                options["activities"] = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            counts[self] = index = counts.get(self, 0) + 1
            directory = Path(trace_dir if trace_dir is not None else os.environ.get("GRAPHPROF_TRACE_DIR", "."))
            _inside.active = True
            try:
                with profile(record_shapes=record_shapes, profile_memory=profile_memory, **options) as prof:
                    with module_ranges(self), torch.autograd.profiler.record_function(RANGE_PREFIX + "(model)"):
                        out = original(self, *args, **kwargs)
            finally:
                _inside.active = False
            directory.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(trace_path(directory, name, index)))
            return out

        cls.forward = forward
        return cls

    return decorate


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def parse_model_trace(trace_file: str | os.PathLike[str], model_name: str = "Unknown") -> dict[str, Any]:
    """Per-layer summary of a trace written by graphprof (seed 003's ``parse_model_trace``).

    Returns ``{"model_name", "trace_file", "layer_stats": {layer: {"total_time_us", "call_count",
    "shapes", "operations"}}}`` where layers are module paths, ``total_time_us`` is the layer's *self*
    time (its ops and Python, not its sub-modules', so layers sum to the forward), ``shapes`` the input
    dims of the ops called directly in it and ``operations`` their names. Ops outside every module go to
    ``"(outside layers)"``. Raises :class:`~graphprof.errors.InvalidInputError` for a file that is not a
    trace.
    """
    try:
        with open(trace_file, encoding="utf-8") as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"{trace_file}: not a readable Chrome trace ({type(exc).__name__}: {exc})") from exc
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e and e.get("cat") in ("cpu_op", "user_annotation")]
    spans.sort(key=lambda e: (e.get("pid"), e.get("tid"), float(e["ts"]), -float(e["dur"])))
    stats: dict[str, dict[str, Any]] = {}

    def entry(layer: str) -> dict[str, Any]:
        return stats.setdefault(layer, {"total_time_us": 0.0, "call_count": 0, "shapes": set(), "operations": set()})

    # a sweep per thread: a stack of open spans; each span's self time = its duration minus its children's
    stack: list[tuple[dict[str, Any], float, str]] = []  # (event, end, owning layer)
    thread: Any = None
    self_time: dict[int, float] = {}
    owner: dict[int, str] = {}
    for e in spans:
        key = (e.get("pid"), e.get("tid"))
        if key != thread:
            stack, thread = [], key
        start, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        while stack and stack[-1][1] <= start:
            stack.pop()
        parent_layer = stack[-1][2] if stack else OUTSIDE
        name = str(e.get("name", ""))
        layer = name[len(RANGE_PREFIX) :] if name.startswith(RANGE_PREFIX) else parent_layer
        if stack:
            self_time[id(stack[-1][0])] -= float(e["dur"])
        self_time[id(e)] = float(e["dur"])
        owner[id(e)] = layer
        stack.append((e, end, layer))
        if name.startswith(RANGE_PREFIX):
            entry(layer)["call_count"] += 1
        elif not stack[:-1] or stack[-2][0].get("name", "").startswith(RANGE_PREFIX):
            # an op called directly in the layer (not one nested inside another op)
            s = entry(layer)
            s["operations"].add(name)
            dims = (e.get("args") or {}).get("Input Dims")
            if dims:
                s["shapes"].add(_frozen(dims))
    for e in spans:
        entry(owner[id(e)])["total_time_us"] += self_time[id(e)]
    for s in stats.values():
        s["total_time_us"] = round(s["total_time_us"], 3)
    return {"model_name": model_name, "trace_file": str(trace_file), "layer_stats": stats}
