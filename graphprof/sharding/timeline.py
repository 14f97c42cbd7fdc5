"""One rank's training step on a timeline: kernels on the compute stream, collectives on the network.

The step is the dry run's calls in order, each turned into an :class:`Item`: a kernel (its device time,
the host's time to launch it, its op class), an FSDP all-gather or reduce-scatter (on the network,
asynchronous), or a blocking collective (tensor parallelism's all-reduce, on the critical path).
:func:`simulate` plays them on three clocks, the host, the GPU's compute stream and the network:

* the host launches each kernel (``host_s``); a kernel starts when it is launched and the stream is
  free; the host then waits for a share ``1 - overlap`` of the kernel's remaining time (the kernel table's
  fitted overlap; :func:`graphprof.devices.predict.timeline` is the same rule without collectives);
* an all-gather starts when the network is free and the previous all-gather's parameters are in use
  (``window``: the start of the last copy-out; FSDP2 keeps one unit prefetched, so the all-gather of unit
  ``i + 1`` runs under unit ``i``'s compute, the host being ahead of the GPU); the copy-out that unpacks
  its parameters (``consumes``) waits for it:
  the first all-gather of a phase is exposed, the others only where the unit before computes for less;
* a reduce-scatter starts when its gradients are computed and the network is free and delays nothing
  but the end of the step (the last one is exposed);
* a blocking collective holds the compute stream for its whole time.

Every moment the compute stream waits is charged to what it waited for (a collective or the host), so
``compute + recompute + communication + host`` is the micro-step's wall time exactly (an invariant the
tests hold).

Worked example (no host cost): all-gather 2 ms, kernels of unit 0 for 3 ms, all-gather 2 ms, unit 1 3 ms,
reduce-scatter 2 ms: the first all-gather is exposed (2 ms), the second runs under unit 0 (hidden), the
reduce-scatter after unit 1 is exposed at the end (2 ms): ``2 + 3 + 3 + 2 = 10 ms``, 4 ms of it communication.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Item", "Timeline", "simulate"]

KERNEL, GATHER, SCATTER, BLOCKING = "kernel", "gather", "scatter", "blocking"


@dataclass(frozen=True, slots=True)
class Item:
    """One thing the step does: ``kind`` is ``kernel``, ``gather`` (FSDP all-gather), ``scatter`` (FSDP
    reduce-scatter, or an all-reduce of gradients) or ``blocking`` (a collective the next kernel needs at once).

    ``seconds``: the device's or the network's time; ``host_s``: the launch (kernels only); ``klass``: the
    kernel's op class (:func:`graphprof.devices.predict.op_class`); ``flops``: FLOPs it executes; ``block``:
    the index of the checkpointable block it belongs to (-1: none); ``consumes``: the copy-out that waits for
    the oldest all-gather in flight; ``recompute``: run again by activation checkpointing."""

    kind: str
    seconds: float
    host_s: float = 0.0
    klass: str = ""
    flops: float = 0.0
    block: int = -1
    backward: bool = False
    consumes: bool = False
    recompute: bool = False
    op: str = ""


@dataclass(frozen=True)
class Timeline:
    """A micro-step's wall time split by what the compute stream did or waited for; ``collectives_s``: every
    collective's own time (hidden or not); ``kernels``: kernels launched."""

    compute_s: float
    recompute_s: float
    communication_s: float
    host_s: float
    collectives_s: float
    kernels: int
    flops: float

    @property
    def total_s(self) -> float:
        return self.compute_s + self.recompute_s + self.communication_s + self.host_s


class _Clocks:
    """The three clocks of :func:`simulate` and what the compute stream's waits are charged to."""

    def __init__(self) -> None:
        self.host = self.device = self.network = self.window = 0.0
        self.gathers: deque[float] = deque()
        self.compute = self.recompute = self.communication = self.host_wait = self.collectives = self.flops = 0.0
        self.kernels = 0

    def wait(self, until: float, on_network: float) -> float:
        """The stream idles from its clock to ``until``; the part after the host was ready is the network's."""
        idle = max(0.0, until - self.device)
        network = max(0.0, on_network - max(self.device, self.host)) if on_network > 0 else 0.0
        network = min(network, idle)
        self.communication += network
        self.host_wait += idle - network
        return max(until, self.device)


def _kernel(c: _Clocks, item: Item, seconds: float, overlap: float) -> None:
    c.host += item.host_s
    if seconds <= 0.0:  # a view: host time only
        return
    ready_net = c.gathers.popleft() if item.consumes and c.gathers else 0.0
    start = c.wait(max(c.host, ready_net), ready_net)
    if item.consumes:
        c.window = start
    c.device = start + seconds
    c.kernels += 1
    c.flops += item.flops
    if item.recompute:
        c.recompute += seconds
    else:
        c.compute += seconds
    c.host += (1.0 - overlap) * max(0.0, c.device - c.host)


def simulate(items: Sequence[Item], overlap: float, scale: Mapping[str, float] | None = None) -> Timeline:
    """Play ``items`` on the host, compute-stream and network clocks (module docstring); ``scale`` multiplies
    each kernel's time by its class's factor (the interval's low and high ends)."""
    c = _Clocks()
    for item in items:
        if item.kind == KERNEL:
            factor = 1.0 if scale is None else scale.get(item.klass, 1.0)
            _kernel(c, item, item.seconds * factor, overlap)
        elif item.kind == GATHER:
            c.network = max(c.network, c.window) + item.seconds
            c.gathers.append(c.network)
            c.collectives += item.seconds
        elif item.kind == SCATTER:
            c.network = max(c.network, c.device) + item.seconds
            c.collectives += item.seconds
        else:  # blocking: the stream holds until it is done
            start = c.wait(c.host, 0.0)
            c.device = start + item.seconds
            c.communication += item.seconds
            c.collectives += item.seconds
    tail = max(0.0, c.network - c.device)
    c.communication += tail
    return Timeline(c.compute, c.recompute, c.communication, c.host_wait, c.collectives, c.kernels, c.flops)
