"""Seed 004's whole API under the import path its migration guide gives: ``from graphprof.seed004 import ...``.

Laid out as the seed's ``src/profiling/`` package: ``graphprof.seed004.runtime``, ``.memory``, ``.flops``,
``.scaling`` and ``.utils`` hold the names the seed's modules hold (``from src.profiling.runtime import
profile_pe_computation`` becomes ``from graphprof.seed004.runtime import profile_pe_computation``), and
this package holds them all. The names live in :mod:`graphprof.compat.seed004`, at the edge; these
modules only re-export them.
"""

from __future__ import annotations

from graphprof.compat.seed004 import *  # noqa: F403 - the seed's whole API, as its README imports it
from graphprof.compat.seed004 import __all__ as __all__
