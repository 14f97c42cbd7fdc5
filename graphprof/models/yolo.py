"""Ultralytics YOLO: the model yamls shipped inside the installed ``ultralytics`` package, and local ``.pt`` files.

Names follow ultralytics: a packaged ``yolov8-seg.yaml`` with scales n/s/m/l/x gives ``yolov8n-seg`` ...
``yolov8x-seg`` (the scale letter after the version number, as ``YOLO("yolov8n-seg.yaml")`` reads it);
a yaml without scales (``yolov9c``, ``yolov3-tiny``) or with one (``yolov10n``, ``rtdetr-l``) keeps its
file name. ``yolov8n`` and ``yolov8n.yaml`` are the same model; so is a local yaml path.

Listing reads the yamls (PyYAML, an ultralytics dependency) and never imports ultralytics: the
package is found with ``importlib.util.find_spec``. Building imports ``ultralytics.nn.tasks`` and
calls the task's model class (``DetectionModel``, ``SegmentationModel``, ``PoseModel``, ``OBBModel``,
``ClassificationModel``, ...) on the yaml's dict, with ``verbose=False`` and ultralytics' logger
quiet; this downloads nothing. A ``TorchVision`` backbone layer in a yaml
(``yolo11-cls-resnet18``) is built without its pretrained weights.

Default input: ``1x3x640x640``; ``1x3x224x224`` for classification models (ultralytics' -cls models
are trained and reported at 224). For a ``.pt`` checkpoint: its ``train_args["imgsz"]``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import functools
import importlib.util
import logging
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import torch

from graphprof.errors import (
    DownloadUnavailableError,
    GraphprofError,
    InvalidInputError,
    MissingDependencyError,
    ModelBuildError,
    ModelNotFoundError,
)
from graphprof.models.base import ModelInfo, ResolvedModel, a_type, effective_shape, format_shape, random_tensor, unknown_model
from graphprof.models.device import build_module
from graphprof.models.family import Family, Request, Source
from graphprof.models.trust import check_yolo_yaml, load_pickle, restricted_build

__all__ = [
    "FAMILY",
    "CHECKPOINT",
    "YAML",
    "BY_NAME",
    "CHECKPOINT_SUFFIXES",
    "YoloArchitecture",
    "yolo_architectures",
    "list_yolo",
    "find_yolo_architecture",
    "resolve_yolo",
    "load_checkpoint",
    "yaml_suffix",
    "missing_checkpoint",
]

#: A local checkpoint file (an ultralytics one, or a pickled module).
CHECKPOINT_SUFFIXES = (".pt", ".pth")

IMAGE_SIZE = 640
CLASSIFY_IMAGE_SIZE = 224
INSTALL_HINT = "pip install 'graphprof[yolo]' (ultralytics)"

# The model class of each task, in ultralytics.nn.tasks (ultralytics' own YOLO.task_map).
_TASK_MODEL_CLASS = {
    "detect": "DetectionModel",
    "segment": "SegmentationModel",
    "pose": "PoseModel",
    "obb": "OBBModel",
    "classify": "ClassificationModel",
    "semantic": "SemanticSegmentationModel",
    "depth": "DepthModel",
}

# ultralytics' guess_model_scale: the scale letter right after the version number.
_SCALE_IN_NAME = re.compile(r"yolo(e-)?v?\d+([nslmx])")


@dataclass(frozen=True)
class YoloArchitecture:
    """One buildable YOLO: a packaged (or local) yaml file and the scale to build it at."""

    name: str
    path: Path
    scale: str
    task: str
    head: str

    @property
    def image_size(self) -> int:
        return CLASSIFY_IMAGE_SIZE if self.task == "classify" else IMAGE_SIZE


def yaml_suffix(spec: str) -> bool:
    """Whether ``spec`` names a yaml file (``yolov8n.yaml``)."""
    return spec.lower().endswith((".yaml", ".yml"))


def _ultralytics_models_dir() -> Path | None:
    """``ultralytics/cfg/models`` of the installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec("ultralytics")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(next(iter(spec.submodule_search_locations))) / "cfg" / "models"
    return directory if directory.is_dir() else None


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml  # PyYAML: an ultralytics dependency, present wherever its yamls are

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a model yaml")
    return data


