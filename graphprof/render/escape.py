"""Everything a model or a user names goes into a page as data, escaped for the context it lands in.

A layer is called whatever its model calls it (``</script><script>...``), a model or a factory keyword
whatever the user typed; none of it may end an element, open a tag or run script. Three contexts, one
function each:

- :func:`text`: a text node or a quoted attribute value (``&``, ``<``, ``>``, both quotes as entities);
- :func:`script_json`: a JSON value inside ``<script>``: ``<``, ``>`` and ``&`` as ``\\u`` escapes, so
  neither ``</script>`` nor ``<!--`` can appear in it, whatever the strings hold (Django's ``json_script``
  does the same);
- :func:`plotly_json`: a plotly figure inside ``<script>``: plotly draws its strings (hover text, legend
  names, titles, category labels) as a small HTML subset (``<b>``, ``<br>``, ``<a href>``), so each string
  is also :func:`text`-escaped, which plotly shows back as the characters themselves; only the keys
  graphprof itself writes markup or style into (:data:`PLOTLY_OWN_KEYS`) are left as they are.

>>> script_json({"name": "</script><!--"})
'{"name": "\\\\u003c/script\\\\u003e\\\\u003c!--"}'
>>> text("<b a='1'>")
'&lt;b a=&#x27;1&#x27;&gt;'
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["PLOTLY_OWN_KEYS", "plotly_json", "script_json", "text"]

#: plotly keys whose strings graphprof writes itself (markup in a hover template, a trace type, a colour).
PLOTLY_OWN_KEYS = frozenset({"type", "mode", "symbol", "color", "hovertemplate", "dash"})

_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def text(value: object) -> str:
    """``value`` as a text node or a quoted attribute value."""
    return html.escape(str(value), quote=True)


def script_json(value: Any) -> str:
    """``value`` as JSON that can sit inside ``<script>`` (``ensure_ascii`` covers U+2028 and U+2029)."""
    return json.dumps(value, default=list).translate(_SCRIPT_SAFE)


def _plotly_strings(value: Any, key: str = "") -> Any:
    if isinstance(value, str):
        return value if key in PLOTLY_OWN_KEYS else text(value)
    if isinstance(value, dict):
        return {k: _plotly_strings(v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plotly_strings(v, key) for v in value]
    return value


def plotly_json(value: Any) -> str:
    """A plotly figure (traces or layout) as :func:`script_json`, its strings escaped for plotly's markup."""
    return script_json(_plotly_strings(value))
