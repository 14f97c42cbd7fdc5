"""Per-layer and per-op measured time: ``record_function`` ranges around layers, ``torch.profiler`` events
attributed to the innermost range that holds them.

:class:`LayerRanges` is a run-loop observer: it opens a range named ``graphprof.layer::<layer name>``
when a layer is entered and closes it when the layer is left (eager mode ignores the profiler's
``with_modules``, so the ranges are what names modules in the trace). :func:`attribute` then gives each
profiler event to the innermost layer range around it and adds up *self* times, so nested layers (a
block and its convolutions) are never counted twice and the layers sum to the profiled forward.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from graphprof.measure.result import OUTSIDE
from graphprof.run.events import Layer, Observer, RunContext

__all__ = ["RANGE_PREFIX", "LayerRanges", "RunTimes", "attribute", "dispatched", "kernel_busy_us"]

#: Prefix of the ``record_function`` range names that mark layers in a trace.
RANGE_PREFIX = "graphprof.layer::"


class LayerRanges(Observer):
    """Opens a ``record_function`` range per layer on the run loop; records each layer's type.

    ``span_seconds`` is the wall time from the first outermost layer's entry to the last one's exit: the
    forward the ranges cover, without the run loop's own set-up around it.
    """

    def __init__(self) -> None:
        self.open: list[Any] = []
        self.types: dict[str, str] = {}
        self.span_seconds = 0.0
        self._outer_start = 0.0

    def started(self, ctx: RunContext) -> None:
        self.close()
        self.span_seconds = 0.0

    def layer_entered(self, layer: Layer) -> None:
        if not self.open:
            self._outer_start = time.perf_counter()
        self.types.setdefault(layer.name, layer.type)
        rf = torch.autograd.profiler.record_function(RANGE_PREFIX + layer.name)
        rf.__enter__()
        self.open.append(rf)

    def layer_left(self, layer: Layer, output: Any) -> None:
        if self.open:
            self.open.pop().__exit__(None, None, None)
            if not self.open:
                self.span_seconds += time.perf_counter() - self._outer_start

    def finished(self, outputs: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close ranges left open (a run that failed half-way)."""
        while self.open:
            self.open.pop().__exit__(None, None, None)


@dataclass
class RunTimes:
    """Self times of one profiled run, in microseconds: per layer, and per (layer, aten op)."""

    cpu_us: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    kernel_us: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    op_cpu_us: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    op_kernel_us: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    op_calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    dispatched_cpu_us: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    dispatched_kernel_us: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    dispatched_calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    order: list[str] = field(default_factory=list)


def _is_device_event(event: Any) -> bool:
    return getattr(event, "device_type", None) is not None and event.device_type != torch.autograd.DeviceType.CPU  # type: ignore[attr-defined]  # not re-exported in torch's stubs


#: Host events of the profiler itself (Kineto asking CUPTI for a buffer). The kernels the profiler lists under
#: one are the first op's, listed a second time (on an H200 with torch 2.11: the first convolution's cuDNN
#: kernels, 0.6 ms of a 3.5 ms resnet18 forward at batch 64, under both the convolution and the request):
#: counted once, with the op that launched them. With the layer ranges kept out of the busy time too, the
#: per-layer kernel sum equals the kernel busy time to 0.1% on every model of benchmarks/bench_measure.py.
PROFILER_EVENTS = frozenset({"Activity Buffer Request"})


def _is_kernel(event: Any) -> bool:
    """A device event that is GPU work: not the device-side copy of a ``record_function`` range (the
    profiler mirrors each layer range on the GPU's timeline as a user annotation spanning its kernels)."""
    return _is_device_event(event) and not event.name.startswith(RANGE_PREFIX)


def _owner(event: Any) -> str:
    e = event
    while e is not None:
        if e.name.startswith(RANGE_PREFIX):
            return cast(str, e.name[len(RANGE_PREFIX) :])
        e = e.cpu_parent
    return OUTSIDE


@functools.cache
def _composite(name: str) -> bool:
    """An op that decomposes above a ``TorchDispatchMode`` (``aten::conv2d``, ``aten::linear``): every
    overload but the ``out=`` ones has a CompositeImplicitAutograd kernel. A profiler event names no
    overload, so an op some of whose overloads have kernels of their own (``aten::add_``) is not composite."""
    try:
        overloads = getattr(torch.ops.aten, name.removeprefix("aten::")).overloads()
    except (AttributeError, RuntimeError):  # not an aten operator
        return False
    found = []
    for overload in overloads:
        if overload == "out" or overload.endswith("_out"):
            continue
        try:
            qualified = name if overload == "default" else f"{name}.{overload}"
            found.append(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeImplicitAutograd"))
        except RuntimeError:  # an overload the dispatcher does not register (aten::to.prim_Device)
            continue
    return bool(found) and all(found)


def dispatched(event: Any) -> bool:
    """Whether a dispatch mode sees ``event``'s op: a non-composite aten op called from no other
    non-composite op's kernel (a mode runs an op's kernel with itself switched off)."""
    if not event.name.startswith("aten::") or _composite(event.name):
        return False
    parent = event.cpu_parent
    while parent is not None and not parent.name.startswith(RANGE_PREFIX):
        if parent.name.startswith("aten::") and not _composite(parent.name):
            return False
        parent = parent.cpu_parent
    return True


def attribute(events: Iterable[Any]) -> RunTimes:
    """Self time of every host event (and kernel time of what it launched) given to its innermost layer.

    ``events`` are a profiler's ``FunctionEvent``s (``prof.events()``). A layer range's own self time
    (the Python between its ops) stays with the layer; events outside every range go to ``OUTSIDE``.
    """
    times = RunTimes()
    for e in events:
        if _is_device_event(e) or e.name in PROFILER_EVENTS:
            continue
        layer = _owner(e)
        if layer not in times.cpu_us:
            times.order.append(layer)
        times.cpu_us[layer] += e.self_cpu_time_total
        kernels = sum(k.duration for k in getattr(e, "kernels", ()))
        times.kernel_us[layer] += kernels
        if e.name.startswith(RANGE_PREFIX):
            times.calls[layer] += 1
        elif e.name.startswith("aten::"):
            key = (layer, e.name)
            times.op_cpu_us[key] += e.self_cpu_time_total
            times.op_kernel_us[key] += kernels
            times.op_calls[key] += 1
            if dispatched(e):
                times.dispatched_cpu_us[key] += e.cpu_time_total
                times.dispatched_kernel_us[key] += _kernels_below(e)
                times.dispatched_calls[key] += 1
    return times


def _kernels_below(event: Any) -> float:
    """Duration of the GPU kernels launched by ``event`` and every op below it (microseconds)."""
    own: float = sum(k.duration for k in getattr(event, "kernels", ()))
    return own + sum(_kernels_below(c) for c in event.cpu_children)


def kernel_busy_us(events: Iterable[Any]) -> float:
    """Time at least one GPU kernel was running: the union of the kernels' intervals (microseconds); the
    layer ranges the profiler mirrors on the GPU's timeline are not kernels."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events if _is_kernel(e) and e.time_range.end > e.time_range.start)
    busy, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop <= end:
            continue
        busy += stop - max(start, end)
        end = stop
    return busy
