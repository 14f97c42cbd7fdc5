"""Model resolution, the first stage of graphprof: a name becomes a built model and example inputs.

>>> from graphprof.models import list_models, resolve_model
>>> r = resolve_model("resnet18")
>>> out = r.model(*r.args, **r.kwargs)

See :mod:`graphprof.models.registry` for the spec forms; one module per family:
:mod:`~graphprof.models.torchvision_zoo`, :mod:`~graphprof.models.yolo`, :mod:`~graphprof.models.hf`,
:mod:`~graphprof.models.user`.
"""

from __future__ import annotations

from graphprof.models.base import ModelInfo, ResolvedModel
from graphprof.models.registry import list_models, resolve_model, spec_family

__all__ = ["ModelInfo", "ResolvedModel", "list_models", "resolve_model", "spec_family"]
