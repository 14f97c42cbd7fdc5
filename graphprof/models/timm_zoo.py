"""timm models by name: ``timm:<name>`` builds ``timm.create_model(name, pretrained=False)``.

No weights are read or downloaded (``pretrained=False``); the default input is the ``input_size`` of the
model's default pretrained configuration (``1x3x224x224`` for most). A name timm does not know is a
:class:`ModelNotFoundError` naming the closest ones; a ``timm:`` spec that is not a model name (a
function of the ``timm`` package, ``timm:create_model?model_name=...``) is left to the user-factory
resolver. timm is imported here only, when such a spec is resolved.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch

from graphprof.errors import MissingDependencyError, ModelNotFoundError
from graphprof.models.base import ResolvedModel, effective_shape, random_tensor
from graphprof.models.device import build_module
from graphprof.models.family import Family, Request, Source

__all__ = ["FAMILY", "SOURCE", "PREFIX", "is_timm_spec", "resolve_timm"]

PREFIX = "timm:"
_DEFAULT_INPUT = (3, 224, 224)


def is_timm_spec(spec: str) -> bool:
    """``timm:<name>``, or ``timm:<name>?drop_rate=0.1`` (keywords for ``timm.create_model``, read as for
    ``hf:`` specs): a timm model, unless ``<name>`` turns out to be an attribute of the package (a user's factory)."""
    return spec.lower().startswith(PREFIX) and "/" not in spec


def _import_timm() -> ModuleType:
    try:
        import timm
    except ImportError as exc:
        raise MissingDependencyError(f"timm: models need timm: pip install 'graphprof[timm]' ({exc})") from exc
    return timm


def resolve_timm(spec: str, *, input_shape: Sequence[int] | None, batch_size: int | None, device: torch.device) -> ResolvedModel | None:
    """Build ``timm:<name>`` with random weights and an image batch for it; ``None`` when ``<name>`` is
    not a timm model but an attribute of the ``timm`` package (a user's factory spec)."""
    from graphprof.models.hf import parse_options

    name, _, query = spec[len(PREFIX) :].partition("?")
    options = parse_options(query) if query else {}
    timm = _import_timm()
    if not timm.is_model(name):
        if hasattr(timm, name):
            return None
        close = difflib.get_close_matches(name, timm.list_models(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else " (timm.list_models() lists the names)"
        raise ModelNotFoundError(f"unknown timm model '{name}'{hint}")
    config: Any = timm.models.get_pretrained_cfg(name)
    chw = tuple(getattr(config, "input_size", None) or _DEFAULT_INPUT)
    shape = effective_shape((1, *chw), input_shape, batch_size, layout="N,C,H,W", model=spec)
    model, build_notes = build_module(lambda: timm.create_model(name, pretrained=False, **options), device, spec)
    called = "".join(f", {k}={v!r}" for k, v in options.items())
    notes = (f"built with timm.create_model({name!r}, pretrained=False{called}): no weights (random init)", *build_notes)
    return ResolvedModel(name=spec, family="timm", model=model.eval(), args=(random_tensor(shape, device),), notes=notes)


#: timm's image models.
FAMILY = Family(
    "timm",
    dynamo_skip="timm models whose symbolic trace fails take 40 s and more to export; the eager capture gives the same counts",
    library="timm.",
    image_input=True,
)


def _resolve(spec: str, request: Request) -> ResolvedModel | None:
    return resolve_timm(spec, **request.shape_options)


#: ``timm:resnet50d``, when timm knows the name (else the spec goes on to the next source).
SOURCE = Source("timm", claims=is_timm_spec, resolve=_resolve, family_of=lambda spec: FAMILY.name, families=(FAMILY,))
