"""What the terminal tables share: numbers, bytes and times as text, and a table that shows names in full
when they fit.

Counts use decimal K/M/G/T suffixes, bytes decimal kB/MB/GB (so that FLOPs/byte reads straight off the
columns), times s/ms/us. Every cell of ``-`` is a zero or a missing value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from rich import box
from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.table import Table

from graphprof.base.limits import format_bytes
from graphprof.base.names import abbreviate
from graphprof.formulas.cost import Cost
from graphprof.render.fit import ReportTable

__all__ = [
    "NAME_WIDTH",
    "OPTIONAL_COLUMNS",
    "TYPE_WIDTH",
    "FullNamesIfTheyFit",
    "add_columns",
    "ai_cell",
    "bytes_cell",
    "cost_cells",
    "count_cell",
    "format_count",
    "format_percent",
    "format_seconds",
    "section_table",
    "seconds_cell",
    "shape_cell",
    "short_names",
]

#: The width a name column is shortened to when the names in full do not fit.
NAME_WIDTH = 36
#: The widest a layer's type column grows before its text folds.
TYPE_WIDTH = 18
#: The columns of a layer table left out, in this order, when the table does not fit the width (the
#: MACs are half the FLOPs of most layers; the rest are in the JSON).
OPTIONAL_COLUMNS = ("Type", "AI", "MACs", "Output shape", "Bound", "Params")


def format_count(value: int | float, unit: str = "") -> str:
    """``11_689_512`` -> ``"11.69M"``; K/M/G/T with two decimals."""
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.2f}{suffix}{unit}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}{unit}"
    return f"{int(value)}{unit}"


def format_seconds(value: float | None) -> str:
    """``0.00123`` -> ``"1.23 ms"``, ``1.3e-5`` -> ``"13.0 us"``; three significant digits, ``"-"`` for ``None``."""
    if value is None:
        return "-"
    if value == 0:
        return "0 s"
    for factor, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if value >= factor or suffix == "ns":
            scaled = value / factor
            digits = 0 if scaled >= 100 else 1 if scaled >= 10 else 2
            return f"{scaled:.{digits}f} {suffix}"
    raise AssertionError("unreachable")


def format_percent(share: float | None) -> str:
    """``0.1234`` -> ``"12.3%"``; a share that rounds to zero is ``"0.0%"``, never ``"-0.0%"``."""
    return "-" if share is None else f"{round(share * 100, 1) + 0.0:.1f}%"


def count_cell(value: int) -> str:
    """A count for a table cell: ``-`` for zero, else :func:`format_count`."""
    return "-" if value == 0 else format_count(value)


def bytes_cell(value: int) -> str:
    """Bytes for a table cell: ``-`` for zero, else :func:`graphprof.base.limits.format_bytes`."""
    return "-" if value == 0 else format_bytes(value)


def seconds_cell(value: float | None) -> str:
    """Seconds for a table cell: ``-`` for zero or ``None``, else :func:`format_seconds`."""
    return "-" if not value else format_seconds(value)


def ai_cell(value: float | None) -> str:
    """An arithmetic intensity (FLOPs/byte) for a table cell, one decimal."""
    return "-" if value is None else f"{value:.1f}"


def cost_cells(cost: Cost) -> list[str]:
    """A cost's MACs, FLOPs, bytes moved and arithmetic intensity, as table cells in that order."""
    return [count_cell(cost.macs), count_cell(cost.flops), bytes_cell(cost.bytes_moved), ai_cell(cost.arithmetic_intensity)]


def shape_cell(shapes: Sequence[tuple[int, ...]]) -> str:
    """The first two output shapes, ``1x64x56x56``, and how many more there are."""
    if not shapes:
        return "-"
    text = ", ".join("x".join(str(s) for s in shape) or "scalar" for shape in shapes[:2])
    return text + (f" (+{len(shapes) - 2})" if len(shapes) > 2 else "")


def short_names(names: Sequence[str], width: int | None) -> list[str]:
    """Each name abbreviated to ``width`` (:func:`graphprof.base.names.abbreviate`), unless that would make two
    rows shown together read the same: those keep their full names (folded over lines, never cut).
    ``width=None`` keeps every name in full.

    >>> short_names(["model.layers.0.post_attention_layernorm", "model.layers.1.post_attention_layernorm"], 24)
    ['model.layers.0.post_attention_layernorm', 'model.layers.1.post_attention_layernorm']
    """
    if width is None:
        return list(names)
    short = [abbreviate(n, width) for n in names]
    sources: dict[str, set[str]] = {}
    for name, s in zip(names, short, strict=True):
        sources.setdefault(s, set()).add(name)
    return [s if len(sources[s]) == 1 else abbreviate(n, 10**6) for n, s in zip(names, short, strict=True)]


class FullNamesIfTheyFit:
    """A table drawn with its names in full when it fits the width it is drawn at (a wide terminal, a
    file), else with the names shortened by :func:`short_names` (still unique among the rows shown).

    ``build(width)`` makes the table: ``width`` is ``None`` for full names, else the name column's width.
    """

    def __init__(self, build: Callable[[int | None], Table]) -> None:
        self.build = build

    def _table(self, console: Console, options: ConsoleOptions) -> Table:
        full = self.build(None)
        natural = Measurement.get(console, options.update(max_width=10**6), full).maximum  # unclamped
        return full if natural <= options.max_width else self.build(NAME_WIDTH)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Table]:
        yield self._table(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._table(console, options))


def add_columns(table: Table, names: Sequence[str], *, left: Sequence[str] = (), center: Sequence[str] = ()) -> Table:
    """Add a column per header in ``names``, in order: right-justified (figures) unless named in ``left``
    or ``center``."""
    for name in names:
        table.add_column(name, justify="left" if name in left else "center" if name in center else "right")
    return table


def section_table(title: str, *, caption: str | None = None, header: bool = True, optional: Sequence[str] = ()) -> Table:
    """A section of the report: a left-justified bold title, a dim caption, a plain head rule; it folds
    without cutting a token at any width, leaving out the ``optional`` columns (by header) when it must
    (:class:`graphprof.render.fit.ReportTable`)."""
    return ReportTable(
        optional=optional,
        title=title,
        caption=caption,
        title_justify="left",
        caption_justify="left",
        title_style="bold",
        caption_style="dim",
        box=box.SIMPLE_HEAD,
        show_header=header,
        show_edge=False,
        pad_edge=False,
    )