def _head_module(cfg: dict[str, Any]) -> str:
    """The name of the output module: the third field of the head's last layer."""
    return str(cfg["head"][-1][2])


def _task_of(head: str) -> str:
    """What the head predicts, as ultralytics' guess_model_task reads a yaml; RT-DETR heads detect."""
    module = head.lower()
    if module in {"classify", "classifier", "cls", "fc"}:
        return "classify"
    for marker, task in (
        ("detect", "detect"),
        ("semanticsegment", "semantic"),
        ("segment", "segment"),
        ("pose", "pose"),
        ("obb", "obb"),
        ("depth", "depth"),
    ):
        if marker in module:
            return task
    return "detect"


def _scale_of(stem: str) -> str:
    found = _SCALE_IN_NAME.search(stem)
    return found.group(2) if found else ""


def _architectures_of(path: Path, *, expand_scales: bool = True) -> Iterator[YoloArchitecture]:
    """The names one yaml file builds: one per scale for a scale-less file name, else the file name."""
    cfg = _load_yaml(path)
    head = _head_module(cfg)
    task = _task_of(head)
    scales = list(cfg.get("scales") or {})
    stem = path.stem
    if expand_scales and scales and not _scale_of(stem):
        # a letter that ultralytics would not read back from the name (rtdetr-resnet50 + "l") is no name
        named = [(re.sub(r"(\d+)", rf"\g<1>{scale}", stem, count=1), scale) for scale in scales]
        expanded = [YoloArchitecture(name, path, scale, task, head) for name, scale in named if _scale_of(name) == scale]
        if expanded:
            yield from expanded
            return
    # the scale in the name, else the yaml's first (ultralytics' choice, with a warning)
    yield YoloArchitecture(stem, path, _scale_of(stem) or (scales[0] if scales else ""), task, head)


@functools.cache
def yolo_architectures() -> dict[str, YoloArchitecture]:
    """Every YOLO name that the installed ultralytics ships a yaml for; empty without ultralytics."""
    directory = _ultralytics_models_dir()
    if directory is None:
        return {}
    found: dict[str, YoloArchitecture] = {}
    for path in sorted(directory.rglob("*.yaml")):
        try:
            for arch in _architectures_of(path):
                found.setdefault(arch.name, arch)
        except (ValueError, KeyError, IndexError, TypeError, OSError):
            continue  # not a model yaml; nothing to list
    return found


def list_yolo() -> list[ModelInfo]:
    """One :class:`ModelInfo` per packaged YOLO architecture and scale; imports no ultralytics."""
    return [
        ModelInfo(name=a.name, family="yolo", default_input=format_shape((1, 3, a.image_size, a.image_size)), task=a.task)
        for a in yolo_architectures().values()
    ]


def find_yolo_architecture(spec: str) -> YoloArchitecture | None:
    """The architecture ``spec`` names (``yolov8n``, ``yolov8n.yaml``, ``path/to/my.yaml``), or None.

    A bare name (no folder) is the packaged yaml when ultralytics ships one, even if a file of that name
    lies in the current folder: a cloned repository cannot shadow a packaged model. A spec with a folder
    (``./yolov8n.yaml``) is the user's own file. The path used is in the profile's notes.
    """
    path = Path(spec)
    bare = yaml_suffix(spec) and os.sep not in spec and "/" not in spec
    packaged = yolo_architectures().get(path.stem.lower()) if bare else None
    if packaged is not None:
        return packaged
    if yaml_suffix(spec) and path.is_file():
        try:
            return next(_architectures_of(path, expand_scales=False))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelBuildError(f"{spec} is not an ultralytics model yaml: {type(exc).__name__}: {exc}") from exc
    stem = path.name[: -len(path.suffix)] if yaml_suffix(spec) else spec
    return yolo_architectures().get(stem.lower())


