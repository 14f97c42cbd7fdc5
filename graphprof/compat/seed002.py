"""Seed 002's report, for its scripts (``cli/profile_graph.py``, ``cli/profile_graph_with_fvcore.py``).

graphprof's own command prints its own tables; the seed's scripts print what the seed's README shows,
under its labels, from the same :class:`~graphprof.cost.result.Profile`:

* :func:`seed_report`: ``GRAPH PROFILE``, ``Model Summary`` (``Total Operators``, ``Total FLOPs``,
  ``Total Memory``, ``Arithmetic Intensity``), ``Operation Breakdown``, ``Bottleneck Analysis`` (the four
  bands of its interpretation guide) and ``Layer Details (Top 10 by FLOPs)`` (every layer with ``verbose``);
* :func:`seed_json`: its JSON (``model``, ``total_flops``, ``total_memory`` and ``layers`` whose ``type``
  is lower case, ``"conv2d"``), under graphprof's envelope (``kind`` ``seed002-profile``);
* :data:`COMPARISON_LABELS`: the fvcore comparison's title and column names as the seed prints them.

Pure functions of a profile: the scripts print what these return.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from graphprof.cost.result import LayerRow, Profile
from graphprof.cost.roofline import INTENSITY_BANDS, intensity_band

__all__ = ["KIND", "COMPARISON_LABELS", "seed_report", "seed_json", "seed_type"]

#: The ``kind`` of the seed script's JSON (:mod:`graphprof.schemas`).
KIND = "seed002-profile"
#: The fvcore comparison as seed 002 prints it: title, then graphprof's and the reference's columns.
COMPARISON_LABELS = ("FLOP COMPARISON: Our Estimator vs {reference}", "Our FLOPs", "{reference} FLOPs")

_RULE = "=" * 80


def seed_type(row: LayerRow) -> str:
    """A layer's type as the seed writes it: the module's class (or the function) in lower case, ``conv2d``."""
    return row.type.lower()


def _scaled(value: float, unit: str) -> str:
    """``8.21 G``, ``120.00 M FLOPs`` (the seed's spaced units); below a thousand, the plain number."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix} {unit}".rstrip()
    return f"{value:g} {unit}".rstrip()


def _mb(value: int) -> str:
    return f"{value / 1e6:.1f} MB"


def _band(row: LayerRow) -> str:
    band = intensity_band(row.cost.arithmetic_intensity, flops=row.cost.flops)
    return band.name.lower() if band is not None else "no work"


def _ai(value: float | None) -> str:
    return "inf" if value is None else f"{value:.1f}"


def _working(profile: Profile) -> list[LayerRow]:
    """The layers that compute (FLOPs above zero), most FLOPs first."""
    return sorted((r for r in profile.layers if r.cost.flops > 0), key=lambda r: -r.cost.flops)


def _breakdown(profile: Profile) -> list[str]:
    """FLOPs share, operators and FLOPs by type, most FLOPs first: every operator of ``Total Operators``
    (``flatten: 0.0% (1 ops, 0 FLOPs)`` too), so that the counts sum to the total printed above them."""
    total = profile.total_flops or 1
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in profile.layers:
        by_type[row.type][0] += 1
        by_type[row.type][1] += row.cost.flops
    rows = sorted(by_type.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))
    width = max((len(name) for name, _ in rows), default=0) + 1
    return [f"  {name + ':':<{width}}  {flops / total:.1%} ({ops} ops, {_scaled(flops, 'FLOPs')})" for name, (ops, flops) in rows]


def _bottlenecks(profile: Profile) -> list[str]:
    total = profile.total_flops or 1
    shares = dict.fromkeys((b.name for b in INTENSITY_BANDS), 0)
    for row in profile.layers:
        band = intensity_band(row.cost.arithmetic_intensity, flops=row.cost.flops)
        if band is not None and row.cost.flops > 0:
            shares[band.name] += row.cost.flops
    width = max(len(b.name) for b in INTENSITY_BANDS) + 1
    return [f"  {band.name + ':':<{width}}  {shares[band.name] / total:.1%} ({band.rule})" for band in INTENSITY_BANDS]


def seed_report(profile: Profile, *, top: int = 10, verbose: bool = False) -> str:
    """The seed's text report of ``profile`` (see the module docstring); ``verbose`` details every layer."""
    layers = _working(profile)
    shown = layers if verbose else layers[:top]
    heading = f"Layer Details (all {len(layers)} layers by FLOPs)" if verbose else f"Layer Details (Top {top} by FLOPs)"
    width = max((len(r.name) for r in shown), default=0) + 1
    lines = [
        _RULE, f"GRAPH PROFILE: {profile.model_name}", _RULE, "",
        "Model Summary:",
        f"  Total Operators:      {len(profile.layers)}",
        f"  Total FLOPs:          {_scaled(profile.total_flops, '')}",
        f"  Total Memory:         {_mb(profile.total_bytes)}",
        f"  Arithmetic Intensity: {_ai(profile.arithmetic_intensity)} (FLOPs/Byte)",
        "", "Operation Breakdown:", *_breakdown(profile),
        "", "Bottleneck Analysis:", *_bottlenecks(profile),
        "", f"{heading}:",
    ]  # fmt: skip
    for row in shown:
        lines.append(
            f"  {row.name + ':':<{width}}  {_scaled(row.cost.flops, 'FLOPs')}, {_mb(row.cost.bytes_moved)}, "
            f"AI={_ai(row.cost.arithmetic_intensity)} ({_band(row)})"
        )
    return "\n".join(lines)


def seed_json(profile: Profile) -> dict[str, Any]:
    """The seed's JSON fields of ``profile`` (graphprof's envelope is added by the writer)."""
    return {
        "model": profile.model_name,
        "total_flops": profile.total_flops,
        "total_memory": profile.total_bytes,
        "total_params": profile.total_params,
        "layers": [
            {
                "name": row.name,
                "type": seed_type(row),
                "flops": row.cost.flops,
                "memory": row.cost.bytes_moved,
                "arithmetic_intensity": row.cost.arithmetic_intensity,
                "bottleneck": _band(row),
            }
            for row in _working(profile)
        ],
    }
