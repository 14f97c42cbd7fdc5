"""Resolve a model spec to a built model and example inputs; list what can be resolved.

Spec forms, tried in this order:

==================================== ==========================================================
``hf:llama``, ``hf:/path/to/dir``    Hugging Face (:mod:`graphprof.models.hf`)
``pyg:gps``, ``pyg:gin?num_nodes=5000`` PyTorch Geometric graph models (:mod:`graphprof.models.pyg`)
``path/to/best.pt``                  a local checkpoint (:func:`graphprof.models.yolo.load_checkpoint`);
                                     one that is not on disk is a :class:`DownloadUnavailableError`
``yolov8n-seg.yaml``, ``my.yaml``    a YOLO yaml, packaged with ultralytics or local
``timm:resnet50d``                    timm (:mod:`graphprof.models.timm_zoo`), when timm knows the name
``package.module:make_model``        a user's factory or class (:mod:`graphprof.models.user`),
``path/to/file.py:MyModel``
``resnet18``, ``quantized_resnet18`` torchvision (:mod:`graphprof.models.torchvision_zoo`), case-insensitive
``yolov8n``, ``yolo11s-pose``        a packaged YOLO yaml by name (:mod:`graphprof.models.yolo`)
==================================== ==========================================================

Anything else is a :class:`ModelNotFoundError` that suggests the closest names. Resolution never
downloads: it runs inside :func:`graphprof.models.offline.network_blocked`.
"""

from __future__ import annotations

from types import MappingProxyType

import torch

from graphprof.base.guard import guard_user_code
from graphprof.base.inputs import INPUT_SEED
from graphprof.errors import InvalidInputError
from graphprof.models import exported, hf, pyg, timm_zoo, torchvision_zoo, user, yolo
from graphprof.models.base import ModelInfo, ResolvedModel, unknown_model
from graphprof.models.device import parse_device
from graphprof.models.family import CUSTOM, Family, Request, Source
from graphprof.models.offline import network_blocked

__all__ = ["SOURCES", "FAMILIES", "list_models", "resolve_model", "spec_family", "family_traits", "library_family", "CHECKPOINT_SUFFIXES"]

CHECKPOINT_SUFFIXES = yolo.CHECKPOINT_SUFFIXES

#: Every form of spec, in the order a spec is tried against them (the module docstring's table).
SOURCES: tuple[Source, ...] = (
    hf.SOURCE,
    pyg.SOURCE,
    exported.SOURCE,
    yolo.CHECKPOINT,
    yolo.YAML,
    timm_zoo.SOURCE,
    user.SOURCE,
    torchvision_zoo.SOURCE,
    yolo.BY_NAME,
)

#: The sources whose models :func:`list_models` lists, in the order it lists them.
LISTED: tuple[Source, ...] = (torchvision_zoo.SOURCE, yolo.BY_NAME, hf.SOURCE, pyg.SOURCE)

#: Every family the sources build, by name.
FAMILIES: MappingProxyType[str, Family] = MappingProxyType({f.name: f for s in SOURCES for f in s.families})


def family_traits(name: str | None) -> Family:
    """The record of family ``name``; a name no source declares (``custom``, ``None``) has every default.

    >>> family_traits("yolo").needs_real_values, family_traits("custom").needs_real_values
    (True, False)
    """
    found = FAMILIES.get(name) if name else None
    return found if found is not None else Family(name or CUSTOM)


def library_family(module: str) -> str | None:
    """The family whose library defines classes in ``module`` (``"transformers.models.llama"`` -> ``"hf"``)."""
    dotted = module + "."
    return next((f.name for f in FAMILIES.values() if f.library and dotted.startswith(f.library)), None)


def list_models(filter: str | None = None) -> list[ModelInfo]:  # noqa: A002 - the public name of the option
    """Every model :func:`resolve_model` knows by name; builds nothing, imports neither ultralytics nor transformers.

    ``filter`` keeps the models whose name, family or task contains it, ignoring case.

    >>> [m.name for m in list_models("resnet18")]
    ['resnet18', 'quantized_resnet18', 'yolo11-cls-resnet18']
    """
    infos = [info for source in LISTED if source.list_models is not None for info in source.list_models()]
    if not filter:
        return infos
    needle = filter.lower()
    return [i for i in infos if needle in i.name.lower() or needle in i.family.lower() or needle in i.task.lower()]


def _resolve(spec: str, request: Request) -> ResolvedModel:
    """The first source that claims ``spec`` and builds it (sources are asked lazily, in order)."""
    if request.proposals is not None and not any(s.takes_proposals and s.claims(spec) for s in SOURCES):
        raise InvalidInputError(f"proposals applies to torchvision's two-stage detectors, not to {spec}")
    for source in SOURCES:
        if source.claims(spec):
            resolved = source.resolve(spec, request)
            if resolved is not None:
                return resolved
    raise unknown_model(spec, [info.name for info in list_models()])


def spec_family(spec: str) -> str | None:
    """The family ``spec`` resolves to, known without building anything; ``None`` when only building tells
    (a user's factory, a checkpoint).

    >>> spec_family("fasterrcnn_resnet50_fpn"), spec_family("yolov8n"), spec_family("pkg:make")
    ('detection', 'yolo', None)
    """
    stripped = spec.strip()
    source = next((s for s in SOURCES if s.claims(stripped)), None)
    return None if source is None else source.family_of(stripped)


@guard_user_code
def resolve_model(
    spec: str,
    *,
    input_shape: tuple[int, ...] | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    allow_unsafe_load: bool = False,
    proposals: int | None = None,
) -> ResolvedModel:
    """Build the model ``spec`` names (see the module docstring) and example inputs for it.

    ``input_shape`` replaces the default input's shape (detection: ``(N, C, H, W)`` means N images of
    C x H x W; optical flow: both images; video: ``(N, C, T, H, W)``; hf: ``(batch, seq)``);
    ``batch_size`` replaces only its first dim. ``device="meta"`` builds without memory where the
    family allows (quantized models stay on CPU, with a note). ``proposals`` sets a two-stage
    detector's region-proposal count (default: the model's maximum, stated in a note).

    Loading never runs code from a file unless ``allow_unsafe_load=True``: a ``.pt``/``.pth`` is read
    with ``torch.load(weights_only=True)`` (an ultralytics checkpoint with ultralytics' own safe loader),
    and a YOLO yaml whose ``activation:`` or layer names ultralytics would evaluate is refused
    (:class:`~graphprof.errors.UnsafeLoadError`). A user's ``package.module:factory`` is Python code the
    user named: it is imported and run.

    >>> r = resolve_model("resnet18", batch_size=2)
    >>> r.args[0].shape, r.family
    (torch.Size([2, 3, 224, 224]), 'classification')
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError(f"a model spec must be a non-empty string, got {spec!r}")
    target = parse_device(device)
    if proposals is not None and proposals <= 0:
        raise InvalidInputError(f"proposals must be positive, got {proposals}")
    # random weights from a fixed seed: the same spec builds the same model, so a real run (detection
    # post-processing keeps the boxes its weights give) counts the same every time; the caller's RNG is untouched
    with network_blocked(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(INPUT_SEED)
        request = Request(input_shape, batch_size, target, allow_unsafe_load, proposals)
        return _resolve(spec.strip(), request)
