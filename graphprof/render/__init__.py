"""Renderers: pure functions of a :class:`~graphprof.cost.result.Profile` (and its roofline). They never change it.

``table`` builds the Rich terminal report, ``files`` the JSON and CSV text of a profile, ``sink`` the one way any result is written, ``compare`` the side-by-side
comparison of several models, and ``plots`` the charts (matplotlib, imported only when a chart is drawn).
"""

from graphprof.render.compare import (
    ComparisonRow,
    ModelFailure,
    comparison_dict,
    comparison_rows,
    render_comparison,
    render_comparison_csv,
)
from graphprof.render.files import profile_dict, render_csv, render_json
from graphprof.render.plots import PLOT_KINDS, parse_plot_spec, render_layers_plot, render_roofline_plot, write_plot
from graphprof.render.table import (
    format_count,
    format_percent,
    format_seconds,
    render_bottlenecks,
    render_footer,
    render_hardware,
    render_layers,
    render_op_breakdown,
    render_report,
    render_summary,
    render_top_layers,
    render_tree,
)

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
