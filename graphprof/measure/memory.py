"""Measured memory: the allocator's own figures, and a breakdown by category.

* On CUDA: ``torch.cuda.max_memory_allocated`` / ``memory_reserved`` around the run.
* On the CPU: the allocator events ``torch.profiler`` records with ``profile_memory=True`` (each
  ``[memory]`` event carries the bytes allocated since profiling started). Python's ``tracemalloc`` sees
  no tensor memory and RSS counts the interpreter, so neither is used.
* The breakdown (parameters, buffers, gradients, optimizer state, activations, temporaries) comes from
  ``torch.distributed._tools.mem_tracker.MemTracker``, which tags storages through a dispatch mode and
  module hooks and works on the CPU as on CUDA.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from graphprof.measure.kineto import quiet_kineto
from graphprof.measure.result import CATEGORIES, MemoryBreakdown, MemoryStats
from graphprof.measure.timing import _grads_kept, call_model, default_loss

__all__ = [
    "live_cpu_bytes", "memory_stats", "peak_during", "cpu_peak_from_trace", "tracked_breakdown", "get_memory_breakdown",
    "reset_resident_peak", "resident_peak", "resident_now",
]  # fmt: skip

_PROC_STATUS = "/proc/self/status"
_PROC_CLEAR_REFS = "/proc/self/clear_refs"


def live_cpu_bytes() -> int:
    """Bytes held by the CPU tensors alive now: the storage of every tensor the garbage collector tracks
    (each ``torch.Tensor`` and ``nn.Parameter`` Python object), each storage counted once.

    The CPU allocator keeps no counter (CUDA's does); this is its ``memory_allocated``. Tensors that live
    only inside C++ (autograd's saved tensors before a backward) are not seen; fake and meta tensors hold
    no memory and are skipped.

    >>> before = live_cpu_bytes(); x = torch.empty(2**20, dtype=torch.uint8)
    >>> live_cpu_bytes() - before >= 2**20
    True
    """
    storages: dict[int, int] = {}
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: that reads ``__class__``, which some deprecated objects warn on
        if issubclass(kind, torch.Tensor) and kind.__name__ != "FakeTensor" and obj.device.type == "cpu":
            try:
                storage = obj.untyped_storage()
                if storage.data_ptr():
                    storages[storage.data_ptr()] = max(storages.get(storage.data_ptr(), 0), storage.nbytes())
            except (RuntimeError, NotImplementedError):  # a tensor subclass or a view with no storage of its own
                continue
    return sum(storages.values())


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in bytes; ``None`` off Linux."""
    try:
        with open(_PROC_STATUS, encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def reset_resident_peak() -> int | None:
    """Restart the kernel's peak of this process's resident memory (Linux's ``VmHWM``) from its resident
    size now, and return that size in bytes (``None`` where the system offers no resettable peak).

    The CPU allocator keeps no peak counter, but the kernel keeps one of the pages in use, which sees a
    tensor allocated and freed between two readings (:func:`resident_peak`). First the C allocator's free
    pages go back to the system (glibc's ``malloc_trim``), so that memory reused later is counted as it is
    touched again; then ``5`` written to ``/proc/self/clear_refs`` resets the peak (Linux 4.0 and later).
    Pages allocated but never written (``torch.empty``) are not resident and not counted.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the peak still resets, free pages may be reused unseen
        pass
    try:
        with open(_PROC_CLEAR_REFS, "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return None
    return _status_bytes("VmRSS")


def resident_peak() -> int | None:
    """The peak of this process's resident memory since :func:`reset_resident_peak`, in bytes (``None``
    off Linux). It counts every page the process touched, the interpreter's and the libraries' too."""
    return _status_bytes("VmHWM")


def resident_now() -> int | None:
    """This process's resident memory now, in bytes (Linux's ``VmRSS``; ``None`` elsewhere)."""
    return _status_bytes("VmRSS")


def memory_stats(device: torch.device | str) -> MemoryStats:
    """The allocator's figures now (seed 004's ``MemoryStats``). The CPU keeps no peak counter: its
    ``peak_bytes`` is what is allocated now (:func:`live_cpu_bytes`), a lower bound of any peak."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return MemoryStats(
            peak_bytes=torch.cuda.max_memory_allocated(dev),
            allocated_bytes=torch.cuda.memory_allocated(dev),
            reserved_bytes=torch.cuda.memory_reserved(dev),
            device=str(dev),
        )
    live = live_cpu_bytes() if dev.type == "cpu" else 0
    return MemoryStats(peak_bytes=live, allocated_bytes=live, reserved_bytes=None, device=str(dev))