def _import_tasks() -> ModuleType:
    """``ultralytics.nn.tasks``, or :class:`MissingDependencyError`."""
    try:
        with _quiet_ultralytics():  # a first import announces the settings file it creates
            import ultralytics.nn.tasks as tasks
    except ImportError as exc:
        raise MissingDependencyError(f"YOLO models need ultralytics: {INSTALL_HINT} ({exc})") from exc
    return tasks


@contextmanager
def _quiet_ultralytics() -> Iterator[None]:
    """Silence ultralytics' logger (model summaries, scale guesses, first-run notices) for the block.

    ``disabled`` rather than a level: ultralytics sets the level itself when it is first imported.
    """
    logger = logging.getLogger("ultralytics")
    disabled = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = disabled


def _model_class(tasks: ModuleType, arch: YoloArchitecture) -> type[torch.nn.Module]:
    head = arch.head.lower()
    if head.startswith("rtdetr"):
        class_name = "RTDETRDetectionModel"
    elif "world" in head:
        class_name = "WorldModel"
    elif "yoloe" in head:
        class_name = "YOLOESegModel" if arch.task == "segment" else "YOLOEModel"
    else:
        class_name = _TASK_MODEL_CLASS[arch.task]
    cls = getattr(tasks, class_name, None)
    if cls is None:
        raise ModelBuildError(f"{arch.name} needs ultralytics.nn.tasks.{class_name}, which this ultralytics lacks; upgrade it")
    return cast("type[torch.nn.Module]", cls)


def _without_torchvision_weights(cfg: dict[str, Any]) -> bool:
    """Set the weights of every ``TorchVision`` layer to None (args: out, model, weights, ...); True if any."""
    changed = False
    for section in ("backbone", "head"):
        for layer in cfg.get(section) or []:
            if len(layer) > 3 and layer[2] == "TorchVision" and len(layer[3]) > 2 and layer[3][2]:
                layer[3][2] = None
                changed = True
    return changed


def resolve_yolo(arch: YoloArchitecture, request: Request) -> ResolvedModel:
    """Build ``arch`` from its yaml, without weights, and a ``1x3xSxS`` example image batch.

    A yaml that ultralytics would run code from is refused unless ``request.allow_unsafe_load``
    (:func:`graphprof.models.trust.check_yolo_yaml`).
    """
    device, allow_unsafe_load = request.device, request.allow_unsafe_load
    default = (1, 3, arch.image_size, arch.image_size)
    shape = effective_shape(default, request.input_shape, request.batch_size, layout="N,C,H,W", model=arch.name)
    try:
        cfg = _load_yaml(arch.path)
    except (OSError, ValueError) as exc:
        raise ModelBuildError(f"could not read {arch.path}: {exc}") from exc
    cfg["scale"] = arch.scale
    cfg["yaml_file"] = f"{arch.name}.yaml"
    scale_text = f" at scale {arch.scale!r}" if arch.scale else ""
    notes = [f"built from {arch.path}{scale_text}, without weights (random init)"]
    if _without_torchvision_weights(cfg):
        notes.append("its torchvision backbone is built without pretrained weights")
    tasks = _import_tasks()
    if allow_unsafe_load:
        notes.append("yaml fields evaluated by ultralytics as it chooses (--allow-unsafe-load)")
    else:
        check_yolo_yaml(cfg, str(arch.path), tasks)
    cls = _model_class(tasks, arch)

    def make() -> torch.nn.Module:
        restricted = contextlib.nullcontext() if allow_unsafe_load else restricted_build(tasks)
        with _quiet_ultralytics(), restricted:
            return cls(copy.deepcopy(cfg), verbose=False)

    model, build_notes = build_module(make, device, arch.name)
    model.eval()
    return ResolvedModel(
        name=arch.name, family="yolo", model=model, args=(random_tensor(shape, device),), kwargs={}, notes=(*notes, *build_notes)
    )


def _packaged_architecture_of(path: Path) -> YoloArchitecture | None:
    """For a bare checkpoint name (``yolov8n.pt``, no folder), the packaged yaml of the same architecture:
    the counts need no weights. A path with a folder names the user's own file, which is an error."""
    if path.parent != Path(".") or importlib.util.find_spec("ultralytics") is None:
        return None
    return yolo_architectures().get(path.stem.lower())


