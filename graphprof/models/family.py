"""The two records a model family declares about itself, once, in its own module.

* :class:`Family`: what the rest of graphprof needs to know about the models of one family (whether
  their forward reads tensor values, whether their first forward builds state, why Dynamo export is
  not tried, which library their classes come from, which inputs a sweep may vary).
* :class:`Source`: one form of spec that names models (``hf:llama``, ``yolov8n.yaml``, ``resnet18``):
  whether a spec has that form, the family it resolves to without building, how to build it, and
  which models it lists by name.

The registry (:mod:`graphprof.models.registry`) holds the ordered tuple of sources and walks it; the
other packages ask it for a family's traits (:func:`graphprof.models.registry.family_traits`) and
never write a family's name themselves. Adding a family is its own module (declaring its records)
plus one line in the registry's tuple; ``tests/test_family_records.py`` checks that nothing outside
``graphprof/models/`` keeps a table of family names.

This module is records only: no torch, no family module, so that any layer may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphprof.models.base import ModelInfo, ResolvedModel

__all__ = ["Family", "Source", "Request", "CUSTOM"]

#: The family of a module object handed over (not resolved from a name).
CUSTOM = "custom"


@dataclass(frozen=True)
class Family:
    """What graphprof knows about the models of one family; a family not declared has every default.

    >>> Family("yolo", needs_real_values=True).dynamo_skip is None
    True
    """

    name: str
    #: the forward reads tensor values (box counts, edge indices), so the meta device cannot run it
    needs_real_values: bool = False
    #: why the first forward builds state that later forwards reuse (the model is warmed up once)
    warm_up: str | None = None
    #: why a forced Dynamo export (``--capture dynamo``) needs one real forward first, where the dry run does not
    export_warm_up: str | None = None
    #: why ``--capture auto`` does not try Dynamo export (where symbolic tracing fails, export costs tens
    #: of seconds before anything is counted, and the eager capture counts the same aten calls)
    dynamo_skip: str | None = None
    #: why ``--capture auto`` goes from a failed symbolic trace straight to Dynamo export, without the eager
    #: trial (:mod:`graphprof.capture.plan`): the family's layers compute in container modules, so the trial
    #: would run a whole dry run only to give way
    no_eager_trial: str | None = None
    #: the module prefix of the classes this family's library defines (``"transformers."``): a model
    #: object handed over whose class comes from there is treated as one of this family
    library: str | None = None
    #: the input has an image (or frames) whose H and W a resolution sweep replaces
    image_input: bool = False
    #: the model takes a graph (nodes and edges), with no batch dimension and no input shape to override
    graph_input: bool = False
    #: the input is token ids whose length a seq-len sweep replaces
    sequence_length: bool = False
    #: the option a ``layers`` sweep sets on a spec of this family (``num_hidden_layers``)
    depth_option: str | None = None


@dataclass(frozen=True)
class Request:
    """What :func:`graphprof.models.resolve_model` was asked, handed to a source's ``resolve``."""

    input_shape: Sequence[int] | None
    batch_size: int | None
    device: Any  # a torch.device (kept untyped here: this module imports no torch)
    allow_unsafe_load: bool = False
    proposals: int | None = None

    @property
    def shape_options(self) -> dict[str, Any]:
        """The keywords every family's builder takes: input shape, batch size, device."""
        return {"input_shape": self.input_shape, "batch_size": self.batch_size, "device": self.device}


@dataclass(frozen=True)
class Source:
    """One form of spec; the registry tries the sources in order and the first that ``claims`` a spec
    builds it (a ``resolve`` that returns ``None`` passes the spec on to the next source that claims it).

    ``family_of`` is the family the spec builds, known without building (``None`` when only building
    tells). ``takes_proposals``: the source builds two-stage detectors (``proposals=``).
    """

    name: str
    claims: Callable[[str], bool]
    resolve: Callable[[str, Request], ResolvedModel | None]
    family_of: Callable[[str], str | None]
    families: tuple[Family, ...] = ()
    list_models: Callable[[], Sequence[ModelInfo]] | None = None
    takes_proposals: bool = False

    @classmethod
    def prefixed(
        cls, family: Family, prefix: str, build: Callable[..., ResolvedModel], list_models: Callable[[], Sequence[ModelInfo]]
    ) -> Source:
        """The source of one family's ``prefix``-ed specs (``hf:llama``), each built by
        ``build(spec, input_shape=..., batch_size=..., device=...)`` (:attr:`Request.shape_options`)."""
        return cls(
            family.name,
            claims=lambda spec: spec.lower().startswith(prefix),
            resolve=lambda spec, request: build(spec, **request.shape_options),
            family_of=lambda spec: family.name,
            families=(family,),
            list_models=list_models,
        )
