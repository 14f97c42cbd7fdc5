"""A report table that folds cleanly at any width: a number never parts from its unit, a name or a shape is
never cut mid-token.

Rich folds a cell that does not fit its column character by character (``118.59``/``MB``, ``BatchNor``/``m2d``).
:class:`ReportTable` reads the kind of each column from Rich's own column options and, when the table's
natural width does not fit, chooses the widths itself:

- a **quantity** column (``no_wrap=True``): a number with its unit, a shape; never wrapped and never cut,
  so the column is as wide as its widest cell;
- a **name** column (``no_wrap=True, overflow="ellipsis"``): a module path or a type; shortened in the
  middle with an ellipsis (``layer1.0.conv1`` -> ``lay…0.conv1``) down to :data:`NAME_FLOOR` columns
  (the full name stays in the JSON);
- any other column is **text**: wrapped at spaces (:class:`Phrases`), never between a number and its unit,
  so a cell of one figure (``118.59 MB``) is never parted either.

When even the narrowest widths do not fit, the table's ``optional`` columns are left out, in order, then
the rightmost ones, and the caption says which (:data:`OMITTED_NOTE`): a figure is shown whole or not at
all. A header wraps at its spaces.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

__all__ = ["NAME_FLOOR", "OMITTED_NOTE", "Phrases", "ReportTable", "phrases", "shorten_middle"]

#: The narrowest a name column is shortened to before columns are left out.
NAME_FLOOR = 16
#: The longest phrase a text column keeps whole; a longer one (a path) is shortened with an ellipsis.
PHRASE_CAP = 28
#: The caption's note when columns are left out at a narrow width, before the columns' names.
OMITTED_NOTE = "not shown at this width (widen the terminal, --width, or --output):"

# A unit that stays on the line of the number before it: ``118.59 MB``, ``1.23 ms``, ``30.7 FLOPs/byte``.
_UNITS = frozenset("B kB MB GB TB PB EB KiB MiB GiB TiB s ms us µs ns FLOPs/byte GB/s TB/s TFLOP/s GFLOP/s %".split())
_NUMBER = re.compile(r"^[(~≈<>+\-−]*\d[\d.,]*[KMGT]?$")


def phrases(text: str) -> list[str]:
    """The words of ``text``, a number and the unit after it kept as one phrase.

    >>> phrases("118.59 MB (read 84.03 MB, written 34.57 MB)")
    ['118.59 MB', '(read', '84.03 MB,', 'written', '34.57 MB)']
    """
    return [text[start:end] for start, end in _phrase_spans(text)]


def _phrase_spans(text: str) -> list[tuple[int, int]]:
    """Where each phrase of :func:`phrases` starts and ends in ``text``."""
    spans: list[tuple[int, int]] = []
    for word in re.finditer(r"\S+", text):
        unit = word.group().rstrip(",;:)]")
        if spans and unit in _UNITS and _NUMBER.match(text[spans[-1][0] : spans[-1][1]]) and "\n" not in text[spans[-1][1] : word.start()]:
            spans[-1] = (spans[-1][0], word.end())
        else:
            spans.append(word.span())
    return spans


def shorten_middle(text: Text, width: int) -> Text:
    """``text`` cut to ``width`` cells with an ellipsis in the middle, its leading indent kept.

    >>> shorten_middle(Text("    layer1.0.conv1"), 12).plain
    '    la…conv1'
    """
    plain = text.plain
    if cell_len(plain) <= width:
        return text
    indent = len(plain) - len(plain.lstrip(" "))
    room = max(1, width - indent - 1)
    head = room // 3
    tail = room - head
    return Text.assemble(text[: indent + head], "…", text[len(plain) - tail :])


class Phrases:
    """Text that wraps at its spaces, never between a number and its unit (:func:`phrases`); a phrase wider
    than the line (a long path) is shortened in the middle with an ellipsis."""

    def __init__(self, text: Text | str) -> None:
        self.text = Text(text) if isinstance(text, str) else text

    def _lines(self, width: int) -> list[Text]:
        lines: list[Text] = []
        for source in self.text.split("\n", allow_blank=True):
            lines += _wrap(source, width)
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        text = Text("\n").join(self._lines(max(1, options.max_width)))
        text.no_wrap = True
        text.overflow = "ellipsis"
        text.justify = options.justify
        yield text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        longest = max((cell_len(p) for p in phrases(plain)), default=1)
        widest = max((cell_len(line) for line in plain.split("\n")), default=1)
        return Measurement(min(longest, PHRASE_CAP), widest).with_maximum(options.max_width)


def _wrap(text: Text, width: int) -> list[Text]:
    """One line of ``text`` wrapped greedily at ``width`` by :func:`phrases`."""
    lines: list[Text] = []
    start = end = -1
    for at, stop in _phrase_spans(text.plain):
        if start < 0:
            start = at
        elif cell_len(text.plain[start:stop]) > width:
            lines.append(text[start:end])
            start = at
        end = stop
    lines.append(text[max(start, 0) : max(end, 0)])
    return [line if cell_len(line.plain) <= width else shorten_middle(line, width) for line in lines]


class ReportTable(Table):
    """A :class:`rich.table.Table` that fits the width it is drawn at without cutting a token (see the module
    docstring). ``optional`` names the columns (by header) that may be left out, first to go first."""

    def __init__(self, *args: Any, optional: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.optional = tuple(optional)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        fitted = copy.copy(self.fitted(console, options.max_width))
        for name in ("title", "caption"):  # an annotation wraps at its spaces too, a number beside its unit
            text, style = getattr(fitted, name), getattr(fitted, f"{name}_style")
            if isinstance(text, str | Text):
                setattr(
                    fitted, name, Phrases(console.render_str(text, style=style or "", highlight=False) if isinstance(text, str) else text)
                )
        yield from Table.__rich_console__(fitted, console, options)

    def fitted(self, console: Console, width: int) -> Table:
        """This table as drawn at ``width`` columns: itself when its natural width fits, else a copy with
        the widths chosen, its text cells as :class:`Phrases` and columns left out as needed."""
        cells = [_cell_texts(console, column) for column in self.columns]
        wants = [max((_widest(t) for t in texts), default=1) for texts in cells]
        if sum(wants) + self._pads(range(len(self.columns))) <= width:
            return self
        kept = list(range(len(self.columns)))
        mins = [_narrowest(column, texts, want) for column, texts, want in zip(self.columns, cells, wants, strict=True)]
        dropped: list[str] = []
        named = [next((i for i in kept if _plain(self.columns[i].header) == h), None) for h in self.optional]
        for index in [i for i in named if i is not None] + kept[:0:-1]:  # the optional ones, then from the right
            if sum(mins[i] for i in kept) + self._pads(kept) <= width:
                break
            if index in kept and len(kept) > 1:
                kept.remove(index)
                dropped.append(_plain(self.columns[index].header))
        room = width - self._pads(kept)
        widths = _share(room, [mins[i] for i in kept], [wants[i] for i in kept])
        return self._copy(kept, widths, cells, dropped)

    def _pads(self, kept: Iterable[int]) -> int:
        """The padding and rules of the columns ``kept`` when they are the whole table (the edge columns pad
        less without ``pad_edge``; a box draws a rule between two columns and, with ``show_edge``, two more)."""
        count = len(list(kept))
        left, right = self.padding[3], self.padding[1]
        total = (left + right) * count
        if count and not self.pad_edge:
            total -= left + right
        if self.collapse_padding:
            total -= max(0, count - 1) * min(left, right)
        if self.box:
            total += max(0, count - 1) + (2 if self.show_edge else 0)
        return total

    def _copy(self, kept: list[int], widths: list[int], cells: list[list[Text]], dropped: list[str]) -> Table:
        table = copy.copy(self)
        table.columns = []
        for index, (i, width) in enumerate(zip(kept, widths, strict=True)):
            column = copy.copy(self.columns[i])
            column._index = index
            column.width = width
            column.header = Phrases(cells[i][0])
            column.footer = Phrases(cells[i][-1])
            body = cells[i][1:-1]
            if _is_name(column):
                column._cells = [shorten_middle(t, width) for t in body]
            elif not _is_quantity(column):
                column._cells = [Phrases(t) for t in body]
            column.no_wrap = _is_quantity(column) or column.no_wrap
            column.overflow = "ellipsis"
            table.columns.append(column)
        if dropped:
            note = f"{OMITTED_NOTE} {', '.join(dropped)}"
            table.caption = note if not self.caption else Text.assemble(_as_text(self.caption), "; ", note)
        return table


def _is_name(column: Column) -> bool:
    return column.no_wrap and column.overflow == "ellipsis"


def _is_quantity(column: Column) -> bool:
    return column.no_wrap and not _is_name(column)


def _plain(cell: RenderableType) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _as_text(cell: Any) -> Text:
    return cell if isinstance(cell, Text) else Text.from_markup(str(cell))


def _cell_texts(console: Console, column: Column) -> list[Text]:
    """The header, the cells and the footer of ``column`` as text (a cell's markup read the way Rich reads it)."""
    texts = []
    for cell in (column.header, *column._cells, column.footer):
        if isinstance(cell, Text):
            texts.append(cell)
        elif isinstance(cell, str):
            texts.append(console.render_str(cell, highlight=False))
        else:  # another renderable: measured as its widest line, kept as it is
            texts.append(Text(" " * Measurement.get(console, console.options, cell).maximum))
    return texts


def _widest(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def _narrowest(column: Column, texts: list[Text], want: int) -> int:
    """The fewest columns ``column`` can take without cutting a token: a quantity its widest cell, a name
    :data:`NAME_FLOOR`, text its longest phrase (capped at :data:`PHRASE_CAP`); a header its longest word."""
    header = max((cell_len(w) for w in texts[0].plain.split()), default=1)
    footer = _widest(texts[-1])
    body = texts[1:-1]
    if _is_name(column):
        return max(header, footer, min(want, NAME_FLOOR))
    if _is_quantity(column):
        return max(header, footer, max((_widest(t) for t in body), default=1))
    longest = max((cell_len(p) for t in body for p in phrases(t.plain)), default=1)
    return max(header, min(longest, PHRASE_CAP), min(footer, PHRASE_CAP))


def _share(room: int, mins: list[int], wants: list[int]) -> list[int]:
    """Widths from ``mins`` up to ``wants``, the spare ``room`` going first to the columns that need least
    to show in full (a rule, a header), the rest to the widest text, which wraps (as Rich collapses the
    widest column first)."""
    widths = list(mins)
    spare = room - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: wants[i] - mins[i]):
        give = max(0, min(spare, wants[i] - widths[i]))
        widths[i] += give
        spare -= give
    return widths
