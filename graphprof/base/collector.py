"""Python's oldest-generation collections held back while a dry run builds its records, then put back.

Python (3.11) runs a *full* collection when the objects waiting to join the oldest generation pass a
quarter of those already in it. After ``import torch, torchvision`` that generation holds some 350,000
objects, and the import's own leftovers are still waiting, so the first call that allocates a few thousand
lasting objects (a profile's records) pays for a walk over the whole heap: 157 ms of a 330 ms first profile
of resnet50 on meta, in which nothing was collected (``gc.callbacks``, ``collected=0``). Which call pays for
it is an accident of when the threshold is crossed; the collection is the process's, not the profile's.

:func:`full_collections_deferred` raises the oldest generation's threshold for the duration of a call and
restores the caller's thresholds after. The young generations are collected as before, so short-lived
cycles are freed as usual; only the walk over the long-lived heap waits for the next collection after the
call. Nothing is frozen and nothing is disabled: ``gc.isenabled()`` and ``gc.get_threshold()`` are as the
caller left them.

    >>> with full_collections_deferred():
    ...     profile = build()           # doctest: +SKIP
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["DEFERRED", "defer_full_collections", "full_collections_deferred"]

#: Young collections between two looks at the oldest generation, while deferred (Python's default is 10).
DEFERRED = 1 << 30


def defer_full_collections() -> tuple[int, ...]:
    """Hold back full collections from now on (young ones go on); the thresholds they replace."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], DEFERRED)
    return before


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Hold back full collections in this block; the caller's thresholds come back on the way out."""
    before = defer_full_collections()
    try:
        yield
    finally:
        gc.set_threshold(*before)
