"""``Record``: a result whose JSON form is its fields as they are.

Most results write themselves field by field (``to_dict``); where every field is already a JSON value
under its own name, the dataclass inherits this one instead of spelling its fields out a second time.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, cast

__all__ = ["Record"]


class Record:
    """A dataclass mixin: :meth:`to_dict` is :func:`dataclasses.asdict` (nested records and containers
    copied, field order kept)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(cast(Any, self))
