"""Machine-readable renderings of a :class:`Profile`: JSON and CSV text (written by :mod:`graphprof.render.sink`).

The JSON file is :meth:`Profile.to_dict` (the hardware-free core, ``schema_version`` included) plus what
the roofline adds: a ``bottleneck``, ``estimated_time_s`` and ``output_shape`` on every layer and, at the
top, ``hardware`` (``null`` without a device) and ``roofline``. Seed 002's fields keep their names:
``model``, ``total_flops``, ``total_memory`` and ``layers[]`` with ``name``, ``type``, ``flops``,
``memory``, ``arithmetic_intensity`` and ``bottleneck``, and each layer's ``intensity_band`` is seed
002's reading of its intensity (:mod:`graphprof.cost.roofline`). Per-layer ``flops`` sum exactly to
``total_flops``. Every file carries ``timestamp`` and ``host``, with or without a measurement.

The CSV file has one row per layer with :data:`CSV_COLUMNS`; numbers are written so that
``csv.DictReader`` gives them back exactly (integers as integers, floats by their shortest repr).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from graphprof.cost.result import Profile
from graphprof.cost.roofline import intensity_band
from graphprof.render.common import profile_roofline

__all__ = ["CSV_COLUMNS", "profile_dict", "render_json", "render_csv", "csv_text"]

CSV_COLUMNS = (
    "name", "type", "module", "params", "macs", "flops", "bytes_read", "bytes_written", "memory",
    "arithmetic_intensity", "bottleneck", "estimated_time_s", "output_shape",
)  # fmt: skip


def profile_dict(profile: Profile) -> dict[str, Any]:
    """:meth:`Profile.to_dict` with the verdicts of the roofline it carries added (:attr:`Profile.roofline`)."""
    roofline = profile_roofline(profile)
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


def render_json(profile: Profile) -> str:
    """The profile as JSON text (see the module docstring for the layout)."""
    return json.dumps(profile_dict(profile), indent=2, allow_nan=False) + "\n"


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


def render_csv(profile: Profile) -> str:
    """One row per layer with :data:`CSV_COLUMNS`; ``output_shape`` is ``1x64x32x32`` (several joined by ``;``)."""
    roofline = profile_roofline(profile)
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
