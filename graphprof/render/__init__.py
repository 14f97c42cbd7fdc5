"""Renderers: pure functions of one result, a :class:`~graphprof.cost.result.Profile` with the roofline it
carries (:attr:`~graphprof.cost.result.Profile.roofline`) among them. They never change it.

``report`` builds the Rich terminal report from its sections (``tree``, ``layers``, ``summary``,
``bottlenecks``; ``formatting`` is what their cells share), ``hardware`` the table of device presets,
``files`` the JSON and CSV text of a profile, ``sink`` the one way any result is written, ``compare``
the side-by-side comparison of several models, and ``plots`` the charts (matplotlib, imported only
when a chart is drawn).
"""

from graphprof.compare.models import ComparisonRow, ModelFailure, comparison_rows
from graphprof.render.bottlenecks import render_bottlenecks
from graphprof.render.compare import comparison_dict, render_comparison, render_comparison_csv
from graphprof.render.files import profile_dict, render_csv, render_json
from graphprof.render.formatting import format_count, format_percent, format_seconds
from graphprof.render.hardware import render_hardware
from graphprof.render.layers import render_layers, render_op_breakdown, render_top_layers
from graphprof.render.plots import PLOT_KINDS, parse_plot_spec, render_layers_plot, render_roofline_plot, write_plot
from graphprof.render.report import render_footer, render_report
from graphprof.render.summary import render_summary
from graphprof.render.tree import render_tree

__all__ = [
    "PLOT_KINDS",
    "ComparisonRow",
    "ModelFailure",
    "comparison_dict",
    "comparison_rows",
    "format_count",
    "format_percent",
    "format_seconds",
    "parse_plot_spec",
    "profile_dict",
    "render_bottlenecks",
    "render_comparison",
    "render_comparison_csv",
    "render_csv",
    "render_footer",
    "render_hardware",
    "render_json",
    "render_layers",
    "render_layers_plot",
    "render_op_breakdown",
    "render_report",
    "render_roofline_plot",
    "render_summary",
    "render_top_layers",
    "render_tree",
    "write_plot",
]
