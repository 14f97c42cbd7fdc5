"""Machine-readable renderings of a :class:`Profile`: JSON and CSV, written atomically."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from graphprof.errors import OutputError
from graphprof.result import Profile

__all__ = ["render_json", "render_csv", "write_output", "FORMATS"]

FORMATS = ("json", "csv")

CSV_COLUMNS = ("name", "type", "module", "params", "macs", "flops", "bytes_read", "bytes_written", "memory", "arithmetic_intensity", "output_shape")


def render_json(profile: Profile) -> str:
    return json.dumps(profile.to_dict(), indent=2) + "\n"


def render_csv(profile: Profile) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in profile.layers:
        cost = row.cost
        ai = cost.arithmetic_intensity
        writer.writerow([
            row.name, row.type, row.module or "", row.params, cost.macs, cost.flops, cost.bytes_read,
            cost.bytes_written, cost.bytes_moved, "" if ai is None else f"{ai:.6g}",
            ";".join("x".join(str(s) for s in shape) for shape in row.output_shapes),
        ])  # fmt: skip
    return buffer.getvalue()


def write_output(profile: Profile, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write ``profile`` to ``path`` as JSON or CSV (from ``fmt`` or the suffix), atomically."""
    target = Path(path)
    fmt = (fmt or target.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise OutputError(f"cannot tell the output format of {str(target)!r}: use a .json or .csv suffix, or --format")
    text = render_json(profile) if fmt == "json" else render_csv(profile)
    write_atomic(target, text)
    return target


def write_atomic(target: Path, text: str) -> None:
    """Write to a temporary file beside ``target`` and rename it over, so no half-written file remains."""
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise OutputError(f"cannot write {str(target)!r}: folder {str(directory)!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
