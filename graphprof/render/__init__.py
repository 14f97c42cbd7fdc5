"""Renderers: pure functions of a :class:`~graphprof.result.Profile`. They never change it."""

from graphprof.render.files import render_csv, render_json, write_output
from graphprof.render.table import format_count, render_layers, render_report, render_summary

__all__ = [
    "format_count",
    "render_layers",
    "render_report",
    "render_summary",
    "render_json",
    "render_csv",
    "write_output",
]
