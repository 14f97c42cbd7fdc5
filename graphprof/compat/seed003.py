"""Seed 003's ``@capture_model``: the native trace decorator, printing each forward's layer summary.

:func:`graphprof.capture_model` writes one Chrome trace per forward and prints nothing. Seed 003's
decorator also prints the layer summary of each forward (Layer, Calls, Total Time, Avg Time, Shapes) to
stderr, and is switched on by its backend's ``CHISEL_BACKEND_RUN=1`` as well as ``GRAPHPROF_CAPTURE=1``.

>>> from graphprof.compat.seed003 import capture_model, parse_model_trace
>>> @capture_model(model_name="MyModel")          # doctest: +SKIP
... class MyModel(nn.Module): ...
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from graphprof.measure.trace import CAPTURE_ENV, SEED003_SWITCH, parse_model_trace
from graphprof.measure.trace import capture_model as _native_capture_model

__all__ = ["CHISEL_ENV", "DEBUG_ENV", "capture_model", "parse_model_trace", "print_trace_summary", "debugging", "debug"]

#: Seed 003's own switch, accepted beside ``GRAPHPROF_CAPTURE``.
CHISEL_ENV = SEED003_SWITCH
#: Seed 003's debug switch (``export CHISEL_DEBUG=1``): what the decorator and the ``chisel`` launcher do,
#: on stderr, prefixed ``chisel:``: each class decorated and whether profiling is on (and by which
#: switch), each trace written with its events and the layers read from it, and the launcher's summary.
DEBUG_ENV = "CHISEL_DEBUG"

M = TypeVar("M", bound=type)


def print_trace_summary(path: Path, model_name: str) -> None:
    """Print the layer summary of one trace to stderr, as seed 003's decorator does after each forward."""
    from graphprof.render.tracesummary import render_trace_summary

    analysis = parse_model_trace(path, model_name)
    if analysis is not None:
        sys.stderr.write(render_trace_summary(analysis) + "\n")
        sys.stderr.flush()


def debugging() -> bool:
    """Whether ``CHISEL_DEBUG`` is set to a true value (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def debug(message: str) -> None:
    """One ``chisel: ...`` line on stderr when :func:`debugging` (the seed's debug output)."""
    if debugging():
        sys.stderr.write(f"chisel: {message}\n")
        sys.stderr.flush()


def _debug_trace(path: Path, model_name: str) -> None:
    analysis = parse_model_trace(path, model_name)
    if analysis is None:
        debug(f"wrote {path}, which could not be read back")
        return
    layers = analysis["layer_stats"]
    debug(f"wrote {path}: {len(layers)} layers ({', '.join(layers) or 'none found in the stacks'})")


def _switch_state(enabled: bool | None) -> str:
    if enabled is not None:
        return f"profiling {'on' if enabled else 'off'} (enabled={enabled})"
    on = [name for name in (CAPTURE_ENV, CHISEL_ENV) if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")]
    if on:
        return f"profiling on ({on[0]}={os.environ[on[0]]})"
    return f"profiling off: a pass-through (set {CHISEL_ENV}=1, or run under `chisel python ...`)"


def capture_model(model_name: str | None = None, *args: Any, summary: bool = True, **options: Any) -> Callable[[M], M]:
    """Seed 003's class decorator: :func:`graphprof.capture_model` (the same arguments: ``record_shapes``,
    ``profile_memory``, ``enabled``, ``trace_dir``, profiler keywords), printing each forward's layer summary
    to stderr unless ``summary=False``, switched on by ``enabled=True``, ``GRAPHPROF_CAPTURE=1`` or
    ``CHISEL_BACKEND_RUN=1``. ``model_name`` defaults to the class name."""
    options.setdefault("with_stack", True)  # the seed's traces carry Python stacks (with_stack=False turns it off)

    def decorate(cls: M) -> M:
        name = str(model_name or getattr(cls, "__name__", "model"))

        def on_trace(path: Path) -> None:
            if debugging():
                _debug_trace(path, name)
            if summary:
                print_trace_summary(path, name)

        debug(f"@capture_model on {getattr(cls, '__name__', cls)!r} as {name!r}: {_switch_state(options.get('enabled'))}")
        switches = (CAPTURE_ENV, CHISEL_ENV)
        return _native_capture_model(name, *args, on_trace=on_trace, switches=switches, **options)(cls)

    return decorate
