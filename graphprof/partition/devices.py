"""The devices a model is split across, and the links between them: parsed from one short spec.

Grammar (``--devices``), items separated by commas::

    KIND[:COUNT][@MEMORY_GB]          orin-agx:2   rtx4090:1@20   cpu:3
    NAME=TFLOPS/GBPS[:COUNT]@MEMORY_GB edge=5.3/204.8:2@16   (a custom device: one peak, one bandwidth)

``KIND`` is a hardware preset (``graphprof hardware`` lists them; its time is the roofline's, see
:mod:`graphprof.partition.costs`) or ``cpu``: a process on *this* machine, whose per-layer times are
measured, not predicted. Memory defaults to the preset's datasheet figure (:attr:`graphprof.devices.hardware.Hardware.memory_gb`), or for
``cpu`` to this machine's RAM shared by the ``cpu`` processes.

Links (``--link``): one figure for every pair, ``GBPS[/LATENCY_MS]``, or per pair of kinds,
``A~B=GBPS[/LATENCY_MS]`` (``orin-agx~rtx4090=0.125/2``). Figures are per kind pair, never per device,
so devices of one kind stay interchangeable (what keeps the exact solver small).

>>> [d.name for d in parse_devices("orin-agx:2,rtx4090")]
['orin-agx#0', 'orin-agx#1', 'rtx4090#0']
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graphprof.devices.hardware import Hardware, custom_hardware, get_hardware, host_memory_bytes
from graphprof.errors import InvalidInputError

__all__ = ["FIGURE_RANGE", "LOCAL_CPU", "MAX_COUNT", "Device", "Links", "as_devices", "parse_devices", "parse_links", "kinds_of"]

#: The device kind that means "a process on this machine" (times measured here, not predicted).
LOCAL_CPU = "cpu"

_ITEM = re.compile(
    r"^(?P<kind>[A-Za-z0-9_.-]+)(?:=(?P<tflops>[0-9.eE+-]+)/(?P<gbps>[0-9.eE+-]+))?"
    r"(?::(?P<count>[^@]*))?(?:@(?P<mem>.+))?$"
)


@dataclass(frozen=True)
class Device:
    """One device of the plan: ``kind`` is what the spec named (devices of one kind are interchangeable).

    ``hardware`` is the preset or custom figures (``None`` for the local CPU, whose times are measured).
    """

    name: str
    kind: str
    memory_bytes: int
    hardware: Hardware | None = None

    @property
    def local(self) -> bool:
        return self.hardware is None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "memory_bytes": self.memory_bytes,
            "hardware": None if self.hardware is None else self.hardware.name,
            "time_source": "measured on this machine" if self.local else "predicted (roofline)",
        }


#: The most devices of one kind a spec may name: more than any model has units to give them.
MAX_COUNT = 1024
#: Every figure a spec gives (TFLOP/s, GB/s, GB) lies in this range: outside it, times and sizes are
#: infinite or zero in floating point (``1e-320`` GB/s, ``1e300`` GB) and the JSON would not be standard.
FIGURE_RANGE = (1e-6, 1e9)


def _number(text: str, what: str, item: str, kind: str = "device") -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInputError(f"{kind} spec {item!r}: {what} must be a number, got {text!r}") from None
    low, high = FIGURE_RANGE
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidInputError(f"{kind} spec {item!r}: {what} must be from {low:g} to {high:g}, got {text!r}")
    return value


def _count(text: str | None, item: str) -> int:
    if text is None or text == "":
        return 1
    if re.fullmatch(r"[0-9]+", text) is None:  # str.isdigit() accepts "²", which int() refuses
        raise InvalidInputError(f"device spec {item!r}: the count must be a whole number, got {text!r}")
    if int(text) == 0:
        raise InvalidInputError(f"device spec {item!r}: zero devices of kind {item.split(':')[0]!r}")
    if int(text) > MAX_COUNT:
        raise InvalidInputError(f"device spec {item!r}: at most {MAX_COUNT} devices of one kind, got {text}")
    return int(text)


def local_memory_bytes() -> int:
    """This machine's physical memory in bytes (:func:`graphprof.devices.hardware.host_memory_bytes`)."""
    return host_memory_bytes() or 0


def _memory(kind: str, hardware: Hardware | None, mem: str | None, item: str, local_share: int) -> int:
    if mem is not None:
        return int(_number(mem.strip().removesuffix("GB").removesuffix("gb"), "memory (GB)", item) * 1e9)
    if hardware is None:
        return local_share
    if hardware.memory_bytes is not None:
        return hardware.memory_bytes
    raise InvalidInputError(f"device spec {item!r}: no known memory for {kind!r}; give it as {kind}@GB")


def as_devices(devices: object) -> tuple[Device, ...]:
    """``devices`` as the API takes them: a spec (``"cpu:2"`` or its items, parsed) or :class:`Device` records; anything
    else (``42``) is one :class:`InvalidInputError`, not a ``TypeError`` from deep inside."""
    if isinstance(devices, str) or (isinstance(devices, Sequence) and devices and all(isinstance(d, str) for d in devices)):
        return parse_devices(devices)
    if isinstance(devices, Sequence) and devices and all(isinstance(d, Device) for d in devices):
        return tuple(devices)
    raise InvalidInputError(f"devices must be a spec such as 'orin-agx:2,rtx4090:1' or 'cpu:2', or Device records, not {devices!r:.60}")


