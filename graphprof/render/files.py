"""Machine-readable renderings of a :class:`Profile`: JSON and CSV, written atomically.

The JSON file is :meth:`Profile.to_dict` (the hardware-free core, ``schema_version`` included) plus what
the roofline adds: a ``bottleneck``, ``estimated_time_s`` and ``output_shape`` on every layer and, at the
top, ``hardware`` (``null`` without a device) and ``roofline``. Seed 002's fields keep their names:
``model``, ``total_flops``, ``total_memory`` and ``layers[]`` with ``name``, ``type``, ``flops``,
``memory``, ``arithmetic_intensity`` and ``bottleneck``, and each layer's ``intensity_band`` is seed
002's reading of its intensity (:mod:`graphprof.intensity`). Per-layer ``flops`` sum exactly to
``total_flops``. Every file carries ``timestamp`` and ``host``, with or without a measurement.

The CSV file has one row per layer with :data:`CSV_COLUMNS`; numbers are written so that
``csv.DictReader`` gives them back exactly (integers as integers, floats by their shortest repr).
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import signal
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graphprof.errors import OutputError
from graphprof.intensity import intensity_band
from graphprof.render.common import profile_roofline
from graphprof.result import Profile
from graphprof.roofline import Roofline

__all__ = [
    "FORMATS",
    "CSV_COLUMNS",
    "profile_dict",
    "render_json",
    "render_csv",
    "write_output",
    "output_format",
    "write_atomic",
    "csv_text",
    "check_output",
    "render_output",
    "STDOUT",
    "is_descriptor_path",
    "means_stdout",
]

FORMATS = ("json", "csv")

CSV_COLUMNS = (
    "name", "type", "module", "params", "macs", "flops", "bytes_read", "bytes_written", "memory",
    "arithmetic_intensity", "bottleneck", "estimated_time_s", "output_shape",
)  # fmt: skip


def profile_dict(profile: Profile, roofline: Roofline | None = None) -> dict[str, Any]:
    """:meth:`Profile.to_dict` with the roofline's verdicts added (the fixed threshold when ``roofline`` is ``None``)."""
    roofline = roofline if roofline is not None else profile_roofline(profile)
    data = profile.to_dict()
    for layer, verdict, row in zip(data["layers"], roofline.layers, profile.layers, strict=True):
        layer["output_shape"] = list(row.output_shapes[0]) if row.output_shapes else None
        layer["bottleneck"] = verdict.bound.value
        band = intensity_band(row.cost.arithmetic_intensity, flops=row.cost.flops)
        layer["intensity_band"] = None if band is None else band.name
        layer["estimated_time_s"] = verdict.seconds
    data["hardware"] = roofline.hardware.to_dict() if roofline.hardware is not None else None
    data["roofline"] = roofline.to_dict()
    return data


def render_json(profile: Profile, roofline: Roofline | None = None) -> str:
    """The profile as JSON text (see the module docstring for the layout)."""
    return json.dumps(profile_dict(profile, roofline), indent=2, allow_nan=False) + "\n"


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


