"""Seed 004's whole API under the import path its migration guide gives: ``from graphprof.seed004 import ...``.

The names live in :mod:`graphprof.compat.seed004`, at the edge; this module only re-exports them.
"""

from __future__ import annotations

from graphprof.compat.seed004 import *  # noqa: F403 - the seed's whole API, as its README imports it
from graphprof.compat.seed004 import __all__ as __all__
