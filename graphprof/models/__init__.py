"""Model resolution, the first stage of graphprof: a name becomes a built model and example inputs.

>>> from graphprof.models import list_models, resolve_model
>>> r = resolve_model("resnet18")
>>> out = r.model(*r.args, **r.kwargs)

See :mod:`graphprof.models.registry` for the spec forms; one module per family, each declaring its
:class:`~graphprof.models.family.Family` and :class:`~graphprof.models.family.Source` records:
:mod:`~graphprof.models.torchvision_zoo`, :mod:`~graphprof.models.yolo`, :mod:`~graphprof.models.hf`,
:mod:`~graphprof.models.timm_zoo`, :mod:`~graphprof.models.pyg`, :mod:`~graphprof.models.user`,
:mod:`~graphprof.models.exported`.

The names load on first use (PEP 562), so that importing a light module of this package (the records
of :mod:`graphprof.models.family`) does not import every family's library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphprof.models.base import ModelInfo, ResolvedModel
    from graphprof.models.registry import family_traits, list_models, resolve_model, spec_family

__all__ = ["ModelInfo", "ResolvedModel", "list_models", "resolve_model", "spec_family", "family_traits"]

_HOME = {
    "ModelInfo": "graphprof.models.base",
    "ResolvedModel": "graphprof.models.base",
    "list_models": "graphprof.models.registry",
    "resolve_model": "graphprof.models.registry",
    "spec_family": "graphprof.models.registry",
    "family_traits": "graphprof.models.registry",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'graphprof.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