def csv_text(columns: Iterable[str], rows: Iterable[Mapping[str, object]]) -> str:
    """CSV text with a header row; ``None`` becomes an empty cell, floats their shortest exact repr."""
    columns = tuple(columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
    return buffer.getvalue()


def render_csv(profile: Profile, roofline: Roofline | None = None) -> str:
    """One row per layer with :data:`CSV_COLUMNS`; ``output_shape`` is ``1x64x32x32`` (several joined by ``;``)."""
    roofline = roofline if roofline is not None else profile_roofline(profile)
    rows = []
    for row, verdict in zip(profile.layers, roofline.layers, strict=True):
        cost = row.cost
        rows.append(
            {
                "name": row.name, "type": row.type, "module": row.module, "params": row.params,
                "macs": cost.macs, "flops": cost.flops, "bytes_read": cost.bytes_read,
                "bytes_written": cost.bytes_written, "memory": cost.bytes_moved,
                "arithmetic_intensity": cost.arithmetic_intensity, "bottleneck": verdict.bound.value,
                "estimated_time_s": verdict.seconds,
                "output_shape": ";".join("x".join(str(s) for s in shape) for shape in row.output_shapes),
            }
        )  # fmt: skip
    return csv_text(CSV_COLUMNS, rows)


def output_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """``"json"`` or ``"csv"``: ``fmt`` when given, else the file's suffix; anything else is an :class:`OutputError`."""
    target = Path(path)
    chosen = (fmt or target.suffix.lstrip(".") or ("json" if is_descriptor_path(target) else "")).lower()
    if chosen not in FORMATS:
        if fmt:
            raise OutputError(f"unknown output format {fmt!r}: choose {' or '.join(FORMATS)}")
        raise OutputError(
            f"cannot tell the output format of {str(target)!r} from its suffix: use .json or .csv, or --format"
        )
    return chosen


def render_output(profile: Profile, fmt: str, roofline: Roofline | None = None) -> str:
    """The text :func:`write_output` writes, in ``fmt`` (``"json"`` or ``"csv"``): for ``--output -``."""
    return render_json(profile, roofline) if output_format("out." + fmt) == "json" else render_csv(profile, roofline)


def write_output(
    profile: Profile, path: str | os.PathLike[str], fmt: str | None = None, roofline: Roofline | None = None
) -> Path:
    """Write ``profile`` to ``path`` as JSON or CSV (from ``fmt`` or the suffix), atomically."""
    target = Path(path)
    chosen = output_format(target, fmt)
    write_atomic(target, render_output(profile, chosen, roofline))
    return target


STDOUT = "-"
"""The output path that means standard output: the caller writes the rendered text there."""

# A temporary file's name: "." + the target's name (cut) + "." + 12 hex digits + ".tmp", at most 255 bytes.
_NAME_MAX = 255
_TMP_EXTRA = len("..") + 12 + len(".tmp")


def _temporary_name(name: str) -> str:
    kept = name.encode("utf-8")[: _NAME_MAX - _TMP_EXTRA].decode("utf-8", errors="ignore")
    return f".{kept}.{secrets.token_hex(6)}.tmp"


def _where_to_write(target: Path) -> tuple[Path, os.stat_result | None]:
    """The file a write to ``target`` lands on (a symlink's target, followed) and its stat, if it exists."""
    try:
        real = Path(os.path.realpath(target, strict=False))
    except OSError as exc:  # a symlink loop
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
    try:
        return real, real.stat()
    except FileNotFoundError:
        return real, None
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc


def check_output(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """Check before any profiling that ``path`` can be written; return its format (see :func:`output_format`).

    ``"-"`` (:data:`STDOUT`) is JSON unless ``fmt`` says otherwise. A missing or unwritable folder, a
    folder given as the file, or an existing file that cannot be written is an :class:`OutputError`.
    """
    if str(path) == STDOUT or is_descriptor_path(path):
        return output_format("out.json" if str(path) == STDOUT else path, fmt)
    chosen = output_format(path, fmt)
    target = Path(path)
    real, info = _where_to_write(target)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(f"cannot write {str(target)!r}: it is a folder")
    if info is not None and not stat.S_ISREG(info.st_mode):
        if not os.access(real, os.W_OK):
            raise OutputError(f"cannot write {str(target)!r}: permission denied")
        return chosen
    directory = real.parent
    if not directory.is_dir():
        raise OutputError(f"cannot write {str(target)!r}: folder {str(directory)!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {str(target)!r}: folder {str(directory)!r} is not writable")
    if info is not None and not os.access(real, os.W_OK):
        raise OutputError(f"cannot write {str(target)!r}: the file is not writable")
    return chosen


@contextmanager
def _terminate_as_exception() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises, so ``finally`` clauses clean up; the
    signal is then delivered again to the handler that was there before (by default: the process ends)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    if received:
        signal.raise_signal(signal.SIGTERM)
        raise OutputError("writing was interrupted by SIGTERM; nothing was written")  # the old handler returned


class _Terminated(BaseException):
    """SIGTERM arrived during a write (raised by :func:`_terminate_as_exception`'s handler)."""


def means_stdout(path: str | os.PathLike[str]) -> bool:
    """``-`` or a name of this process's standard output (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``):
    the file goes to standard output alone, the report to standard error."""
    return str(path) == STDOUT or os.path.normpath(str(path)) in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def is_descriptor_path(path: str | os.PathLike[str]) -> bool:
    """``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``: a name for an open descriptor
    of this process (``--output /dev/stdout >> build.log``), which is written through, never replaced."""
    text = os.path.normpath(str(path))
    return text in ("/dev/stdout", "/dev/stderr") or text.startswith(("/dev/fd/", "/proc/self/fd/"))


def _append_through(target: Path, raw: bytes) -> None:
    """Write to a descriptor's name in append mode: after what is there (the shell's ``>>`` and ``>`` alike)."""
    try:
        with open(target, "ab") as handle:
            handle.write(raw)
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc


def write_atomic(target: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``target`` so that no half-written or temporary file remains.

    A regular file (new or existing) is written to a temporary file beside it and renamed over it,
    keeping an existing file's permission bits; a symbolic link is followed and its target replaced
    (the link stays); a character device or FIFO (``/dev/null``, a pipe) is written through, never
    replaced. The temporary file is removed on any failure, Ctrl-C and SIGTERM included.
    """
    target = Path(target)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if is_descriptor_path(target):
        _append_through(target, raw)
        return
    real, info = _where_to_write(target)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise OutputError(f"cannot write {str(target)!r}: it is a folder")
    if info is not None and not stat.S_ISREG(info.st_mode):
        if not (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
            raise OutputError(f"cannot write {str(target)!r}: it is neither a regular file, a device nor a FIFO")
        try:
            with open(real, "wb") as handle:  # opening a FIFO waits for its reader, as a shell's > does
                handle.write(raw)
        except OSError as exc:
            raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
        return
    directory = real.parent
    if not directory.is_dir():
        raise OutputError(f"cannot write {str(target)!r}: folder {str(directory)!r} does not exist")
    tmp = directory / _temporary_name(real.name)
    # os.open with 0o666 lets the umask decide a new file's mode (mkstemp would force 0o600); an
    # existing file's mode is copied over before the rename.
    with _terminate_as_exception():
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
            if info is not None:
                os.chmod(tmp, stat.S_IMODE(info.st_mode))
            os.replace(tmp, real)
        except BaseException as exc:  # an interrupt too: never leave the temporary file behind
            tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
            raise
