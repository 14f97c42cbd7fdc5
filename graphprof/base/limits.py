"""Sizes checked before they are allocated: one helper for every count or byte figure a user or a file names.

A size that cannot fit is refused up front with the bytes it would need, as an
:class:`~graphprof.errors.InvalidInputError` (exit 2), never found out by allocating it (a run that grows
past the machine's memory, or an internal error after minutes). The budget is this machine's available
memory (``MemAvailable`` on Linux, else its physical memory), which a caller may lower.

>>> require_fits(2**20, "a 1 MiB buffer", budget=2**30)
>>> require_fits(2**40, "pyg:gin with 10^12 nodes", budget=2**30)
Traceback (most recent call last):
...
graphprof.errors.InvalidInputError: pyg:gin with 10^12 nodes would need 1.0 TiB, more than the 1.0 GiB this machine has available
"""

from __future__ import annotations

import math
import os
import stat
from typing import Any

from graphprof.errors import InvalidInputError

__all__ = ["MAX_BYTES", "available_memory", "parse_memory", "require_count", "require_file", "require_fits", "format_bytes", "weight_bytes"]


#: The largest size graphprof takes: no machine addresses more than 2**64 bytes (16 EiB), so a figure above
#: it is a typo, refused in one line rather than overflowing a float later.
MAX_BYTES = 2**64
#: Byte units, decimal as everywhere in graphprof (``format_bytes``; a device's ``memory_gb``), binary by name.
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_memory(text: str | int) -> int:
    """``"40GB"`` -> ``40_000_000_000``; ``"1.5GiB"``, ``"800 MB"`` and a plain number of bytes too; a size
    that is not positive or above :data:`MAX_BYTES` is an :class:`~graphprof.errors.InvalidInputError`.

    >>> parse_memory("40GB"), parse_memory("1GiB"), parse_memory(512)
    (40000000000, 1073741824, 512)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value: float = text if text <= MAX_BYTES else math.inf  # float(10**400) would overflow
        unit = "b"
    else:
        raw = str(text).strip().lower().replace(" ", "")
        number = raw.rstrip("kmgtib")
        unit = raw[len(number) :] or "b"
        try:
            value = float(number)
        except ValueError:
            value = math.nan
    shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
    if unit not in _UNITS or not value > 0:
        raise InvalidInputError(f"memory {shown}: write a positive size such as 40GB, 800MB or 1.5GiB")
    if not value * _UNITS[unit] <= MAX_BYTES:  # inf and 1e300 TiB alike
        raise InvalidInputError(f"memory {shown}: more than {format_bytes(MAX_BYTES)} (2**64 bytes), which no machine has")
    return int(value * _UNITS[unit])


def available_memory() -> int:
    """Bytes this machine can still give: ``MemAvailable`` on Linux, else its physical memory, else 8 GiB."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX host
        return 8 * 2**30


def require_fits(nbytes: float, what: str, *, budget: int | None = None, skip: str | None = None) -> None:
    """Refuse ``what`` when the ``nbytes`` it would need exceed ``budget`` (default: :func:`available_memory`);
    ``skip`` says how to do without it. The one check before anything is allocated for real: a graph's
    buffers, a file's parse, a model's weights built for a warm-up or an export, a measured run."""
    limit = available_memory() if budget is None else budget
    if not math.isfinite(nbytes) or nbytes > limit:
        need = format_bytes(nbytes) if math.isfinite(nbytes) else "unbounded memory"
        raise InvalidInputError(
            f"{what} would need {need}, more than the {format_bytes(limit)} this machine has available" + (f"; {skip}" if skip else "")
        )


def weight_bytes(model: Any, dtype: Any = None) -> int:
    """The bytes of ``model``'s parameters and buffers (floating ones in ``dtype``, a ``torch.dtype``, when
    given): what building it with real weights allocates, counted alike on a model on the meta device."""
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        size = dtype.itemsize if dtype is not None and t.is_floating_point() else t.element_size()
        total += t.numel() * size
    return int(total)


def require_count(value: float, what: str, *, low: int = 1, high: int) -> int:
    """``value`` as an integer in ``[low, high]``, else one clear error naming ``what`` and the bounds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value != int(value):
        raise InvalidInputError(f"{what} must be a whole number from {low} to {high}, not {value!r}")
    if not low <= int(value) <= high:
        raise InvalidInputError(f"{what} must be from {low} to {high}, not {int(value)}")
    return int(value)


def require_file(path: str | os.PathLike[str], what: str, *, cap: int, growth: float = 1.0) -> int:
    """The size of ``path``, a regular file of at most ``cap`` bytes whose parse (``growth`` times its size)
    fits in memory; else one clear error, before a byte is read (``/dev/zero``, a FIFO, a 2 GiB file).

    A missing file is the caller's :class:`FileNotFoundError`, as ``open`` would raise it.
    """
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInputError(f"{os.fspath(path)}: not a regular file, so not read as {what}")
    if info.st_size > cap:
        raise InvalidInputError(
            f"{os.fspath(path)} is {format_bytes(info.st_size)}, above the {format_bytes(cap)} graphprof reads as {what}"
        )
    require_fits(info.st_size * growth, f"reading {os.fspath(path)} ({format_bytes(info.st_size)}) as {what}")
    return info.st_size


def format_bytes(value: float) -> str:
    """Bytes in decimal units: ``1536`` -> ``"1.54 kB"``, ``47_466_000`` -> ``"47.47 MB"``."""
    for factor, suffix in ((1e18, "EB"), (1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {suffix}"
    return f"{int(value)} B"
