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

import difflib
from collections.abc import Sequence
from typing import Any

import torch

from graphprof.errors import InvalidInputError, ModelNotFoundError
from graphprof.guard import guard_user_code
from graphprof.inputs import INPUT_SEED
from graphprof.models import exported, hf, pyg, timm_zoo, torchvision_zoo, user, yolo
from graphprof.models.base import ModelInfo, ResolvedModel
from graphprof.models.device import parse_device
from graphprof.models.offline import network_blocked

__all__ = ["list_models", "resolve_model", "spec_family", "CHECKPOINT_SUFFIXES"]

CHECKPOINT_SUFFIXES = (".pt", ".pth")


def list_models(filter: str | None = None) -> list[ModelInfo]:  # noqa: A002 - the public name of the option
    """Every model :func:`resolve_model` knows by name; builds nothing, imports neither ultralytics nor transformers.

    ``filter`` keeps the models whose name, family or task contains it, ignoring case.

    >>> [m.name for m in list_models("resnet18")]
    ['resnet18', 'quantized_resnet18', 'yolo11-cls-resnet18']
    """
    infos = [*torchvision_zoo.list_torchvision(), *yolo.list_yolo(), *hf.list_hf(), *pyg.list_pyg()]
    if not filter:
        return infos
    needle = filter.lower()
    return [i for i in infos if needle in i.name.lower() or needle in i.family.lower() or needle in i.task.lower()]


def _unknown(spec: str, names: Sequence[str]) -> ModelNotFoundError:
    close = difflib.get_close_matches(spec.lower(), names, n=3, cutoff=0.6)
    if not close:
        return ModelNotFoundError(
            f"unknown model '{spec}' (graphprof --list shows the names; a .yaml, a local .pt, "
            "hf:llama or package.module:factory also work)"
        )
    suggestion = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return ModelNotFoundError(f"unknown model '{spec}'; did you mean {suggestion}? (graphprof --list)")


def _resolve(
    spec: str,
    input_shape: Sequence[int] | None,
    batch_size: int | None,
    device: torch.device,
    allow_unsafe_load: bool,
    proposals: int | None = None,
) -> ResolvedModel:
    options: dict[str, Any] = {"input_shape": input_shape, "batch_size": batch_size, "device": device}
    if proposals is not None and spec.lower() not in torchvision_zoo.torchvision_families():
        raise InvalidInputError(f"proposals applies to torchvision's two-stage detectors, not to {spec}")
    lowered = spec.lower()
    if lowered.startswith(hf.PREFIX):
        return hf.resolve_hf(spec, **options)
    if lowered.startswith(pyg.PREFIX):
        return pyg.resolve_pyg(spec, **options)
    if lowered.endswith(exported.SUFFIX):
        return exported.resolve_pt2(spec, **options, allow_unsafe_load=allow_unsafe_load)
    if lowered.endswith(CHECKPOINT_SUFFIXES):
        return yolo.load_checkpoint(spec, **options, allow_unsafe_load=allow_unsafe_load)
    if yolo.yaml_suffix(spec):
        arch = yolo.find_yolo_architecture(spec)
        if arch is None:
            raise _unknown(spec, [f"{name}.yaml" for name in yolo.yolo_architectures()])
        return yolo.resolve_yolo(arch, **options, allow_unsafe_load=allow_unsafe_load)
    if timm_zoo.is_timm_spec(spec):
        resolved = timm_zoo.resolve_timm(spec, **options)
        if resolved is not None:
            return resolved
    if user.is_user_spec(spec):
        return user.resolve_user(spec, **options)
    if lowered in torchvision_zoo.torchvision_families():
        return torchvision_zoo.resolve_torchvision(lowered, **options, proposals=proposals)
    arch = yolo.find_yolo_architecture(spec)
    if arch is not None:
        return yolo.resolve_yolo(arch, **options, allow_unsafe_load=allow_unsafe_load)
    raise _unknown(spec, [info.name for info in list_models()])


def spec_family(spec: str) -> str | None:
    """The family ``spec`` resolves to, known without building anything; ``None`` when only building tells
    (a user's factory, a checkpoint).

    >>> spec_family("fasterrcnn_resnet50_fpn"), spec_family("yolov8n"), spec_family("pkg:make")
    ('detection', 'yolo', None)
    """
    lowered = spec.strip().lower()
    if lowered.startswith(hf.PREFIX):
        return "hf"
    if lowered.startswith(pyg.PREFIX):
        return "pyg"
    if lowered.endswith(CHECKPOINT_SUFFIXES):
        return None
    if yolo.yaml_suffix(lowered):
        return "yolo"
    if timm_zoo.is_timm_spec(spec.strip()):
        return "timm"
    if user.is_user_spec(spec.strip()):
        return None
    family = torchvision_zoo.torchvision_families().get(lowered)
    if family is not None:
        return family
    return "yolo" if yolo.find_yolo_architecture(spec.strip()) is not None else None


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
        return _resolve(spec.strip(), input_shape, batch_size, target, allow_unsafe_load, proposals)
