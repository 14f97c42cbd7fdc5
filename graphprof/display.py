"""How a result shows itself in a notebook: as its HTML report, inline (``_repr_html_``).

Jupyter (and any front end that honours IPython's display protocol) calls ``_repr_html_`` on the last
value of a cell. :class:`NotebookDisplay` gives the result records that method; the page is
:func:`graphprof.render.html.render_html`'s, the same page ``--html`` writes, shown in an ``<iframe>``
(``srcdoc``) so that its styles and scripts stay out of the notebook's own. Rendering happens only when
the notebook asks: this is the one import from a record up to the renderers, made on display.
"""

from __future__ import annotations

import html

__all__ = ["NotebookDisplay", "inline_page"]


def inline_page(page: str, height: int = 900) -> str:
    """A whole HTML page as an ``<iframe>`` a notebook cell can hold (the page escaped into ``srcdoc``)."""
    return (
        f"<iframe srcdoc=\"{html.escape(page, quote=True)}\" style='width:100%;height:{height}px;border:0' "
        "sandbox='allow-scripts'></iframe>"
    )


class NotebookDisplay:
    """Mixin: ``_repr_html_`` shows the result as its HTML report (a profile, a sweep, a comparison, a plan)."""

    def _repr_html_(self) -> str:
        from graphprof.render.html import render_html

        return inline_page(render_html(self))
