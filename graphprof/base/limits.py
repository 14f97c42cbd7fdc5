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

from graphprof.errors import InvalidInputError

__all__ = ["available_memory", "require_count", "require_file", "require_fits", "format_bytes"]


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


def require_fits(nbytes: float, what: str, *, budget: int | None = None) -> None:
    """Refuse ``what`` when the ``nbytes`` it would need exceed ``budget`` (default: :func:`available_memory`)."""
    limit = available_memory() if budget is None else budget
    if not math.isfinite(nbytes) or nbytes > limit:
        need = format_bytes(nbytes) if math.isfinite(nbytes) else "unbounded memory"
        raise InvalidInputError(f"{what} would need {need}, more than the {format_bytes(limit)} this machine has available")


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
