"""A user's model factory, looked at without calling it: the keywords it accepts."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

from torch import nn

from graphprof.errors import InvalidInputError

__all__ = ["factory_keywords", "check_keyword", "user_factory"]


def factory_keywords(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keyword names ``factory`` accepts, and whether it takes ``**kwargs``."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return set(), True
    names = {
        p.name for p in signature.parameters.values() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())


def check_keyword(factory: Callable[..., Any], key: str, what: str) -> None:
    names, var = factory_keywords(factory)
    if key not in names and not var:
        listed = ", ".join(sorted(names)) or "none"
        raise InvalidInputError(f"{what} has no keyword {key!r} (its keywords: {listed})")


def user_factory(spec: str) -> Callable[..., Any]:
    """The callable a ``pkg.mod:factory`` spec names (imported, not called)."""
    from graphprof.models.user import find_user_object, is_user_spec

    base = spec.partition("?")[0]
    if not is_user_spec(base):
        raise InvalidInputError(f"--set needs a factory (pkg.module:make_model or file.py:make_model), got {spec!r}")
    obj = find_user_object(spec)
    if isinstance(obj, nn.Module) or not callable(obj):
        raise InvalidInputError(f"{spec} is not a factory: --set needs a function or class that takes keywords")
    return cast("Callable[..., Any]", obj)