def missing_checkpoint(spec: str) -> DownloadUnavailableError:
    """The error for a ``.pt`` that is not on disk: graphprof never fetches weights."""
    path = Path(spec)
    stem = path.name[: -len(path.suffix)]
    message = f"{spec} is not on disk and graphprof never downloads weights; pass a local path (--model /path/to/{path.name})"
    if stem.lower() in yolo_architectures():
        message += f" or the architecture's yaml (--model {stem}.yaml)"
    return DownloadUnavailableError(message)


def _image_size_of(train_args: Any) -> tuple[int, int]:
    imgsz = train_args.get("imgsz", IMAGE_SIZE) if isinstance(train_args, dict) else IMAGE_SIZE
    if isinstance(imgsz, int):
        return (imgsz, imgsz)
    if isinstance(imgsz, (list, tuple)) and imgsz:
        return (int(imgsz[0]), int(imgsz[-1]))
    return (IMAGE_SIZE, IMAGE_SIZE)


def _checkpoint_path(spec: str) -> Path:
    """``spec`` as a readable file, or the error that says what it is instead (folder, link loop, missing)."""
    path = Path(spec)
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise ModelNotFoundError(f"{spec} is a symbolic link to {os.readlink(path)!r}, which does not exist") from None
        raise missing_checkpoint(spec) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ModelNotFoundError(f"{spec} is a symbolic link that loops back on itself") from None
        raise ModelBuildError(f"cannot read {spec}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise ModelNotFoundError(f"{spec} is a folder, not a checkpoint file")
    if not stat.S_ISREG(info.st_mode):
        raise ModelNotFoundError(f"{spec} is not a regular file")
    return path


def load_checkpoint(spec: str, request: Request) -> ResolvedModel:
    """Load a local ultralytics checkpoint (a dict holding ``"ema"``/``"model"``), or a pickled nn.Module.

    Read without running code from the file (see :mod:`graphprof.models.trust`) unless
    ``request.allow_unsafe_load``, which unpickles with ``weights_only=False``: only for files you trust.
    """
    input_shape, batch_size, device = request.input_shape, request.batch_size, request.device
    path = Path(spec)
    if not path.exists() and not path.is_symlink():
        arch = _packaged_architecture_of(path)
        if arch is not None:
            resolved = resolve_yolo(arch, dataclasses.replace(request, allow_unsafe_load=False))
            note = f"{spec} is not on disk (graphprof never downloads weights): built from the packaged {arch.name}.yaml"
            return dataclasses.replace(resolved, notes=(note, *resolved.notes))
    path = _checkpoint_path(spec)
    tasks = _import_tasks() if importlib.util.find_spec("ultralytics") is not None else None
    try:
        with _quiet_ultralytics():
            loaded, how = load_pickle(path, spec, allow_unsafe_load=request.allow_unsafe_load, tasks=tasks)
    except GraphprofError:
        raise
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "ultralytics":
            raise MissingDependencyError(f"{spec} is an ultralytics checkpoint: {INSTALL_HINT}") from exc
        raise ModelBuildError(f"could not load {spec}: {exc}") from exc
    except Exception as exc:
        raise ModelBuildError(f"could not load {spec}: {type(exc).__name__}: {exc}") from exc
    name = path.name
    notes = [f"loaded from {path}", *how]
    if isinstance(loaded, dict) and ("ema" in loaded or "model" in loaded):
        key = "ema" if loaded.get("ema") is not None else "model"
        model = loaded[key]
        if not isinstance(model, torch.nn.Module):
            raise ModelBuildError(f"{spec}[{key!r}] is {a_type(model)}, not a torch.nn.Module")
        notes[0] += f" ({key} weights)"
        family = "yolo"
        height, width = _image_size_of(loaded.get("train_args"))
        default: tuple[int, ...] | None = (1, 3, height, width)
    elif isinstance(loaded, torch.nn.Module):
        model, family, default = loaded, "user", None
    else:
        raise ModelBuildError(
            f"{spec} holds {a_type(loaded)} (a state dict?), not a model; pass a factory instead (--model package.module:make_model)"
        )
    if default is None:
        if input_shape is None:
            raise InvalidInputError(f"{spec} holds a bare nn.Module with no default input; pass --input-shape (input_shape=...)")
        shape = effective_shape(input_shape, input_shape, batch_size, layout=None, model=name)
    else:
        shape = effective_shape(default, input_shape, batch_size, layout="N,C,H,W", model=name)
    model = model.float().eval()
    if device.type != "cpu":
        model = model.to(device)
        notes.append(f"loaded on CPU, then moved to {device.type}")
    return ResolvedModel(name=name, family=family, model=model, args=(random_tensor(shape, device),), kwargs={}, notes=tuple(notes))


#: ultralytics' YOLO models. The detect head reads its ``stride`` buffer with ``.item()`` (FakeTensors made
#: from real tensors keep such small constants, meta tensors do not): so YOLO is never built on the meta
#: device. It builds its anchors on the first forward, which the dry run does as well as a real one (the
#: same counts, module by module, on yolov8n; the anchors the dry run leaves on the module are put back by
#: :func:`graphprof.capture.methods.preserved_state`): no warm-up by default (``--capture-warmup always`` gives
#: seed 001's real forward first).
#:
#: Dynamo export is not tried by ``auto`` (measured on yolov8n, torch 2.14, 2 CPU cores at load 0.6-1.1):
#: ``torch._dynamo.export`` takes 6 s, 3-4.5 s with ``assume_static_by_default=True`` (half of it builds
#: the guards an export keeps on every parameter's size, which no option turns off), against 0.9 s for
#: the whole eager profile; the counts are the same, module by module (281 modules, params and MACs,
#: ``tests/seeds/test_seed001.py``). ``torch.export.export(strict=False)`` takes 0.8 s, but its graph is
#: aten-level (``aten.split.Tensor`` nodes, a ``_guards_fn``) and needs its own naming in the run loop.
FAMILY = Family(
    "yolo",
    needs_real_values=True,
    export_warm_up="Dynamo's export of the detect head needs the anchors of a first forward (their shape depends on values)",
    dynamo_skip=(
        "Dynamo export of YOLO takes about 6 s on a CPU (3 s with static shapes), against 1 s for the whole "
        "eager profile, which gives the same counts and true shapes per module"
    ),
    library="ultralytics.",
    image_input=True,
)


def _resolve_yaml(spec: str, request: Request) -> ResolvedModel:
    arch = find_yolo_architecture(spec)
    if arch is None:
        raise unknown_model(spec, [f"{name}.yaml" for name in yolo_architectures()])
    return resolve_yolo(arch, request)


def _resolve_by_name(spec: str, request: Request) -> ResolvedModel | None:
    arch = find_yolo_architecture(spec)
    return None if arch is None else resolve_yolo(arch, request)


#: ``path/to/best.pt``: an ultralytics checkpoint (family yolo) or a pickled module (user), known once read.
CHECKPOINT = Source(
    "checkpoint",
    claims=lambda spec: spec.lower().endswith(CHECKPOINT_SUFFIXES),
    resolve=load_checkpoint,
    family_of=lambda spec: None,
    families=(FAMILY,),
)
#: ``yolov8n-seg.yaml``, ``my.yaml``: a YOLO yaml, packaged with ultralytics or local.
YAML = Source("yolo-yaml", claims=yaml_suffix, resolve=_resolve_yaml, family_of=lambda spec: FAMILY.name, families=(FAMILY,))
#: ``yolov8n``, ``yolo11s-pose``: a packaged YOLO yaml by name.
BY_NAME = Source(
    "yolo",
    claims=lambda spec: find_yolo_architecture(spec) is not None,
    resolve=_resolve_by_name,
    family_of=lambda spec: FAMILY.name,
    families=(FAMILY,),
    list_models=list_yolo,
)