def parse_devices(spec: str | Sequence[str]) -> tuple[Device, ...]:
    """The devices a spec names, in spec order; :class:`InvalidInputError` names the bad item."""
    items = [i.strip() for i in (spec.split(",") if isinstance(spec, str) else spec) if i.strip()]
    if not items:
        raise InvalidInputError("no devices given (e.g. --devices orin-agx:2,rtx4090:1 or cpu:2)")
    parsed = []
    for item in items:
        m = _ITEM.match(item)
        if m is None:
            raise InvalidInputError(f"device spec {item!r} is not KIND[:COUNT][@GB] or NAME=TFLOPS/GBPS[:COUNT]@GB")
        parsed.append((item, m, _count(m["count"], item)))
    local = sum(n for _, m, n in parsed if m["kind"].lower() == LOCAL_CPU and m["tflops"] is None)
    devices: list[Device] = []
    for item, m, count in parsed:
        kind = m["kind"].lower()
        hardware: Hardware | None
        if m["tflops"] is not None:
            if m["mem"] is None:
                raise InvalidInputError(f"device spec {item!r}: a custom device needs its memory, {item}@GB")
            hardware = custom_hardware(_number(m["tflops"], "TFLOP/s", item), _number(m["gbps"], "GB/s", item), name=kind)
        elif kind == LOCAL_CPU:
            hardware = None
        else:
            hardware = get_hardware(kind)
        memory = _memory(kind, hardware, m["mem"], item, local_memory_bytes() // max(local, 1))
        if any(d.kind == kind for d in devices):
            raise InvalidInputError(f"device kind {kind!r} is named twice; give one count (e.g. {kind}:3)")
        devices.extend(Device(f"{kind}#{i}", kind, memory, hardware) for i in range(count))
    return tuple(devices)


def kinds_of(devices: Sequence[Device]) -> tuple[str, ...]:
    """The device kinds in spec order, each once."""
    return tuple(dict.fromkeys(d.kind for d in devices))


@dataclass(frozen=True)
class Links:
    """Bandwidth (bytes/s) and latency (s) of the link between two device kinds; symmetric.

    ``pairs`` holds the figures given per pair (a frozenset of one or two kinds); the rest use the default.
    """

    bandwidth: float = 1e9
    latency: float = 1e-3
    pairs: Mapping[frozenset[str], tuple[float, float]] = field(default_factory=dict, hash=False)

    def between(self, a: str, b: str) -> tuple[float, float]:
        """``(bandwidth in B/s, latency in s)`` from kind ``a`` to kind ``b``."""
        return self.pairs.get(frozenset((a, b)), (self.bandwidth, self.latency))

    def seconds(self, a: str, b: str, nbytes: int) -> float:
        """Time to send ``nbytes`` from ``a`` to ``b``: ``latency + bytes / bandwidth``."""
        bandwidth, latency = self.between(a, b)
        return latency + nbytes / bandwidth

    def to_dict(self) -> dict[str, object]:
        return {
            "bandwidth_bytes_per_s": self.bandwidth,
            "latency_s": self.latency,
            "pairs": {"~".join(sorted(k)): {"bandwidth_bytes_per_s": b, "latency_s": t} for k, (b, t) in self.pairs.items()},
        }


def _figures(text: str, item: str) -> tuple[float, float | None]:
    gbps, _, ms = text.partition("/")
    bandwidth = _number(gbps, "link bandwidth (GB/s)", item, "link") * 1e9
    if not ms:
        return bandwidth, None
    try:
        latency = float(ms)
    except ValueError:
        raise InvalidInputError(f"link spec {item!r}: latency (ms) must be a number, got {ms!r}") from None
    if not math.isfinite(latency) or not 0 <= latency <= FIGURE_RANGE[1]:
        raise InvalidInputError(f"link spec {item!r}: latency (ms) must be zero or more, got {ms!r}")
    return bandwidth, latency * 1e-3


def parse_links(specs: Sequence[str] = (), kinds: Sequence[str] = (), *, gbps: float = 1.0, latency_ms: float = 1.0) -> Links:
    """Links from ``--link`` items: ``GBPS[/MS]`` sets the default, ``A~B=GBPS[/MS]`` one pair of kinds."""
    default = (gbps * 1e9, latency_ms * 1e-3)
    given: dict[frozenset[str], tuple[float, float | None]] = {}
    for item in (s.strip() for s in specs if s.strip()):
        pair, sep, figures = item.rpartition("=")
        bandwidth, latency = _figures(figures, item)
        if not sep:
            default = (bandwidth, default[1] if latency is None else latency)
            continue
        ends = frozenset(k.strip().lower() for k in pair.split("~"))
        unknown = sorted(ends - set(kinds)) if kinds else []
        if len(pair.split("~")) != 2 or unknown:
            raise InvalidInputError(
                f"link spec {item!r}: expected A~B=GBPS[/MS] with A and B device kinds of --devices ({', '.join(kinds)})"
            )
        given[ends] = (bandwidth, latency)
    # a pair given without a latency takes the default one, wherever the default was given
    pairs = {ends: (bandwidth, default[1] if latency is None else latency) for ends, (bandwidth, latency) in given.items()}
    return Links(default[0], default[1], pairs)
