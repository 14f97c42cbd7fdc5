"""What a measurement returns: :class:`Measurement` and its parts, frozen dataclasses with ``to_dict``.

Times of layers and ops are microseconds (float: the profiler's resolution is sub-microsecond on the
CPU); model-level times are :class:`~graphprof.measure.timing.RuntimeStats` in milliseconds, as seed
004 has them; memory is bytes (integers), scaled only by renderers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from graphprof.base.choices import Mode, Optimizer
from graphprof.base.record import Record
from graphprof.devices.local import Host
from graphprof.measure.timing import NOISY_CV, RuntimeStats

__all__ = ["OUTSIDE", "ForwardFaults", "LayerTime", "OpTime", "MemoryStats", "MemoryBreakdown", "MeasuredMemory", "Measurement"]


#: Name of the pseudo-layer that collects profiler events outside every layer range.
OUTSIDE = "(outside layers)"


@dataclass(frozen=True)
class LayerTime(Record):
    """One layer's measured self time (its own ops, not those of nested layers), mean over the profiled runs.

    ``cpu_us`` is host time; ``kernel_us`` the GPU kernel time of the ops it launched (``None`` on the CPU).
    """

    name: str
    type: str
    calls: int
    cpu_us: float
    kernel_us: float | None = None

    @property
    def time_us(self) -> float:
        """Kernel time on a GPU, host time on the CPU: what the layer costs the device that ran it."""
        return self.kernel_us if self.kernel_us is not None else self.cpu_us


@dataclass(frozen=True)
class OpTime(Record):
    """One aten op within one layer: self time (host) and kernel time, mean per profiled run.

    ``dispatched_calls`` counts the calls that a ``TorchDispatchMode`` (graphprof's dry run) sees as
    this op: those not made from inside another op's kernel (composite ops such as ``aten::conv2d``
    decompose above the mode and do not count as "inside"). ``dispatched_cpu_us`` and
    ``dispatched_kernel_us`` are those calls' inclusive times, everything below them included: what the
    dry run's op of that name cost.
    """

    layer: str
    op: str
    calls: int
    cpu_us: float
    kernel_us: float | None = None
    dispatched_calls: int = 0
    dispatched_cpu_us: float = 0.0
    dispatched_kernel_us: float | None = None

    @property
    def dispatched_time_us(self) -> float:
        """Inclusive time of the dispatched calls: kernel time on a GPU, host time on the CPU."""
        return self.dispatched_kernel_us if self.dispatched_kernel_us is not None else self.dispatched_cpu_us


@dataclass(frozen=True)
class MemoryStats:
    """Peak, currently allocated and reserved memory, in bytes, on ``device`` (seed 004; ``*_mb`` in MiB).

    ``reserved_bytes`` is ``None`` where the allocator reserves nothing apart (the CPU).
    """

    peak_bytes: int
    allocated_bytes: int
    reserved_bytes: int | None
    device: str

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2**20

    @property
    def allocated_mb(self) -> float:
        return self.allocated_bytes / 2**20

    @property
    def reserved_mb(self) -> float | None:
        return None if self.reserved_bytes is None else self.reserved_bytes / 2**20

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "peak_bytes": self.peak_bytes,
            "allocated_bytes": self.allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
        }


#: Categories of :class:`MemoryBreakdown`, in the order MemTracker reports them.
CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries", "other")


@dataclass(frozen=True)
class MemoryBreakdown(Mapping[str, float]):
    """Peak memory by category at the moment of the peak (MemTracker's ``"peak"`` snapshot).

    Two views, each in one unit:

    - as a mapping (seed 004's dictionary: ``breakdown["parameters"]``, ``"parameters" in breakdown``,
      ``dict(breakdown)``), every value is in MiB (2**20 bytes, the seed's "MB"); its keys are
      :data:`CATEGORIES`, which sum to the peak; ``"forward_activations"`` (the seed's name for
      ``"activations"``) and ``"peak"`` are answered too;
    - as attributes (``breakdown.parameters``) and in :meth:`to_dict` (the JSON record, whose ``"unit"``
      says ``"bytes"``), every figure is in bytes.
    """

    parameters: int
    buffers: int
    gradients: int
    optimizer_state: int
    activations: int
    temporaries: int
    other: int
    peak: int
    device: str
    source: str

    def __getitem__(self, key: str) -> float:
        key = "activations" if key == "forward_activations" else key
        if key not in (*CATEGORIES, "peak"):
            raise KeyError(key)
        return cast(float, getattr(self, key) / 2**20)

    def __iter__(self) -> Iterator[str]:
        return iter(CATEGORIES)

    def __len__(self) -> int:
        return len(CATEGORIES)

    def to_dict(self) -> dict[str, Any]:
        return {
            **{c: getattr(self, c) for c in CATEGORIES},
            "peak": self.peak,
            "device": self.device,
            "source": self.source,
            "unit": "bytes",
        }


@dataclass(frozen=True)
class MeasuredMemory:
    """Memory of the measured run: the allocator's peak (and reserved, on CUDA) and, when taken, a breakdown.

    ``peak_bytes`` counts everything allocated at the peak: parameters, buffers and inputs already live
    (``resident_bytes``) plus what the run allocated on top (``run_peak_bytes``).
    """

    device: str
    peak_bytes: int
    run_peak_bytes: int
    resident_bytes: int
    reserved_bytes: int | None
    source: str
    breakdown: MemoryBreakdown | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": "bytes",
            "device": self.device,
            "peak_bytes": self.peak_bytes,
            "run_peak_bytes": self.run_peak_bytes,
            "resident_bytes": self.resident_bytes,
            "reserved_bytes": self.reserved_bytes,
            "source": self.source,
            "breakdown": None if self.breakdown is None else self.breakdown.to_dict(),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class ForwardFaults:
    """Bytes of fresh pages one forward faulted in on the CPU (minor faults x the page size), the median per
    forward: ``plain_bytes`` over the timed plain forwards (those :attr:`Measurement.forward` times),
    ``profiled_bytes`` over the profiled ones (per-layer ranges under ``torch.profiler``, those the per-layer and
    per-op times come from). A 4 KiB page costs about 1.3-1.5 us to fault in inside a forward (0.33-0.38 ns a byte on
    a 2-core EPYC VM, ``benchmarks/bench_fault_cost.py``), so where the two differ the profiled op times leave out what the plain forward
    pays: timm's mobilevit_xs at batch 8 faulted 788 MB a plain forward and 487 MB a profiled one there, and the
    profiled forward's layers summed to 424 ms against the plain forward's 479 ms."""

    plain_bytes: float
    profiled_bytes: float

    def to_dict(self) -> dict[str, Any]:
        return {"plain_bytes": self.plain_bytes, "profiled_bytes": self.profiled_bytes}


@dataclass(frozen=True)
class Measurement:
    """A real run of a prepared model: model-level times, per-layer and per-op times, memory, host.

    ``forward`` (and in train mode ``backward`` and ``training_step``) are taken without per-layer
    instrumentation. ``layers``/``ops`` come from ``layer_runs`` separate profiled forwards;
    ``instrumented_forward`` times those forwards (profiler and ranges on), so
    :attr:`overhead` is what per-layer measurement costs. ``kernel_busy_us`` (GPU) is the union of the
    trace's kernel intervals per forward, against which the per-layer kernel times are checked.
    """

    model_name: str
    device: str
    dtype: str
    mode: Mode
    inputs: str
    timestamp: str
    host: Host
    forward: RuntimeStats
    instrumented_forward: RuntimeStats
    layers: tuple[LayerTime, ...]
    ops: tuple[OpTime, ...]
    memory: MeasuredMemory
    backward: RuntimeStats | None = None
    training_step: RuntimeStats | None = None
    optimizer: Optimizer | None = None
    kernel_busy_us: float | None = None
    layer_runs: int = 0
    traces: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: MFU and HFU per timed span (``graphprof.measure.utilization.Utilization``), once a device's peak is known
    utilization: tuple[Any, ...] = ()
    #: page faults per forward, plain and profiled (CPU, eval: ``None`` on a GPU, in train mode or uncounted)
    faults: ForwardFaults | None = None

    @property
    def layer_sum_us(self) -> float:
        """Sum of the per-layer times (kernel time on a GPU, host self time on the CPU), per forward."""
        return sum(layer.time_us for layer in self.layers)

    @property
    def forward_cv(self) -> float:
        """Coefficient of variation of the forward: its std over its mean (0.05: a 5% spread)."""
        return self.forward.cv

    @property
    def noisy(self) -> bool:
        """Whether the forward's spread is over :data:`NOISY_CV`: its figures, per layer too, are not to be trusted closely."""
        return self.forward_cv > NOISY_CV

    @property
    def overhead(self) -> float:
        """Instrumented forward mean over plain forward mean, minus one (0.05: 5% slower when profiled)."""
        return self.instrumented_forward.mean / self.forward.mean - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "device": self.device,
            "dtype": self.dtype,
            "mode": self.mode,
            "inputs": self.inputs,
            "timestamp": self.timestamp,
            "host": self.host.to_dict(),
            "runtime": {
                "forward": self.forward.to_dict(),
                "backward": None if self.backward is None else self.backward.to_dict(),
                "training_step": None if self.training_step is None else self.training_step.to_dict(),
                "optimizer": self.optimizer,
                "instrumented_forward": self.instrumented_forward.to_dict(),
                "overhead": self.overhead,
                "forward_cv": self.forward_cv,
                "noisy": self.noisy,
                "layer_runs": self.layer_runs,
                "layer_sum_us": self.layer_sum_us,
                "kernel_busy_us": self.kernel_busy_us,
                "faults": None if self.faults is None else self.faults.to_dict(),
                "layers": [layer.to_dict() for layer in self.layers],
                "ops": [op.to_dict() for op in self.ops],
            },
            "memory": self.memory.to_dict(),
            "traces": list(self.traces),
            "notes": list(self.notes),
            "utilization": [u.to_dict() for u in self.utilization],
        }