def cpu_peak_from_trace(trace: dict[str, Any], thread: int | None = None) -> int:
    """The peak of bytes allocated since the profiler started, from a trace's CPU ``[memory]`` events
    (0 when nothing was allocated). With ``thread`` (an OS thread id), only that thread's allocations
    and frees count, summed event by event: the allocator's ``Total Allocated`` is process-wide and also
    counts what other threads (the profiler's own among them) allocate meanwhile."""
    peak = running = 0
    for e in trace.get("traceEvents", ()):
        args = e.get("args") or {}
        if e.get("name") != "[memory]" or args.get("Device Type", 0) != 0:
            continue
        if thread is None:
            peak = max(peak, int(args.get("Total Allocated", 0)))
        elif e.get("tid") == thread:
            running += int(args.get("Bytes", 0))
            peak = max(peak, running)
    return peak


def peak_during(fn: Callable[[], Any], device: torch.device | str) -> tuple[int, int | None]:
    """Bytes allocated on top of what was live, at the peak of ``fn()``, and the reserved bytes (CUDA).

    On the CPU ``fn`` runs under ``torch.profiler`` with ``profile_memory=True`` (its allocator events).
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        fn()
        torch.cuda.synchronize(dev)
        return torch.cuda.max_memory_allocated(dev) - before, torch.cuda.max_memory_reserved(dev)
    from torch.profiler import ProfilerActivity, profile

    with quiet_kineto(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="graphprof-mem-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            return cpu_peak_from_trace(json.load(f), threading.get_native_id()), None
    finally:
        os.unlink(path)


_MEMTRACKER_KEYS = {
    "PARAM": "parameters",
    "BUFFER": "buffers",
    "GRAD": "gradients",
    "OPT": "optimizer_state",
    "ACT": "activations",
    "TEMP": "temporaries",
    "OTH": "other",
}


def tracked_breakdown(
    model: nn.Module, step: Callable[[], Any], device: torch.device | str, optimizer: torch.optim.Optimizer | None = None
) -> MemoryBreakdown:
    """Run ``step()`` twice under MemTracker (the first fills lazy state such as optimizer moments) and
    return the second run's peak, by category."""
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(*([model] if optimizer is None else [model, optimizer]))
    with tracker:
        step()
        tracker.reset_mod_stats()
        step()
    snapshot: dict[Any, Any] = tracker.get_tracker_snapshot("peak")  # looked up with a device or None
    dev = torch.device(device)
    key = next((d for d in snapshot if torch.device(d).type == dev.type), None)
    found = {
        _MEMTRACKER_KEYS.get(str(k).rsplit(".", 1)[-1], "other"): int(v) for k, v in (snapshot.get(key) or {}).items() if str(k) != "Total"
    }
    values = {c: found.get(c, 0) for c in CATEGORIES}
    return MemoryBreakdown(**values, peak=sum(values.values()), device=str(dev), source="torch.distributed._tools.mem_tracker.MemTracker")


def get_memory_breakdown(
    model: nn.Module,
    batch: Any,
    device: torch.device | str | None = None,
    *,
    train: bool = True,
    optimizer: torch.optim.Optimizer | None = None,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
) -> MemoryBreakdown:
    """Peak memory of one step by category (seed 004): a forward, and with ``train`` a backward on the sum
    of the outputs (or ``loss_fn(output)``), and with ``optimizer`` its step.

    The model is left as found: gradients are put back, and with an optimizer the step runs on a copy of
    the model and the optimizer's state is restored.
    """
    dev = torch.device(device) if device is not None else next((p.device for p in model.parameters()), torch.device("cpu"))
    saved_opt = copy.deepcopy(optimizer.state_dict()) if optimizer is not None else None
    saved_params = {p: p.detach().clone() for p in model.parameters()} if optimizer is not None else {}

    def step() -> None:
        if not train:
            with torch.no_grad():
                call_model(model, batch)
            return
        out = call_model(model, batch)
        (loss_fn or default_loss)(out).backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    try:
        with _grads_kept(model):
            return tracked_breakdown(model, step, dev, optimizer)
    finally:
        if optimizer is not None and saved_opt is not None:
            with torch.no_grad():
                for p, v in saved_params.items():
                    p.copy_(v)
            optimizer.load_state_dict(saved_opt)
