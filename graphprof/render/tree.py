"""The hierarchical graph profile: the module tree, folded to a depth, with each module's summed cost.

A pure function of a :class:`Profile`: it returns a Rich renderable and prints nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from graphprof.cost.aggregate import ancestors
from graphprof.cost.result import ModuleRow, Profile
from graphprof.render.formatting import (
    OPTIONAL_COLUMNS,
    TYPE_WIDTH,
    FullNamesIfTheyFit,
    cost_cells,
    count_cell,
    section_table,
    shape_cell,
    short_names,
)

__all__ = ["DEFAULT_TREE_ROWS", "auto_depth", "module_shapes", "render_tree"]

#: Rows the folded module tree aims to fit in; the deepest level that fits is shown.
DEFAULT_TREE_ROWS = 40


def auto_depth(modules: Sequence[ModuleRow], max_rows: int = DEFAULT_TREE_ROWS) -> int:
    """The deepest tree level whose rows (that level and above) number at most ``max_rows``; at least 1."""
    if not modules:
        return 0
    deepest = max(m.depth for m in modules)
    best = 1
    for depth in range(1, deepest + 1):
        if sum(1 for m in modules if m.depth <= depth) <= max_rows:
            best = depth
    return best


def module_shapes(profile: Profile) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Each module's output shape: its own output where the module is a layer itself (every module in the
    eager capture, a leaf's call in a graph), else that of its last child called as a module (YOLO's
    ``model`` Sequential, whose children its parent calls one by one), else the output of the last graph
    node inside it."""
    shapes: dict[str, tuple[tuple[int, ...], ...]] = {}
    child: dict[str, tuple[tuple[int, ...], ...]] = {}
    own: dict[str, tuple[tuple[int, ...], ...]] = {}
    for row in profile.layers:
        if row.output_shapes:
            for path in ancestors(row.module):
                shapes[path] = row.output_shapes
            if row.name == (row.module or "(model)"):
                own[row.module or ""] = row.output_shapes
                if row.module:
                    child[row.module.rpartition(".")[0]] = row.output_shapes
    return {**shapes, **child, **own}


def render_tree(
    profile: Profile, *, depth: int | None = None, show_shapes: bool = False, max_rows: int = DEFAULT_TREE_ROWS
) -> RenderableType:
    """The module tree with each module's summed cost, folded at ``depth`` (default: what fits ``max_rows``).

    A module's row is the exact sum of the graph nodes inside it, so the first row (the model) is the
    total. With ``depth=None`` the deepest level that fits ``max_rows`` rows is shown, and if even the
    first level does not fit, its first ``max_rows`` rows are.
    """
    modules = profile.modules
    deepest = max((m.depth for m in modules), default=0)
    shown = auto_depth(modules, max_rows) if depth is None else max(0, depth)
    rows = [m for m in modules if m.depth <= shown]
    hidden = 0
    if depth is None and len(rows) > max_rows:
        hidden = len(rows) - max_rows
        rows = rows[:max_rows]
    folded = sum(1 for m in modules if m.depth > shown)
    if shown >= deepest:
        caption = f"full tree, {len(modules)} modules"
    else:
        caption = f"folded at depth {shown} of {deepest} ({folded} deeper modules summed into their parents); --depth N to unfold"
    if hidden:
        caption += f"; {hidden} more rows at this depth not shown (--depth or --verbose)"
    return FullNamesIfTheyFit(lambda width: _tree_table(profile, rows, caption, show_shapes, width))


def _tree_table(profile: Profile, rows: list[ModuleRow], caption: str, show_shapes: bool, width: int | None) -> Table:
    table = section_table("Hierarchical graph profile", caption=caption, optional=OPTIONAL_COLUMNS)
    indent_room = 2 * max((m.depth for m in rows), default=0)
    table.add_column("Module", no_wrap=True, overflow="ellipsis", max_width=None if width is None else width + indent_room)
    table.add_column("Type", no_wrap=True, overflow="ellipsis", max_width=TYPE_WIDTH)
    table.add_column("Params", justify="right", no_wrap=True)
    if show_shapes:
        table.add_column("Output shape", max_width=20)  # text: two shapes wrap at their comma
    table.add_column("MACs", justify="right", no_wrap=True)
    table.add_column("FLOPs", justify="right", no_wrap=True)
    table.add_column("Memory", justify="right", no_wrap=True)
    table.add_column("AI", justify="right", no_wrap=True)
    shapes = module_shapes(profile) if show_shapes else {}
    labels = short_names([m.path for m in rows], width)  # indented by depth, within the column's room
    for module, short in zip(rows, labels, strict=True):
        indent = "  " * module.depth
        label = profile.model_name if module.path == "" else short
        cells = [escape(indent + label), module.type, count_cell(module.params)]  # a name is text, never markup
        if show_shapes:
            cells.append(shape_cell(shapes.get(module.path, ())))
        cells += cost_cells(module.cost)
        table.add_row(*cells, style="bold" if module.depth == 0 else None)
    return table
