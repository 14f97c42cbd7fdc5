"""How a result shows itself in a notebook: as its HTML report, inline (``_repr_html_``).

Jupyter (and any front end that honours IPython's display protocol) calls ``_repr_html_`` on the last
value of a cell. :class:`NotebookDisplay` gives the result records that method; the page is
:func:`graphprof.render.html.render_html`'s, the same page ``--html`` writes, shown in an ``<iframe>``
(``srcdoc``) so that its styles and scripts stay out of the notebook's own. Rendering happens only when
the notebook asks. The records sit below the renderers, so the renderer is handed in from above:
``graphprof/__init__.py`` (which runs before any module of the package) sets it with :func:`set_renderer`.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

__all__ = ["NotebookDisplay", "inline_page", "set_renderer"]

_renderer: list[Callable[[Any], str]] = []


def set_renderer(render: Callable[[Any], str]) -> None:
    """The function that turns a result into its HTML page (set once, by the package's ``__init__``)."""
    _renderer[:] = [render]


def inline_page(page: str, height: int = 900) -> str:
    """A whole HTML page as an ``<iframe>`` a notebook cell can hold (the page escaped into ``srcdoc``)."""
    return (
        f"<iframe srcdoc=\"{html.escape(page, quote=True)}\" style='width:100%;height:{height}px;border:0' "
        "sandbox='allow-scripts'></iframe>"
    )


class NotebookDisplay:
    """Mixin: ``_repr_html_`` shows the result as its HTML report (a profile, a sweep, a comparison, a plan)."""

    def _repr_html_(self) -> str:
        if not _renderer:
            raise RuntimeError("graphprof's HTML renderer is not set (graphprof/__init__.py sets it)")
        return inline_page(_renderer[0](self))
