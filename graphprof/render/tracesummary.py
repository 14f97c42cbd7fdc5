"""The layer summary of one profiled forward, as seed 003's decorator prints it: plain text, no colour.

A pure function of :func:`graphprof.parse_model_trace`'s dictionary, shared by ``@capture_model``
(which prints it to stderr after each forward) and ``graphprof trace FILE``. Rows are the trace's
layers in the order they first ran, each with its self time, so the rows sum to the TOTAL row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["render_trace_summary"]

_COLUMNS = ("Layer", "Calls", "Total Time (ms)", "Avg Time (ms)", "Shapes")


def _shape(dims: Any) -> str:
    return "-" if not dims else "(" + ", ".join(str(d) for d in dims) + ")"


def render_trace_summary(analysis: Mapping[str, Any]) -> str:
    """``Layer analysis for NAME`` and one line per layer: calls, total and average self time, input shape.

    >>> print(render_trace_summary({"model_name": "M", "trace_file": "M_forward_001.json", "layer_stats": {
    ...     "fc": {"total_time_us": 450, "call_count": 1, "input_shape": (32, 100)}}}))
    Layer analysis for M (M_forward_001.json)
    ------------------------------------------------------------------
    Layer                Calls  Total Time (ms)  Avg Time (ms)  Shapes
    ------------------------------------------------------------------
    fc                       1            0.450          0.450  (32, 100)
    TOTAL                    1            0.450          0.450
    """
    stats: Mapping[str, Mapping[str, Any]] = analysis.get("layer_stats") or {}
    width = max([len(_COLUMNS[0]), len("TOTAL"), *(len(name) for name in stats)]) + 1
    width = max(width, 20)

    def line(name: str, calls: int, total_us: float, shapes: str) -> str:
        avg = f"{total_us / calls / 1e3:.3f}" if calls else "-"
        return f"{name:<{width}} {calls:>5}  {total_us / 1e3:>15.3f}  {avg:>13}  {shapes}".rstrip()

    header = f"{_COLUMNS[0]:<{width}} {_COLUMNS[1]:>5}  {_COLUMNS[2]:>15}  {_COLUMNS[3]:>13}  {_COLUMNS[4]}"
    rule = "-" * len(header)
    lines = [f"Layer analysis for {analysis.get('model_name', 'Unknown')} ({analysis.get('trace_file', '?')})", rule, header, rule]
    for name, s in stats.items():
        lines.append(line(name, int(s.get("call_count", 0)), float(s.get("total_time_us", 0)), _shape(s.get("input_shape"))))
    total_calls = sum(int(s.get("call_count", 0)) for s in stats.values())
    total_us = sum(float(s.get("total_time_us", 0)) for s in stats.values())
    lines.append(line("TOTAL", total_calls, total_us, ""))
    return "\n".join(lines)
