"""torchvision's model zoo, built without weights in the architecture of each model's DEFAULT weights.

Every name of ``torchvision.models.list_models()`` resolves, quantized ones included under
torchvision's own names (``quantized_resnet18``, distinct from ``resnet18``). The model is the one
``torchvision.models.get_model(name, weights="DEFAULT")`` returns, less the weights' values: the
builder gets ``weights=None`` plus the arguments that torchvision sets itself when it loads weights
(its ``_ovewrite_named_param`` calls), read from the weights' ``meta``, so that
``sum(p.numel() for p in model.parameters()) == weights.meta["num_params"]``. Reading ``meta`` and
the weights' transforms downloads nothing.

Default inputs are the published weights' evaluation size, in the form the model takes:

=============== ==================================== ===================================================
family          input                                from
=============== ==================================== ===================================================
classification  one batch ``1x3xHxW``                ``weights.transforms`` crop size (224, 299, 518...)
quantized       one batch ``1x3xHxW``                same
segmentation    one batch ``1x3xHxW``                ``weights.transforms`` resize size (520)
detection       a list of 1 image ``3xSxS``          the model's own resize size ``S`` (800; 320; 300),
                                                     which its transform leaves unchanged
video           one clip ``1x3xTxHxW``               crop size; ``T`` = ``clip_len`` of the weights'
                                                     evaluation, from ``meta["_docs"]`` (16, 32, 128)
optical_flow    two images ``1x3x520x960``           torchvision's RAFT examples (H, W multiples of 8)
=============== ==================================== ===================================================
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torchvision
from torchvision.ops.misc import FrozenBatchNorm2d

from graphprof.errors import InvalidInputError
from graphprof.models.base import ModelInfo, ResolvedModel, effective_shape, format_shape, random_tensor
from graphprof.models.device import build_module
from graphprof.models.family import Family, Request, Source

__all__ = ["FAMILIES", "SOURCE", "torchvision_families", "list_torchvision", "resolve_torchvision", "published_kwargs"]

_FAMILY_MODULES: tuple[tuple[str, str], ...] = (
    ("classification", "torchvision.models"),
    ("quantized", "torchvision.models.quantization"),
    ("detection", "torchvision.models.detection"),
    ("segmentation", "torchvision.models.segmentation"),
    ("video", "torchvision.models.video"),
    ("optical_flow", "torchvision.models.optical_flow"),
)

# The resize size of each detection model's GeneralizedRCNNTransform (``model.transform.min_size[-1]``,
# checked in the tests): a square image of this side passes through the transform unchanged.
_DETECTION_SIZE_DEFAULT = 800
_DETECTION_SIZE = {"fasterrcnn_mobilenet_v3_large_320_fpn": 320, "ssd300_vgg16": 300, "ssdlite320_mobilenet_v3_large": 320}

# torchvision's RAFT examples resize frame pairs to 520x960; RAFT needs H and W divisible by 8.
_OPTICAL_FLOW_SIZE = (520, 960)

# A video clip's length when the weights' docs give no ``clip_len``.
_CLIP_LEN_DEFAULT = 16

# Builders whose backbone uses FrozenBatchNorm2d when weights are given
# (``norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d``); its weight and bias are buffers.
_FROZEN_BN_WHEN_TRAINED = frozenset(
    {
        "fasterrcnn_mobilenet_v3_large_320_fpn",
        "fasterrcnn_mobilenet_v3_large_fpn",
        "fasterrcnn_resnet50_fpn",
        "fcos_resnet50_fpn",
        "keypointrcnn_resnet50_fpn",
        "maskrcnn_resnet50_fpn",
        "retinanet_resnet50_fpn",
    }
)


@dataclass(frozen=True)
class _InputPlan:
    """The default input of one model: its shape, the names of its dims, and the form the model takes."""

    shape: tuple[int, ...]
    layout: str
    form: str  # "batch": model(x); "images": model([img, ...]); "pair": model(img1, img2)

    def describe(self, shape: Sequence[int]) -> str:
        if self.form == "images":
            count = shape[0]
            return f"list of {count} image{'s' if count != 1 else ''} {format_shape(shape[1:])}"
        if self.form == "pair":
            return f"2 x {format_shape(shape)}"
        return format_shape(shape)

    def make(self, shape: Sequence[int], device: torch.device) -> tuple[Any, ...]:
        if self.form == "images":
            return ([random_tensor(shape[1:], device, offset=i) for i in range(shape[0])],)
        if self.form == "pair":
            return (random_tensor(shape, device), random_tensor(shape, device, offset=1))
        return (random_tensor(shape, device),)


@functools.cache
def torchvision_families() -> dict[str, str]:
    """Every name of ``torchvision.models.list_models()`` -> its family."""
    families: dict[str, str] = {}
    for family, module_name in _FAMILY_MODULES:
        for name in torchvision.models.list_models(module=importlib.import_module(module_name)):
            families[name] = family
    return families


def _default_weights(name: str) -> Any:
    return torchvision.models.get_model_weights(name).DEFAULT


def _image_size(weights: Any, key: str) -> tuple[int, int] | None:
    """``crop_size``/``resize_size`` of the weights' inference transforms as (H, W), if it has one."""
    size = getattr(weights.transforms, "keywords", {}).get(key)
    if size is None:
        return None
    if isinstance(size, int):
        return (size, size)
    size = tuple(size)
    return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])


def _clip_len(meta: dict[str, Any]) -> int:
    """Frames per clip in the weights' evaluation (``clip_len=16`` in ``meta["_docs"]``)."""
    found = re.search(r"clip_len=(\d+)", meta.get("_docs", ""))
    if found:
        return int(found.group(1))
    return int(meta.get("min_temporal_size") or _CLIP_LEN_DEFAULT)


def _input_plan(name: str, family: str) -> _InputPlan:
    weights = _default_weights(name)
    if family == "detection":
        side = _DETECTION_SIZE.get(name, _DETECTION_SIZE_DEFAULT)
        return _InputPlan((1, 3, side, side), "N,C,H,W", "images")
    if family == "optical_flow":
        return _InputPlan((1, 3, *_OPTICAL_FLOW_SIZE), "N,C,H,W", "pair")
    if family == "video":
        height, width = _image_size(weights, "crop_size") or (112, 112)
        return _InputPlan((1, 3, _clip_len(weights.meta), height, width), "N,C,T,H,W", "batch")
    key = "resize_size" if family == "segmentation" else "crop_size"
    height, width = _image_size(weights, key) or _image_size(weights, "crop_size") or (224, 224)
    return _InputPlan((1, 3, height, width), "N,C,H,W", "batch")


@functools.cache
def list_torchvision() -> tuple[ModelInfo, ...]:
    """One :class:`ModelInfo` per torchvision model; builds nothing."""
    infos = []
    for name, family in torchvision_families().items():
        plan = _input_plan(name, family)
        infos.append(ModelInfo(name=name, family=family, default_input=plan.describe(plan.shape)))
    return tuple(infos)


def published_kwargs(name: str) -> dict[str, Any]:
    """Builder arguments, besides ``weights=None``, that give the architecture of the DEFAULT weights.

    These are what torchvision's builders set themselves when weights are passed, read from ``meta``:

    >>> published_kwargs("vit_h_14")["image_size"]  # its position embedding is sized for 518px
    518
    """
    family = torchvision_families()[name]
    builder = torchvision.models.get_model_builder(name)
    weights = _default_weights(name)
    meta = weights.meta
    params = inspect.signature(builder).parameters
    module = builder.__module__
    kwargs: dict[str, Any] = {}
    if "weights_backbone" in params:
        kwargs["weights_backbone"] = None  # its default would download the backbone's weights
    if meta.get("categories"):
        kwargs["num_classes"] = len(meta["categories"])
    if meta.get("keypoint_names"):
        kwargs["num_keypoints"] = len(meta["keypoint_names"])
    if module.endswith(".vision_transformer"):
        kwargs["image_size"] = meta["min_size"][0]
    if module.endswith(".maxvit"):
        kwargs["input_size"] = meta["min_size"]
    if module.endswith((".googlenet", ".inception")):
        # torchvision builds these with aux heads to load the checkpoint, then removes them
        kwargs.update(aux_logits=False, transform_input=True, init_weights=False)
    if family == "segmentation" and "aux_loss" in params:
        kwargs["aux_loss"] = True  # the published checkpoints keep the aux classifier, and eval runs it
    if family == "quantized":
        kwargs.update(quantize=True, backend=meta["backend"])
    return kwargs


def _freeze_batch_norm(module: torch.nn.Module) -> None:
    """Replace every BatchNorm2d under ``module`` by a FrozenBatchNorm2d, as the published backbones have."""
    for child_name, child in module.named_children():
        if isinstance(child, torch.nn.BatchNorm2d):
            setattr(module, child_name, FrozenBatchNorm2d(child.num_features, eps=child.eps))
        else:
            _freeze_batch_norm(child)


def _notes(name: str, family: str, kwargs: dict[str, Any]) -> list[str]:
    weights = _default_weights(name)
    notes = [f"built without weights (random init), in the architecture of {weights}"]
    if kwargs.get("aux_logits") is False:
        notes.append("aux classifiers removed, as torchvision does after loading the published weights")
    if kwargs.get("aux_loss"):
        notes.append("aux classifier kept, as in the published weights: the output has 'out' and 'aux'")
    if name in _FROZEN_BN_WHEN_TRAINED:
        notes.append("backbone BatchNorm2d frozen (FrozenBatchNorm2d), as in the published weights")
    if family == "quantized":
        backend = kwargs["backend"]
        notes.append(
            f"quantized for the {backend} engine, observers calibrated on random data; sets torch.backends.quantized.engine = {backend!r}"
        )
    return notes


def at_most_proposals(model: torch.nn.Module, proposals: int | None) -> list[str]:
    """Make a two-stage detector (Faster / Mask / Keypoint R-CNN) run its heads on its maximum.

    How many region proposals survive the RPN's NMS, and how many detections its score threshold and
    NMS keep for the mask / keypoint heads, depends on the weights and the image: with random weights
    few detections pass the 0.05 score threshold, and the mask head would cost nothing. To count the
    worst case, which is what the model is built for, both NMS thresholds are lifted to 1.0 and the
    score threshold to 0.0: the box head then runs on ``post_nms_top_n`` proposals per image
    (``proposals`` replaces it) and the mask / keypoint heads on ``detections_per_img``, less the
    zero-size boxes torchvision always removes (random weights can produce some). Returns the
    notes saying so; a model that is not a two-stage detector is left alone (no notes).
    """
    rpn, roi_heads = getattr(model, "rpn", None), getattr(model, "roi_heads", None)
    if rpn is None or roi_heads is None or not hasattr(rpn, "_post_nms_top_n"):
        return []
    default = rpn._post_nms_top_n["testing"]
    count = default if proposals is None else proposals
    rpn._post_nms_top_n = {**rpn._post_nms_top_n, "testing": count}
    rpn._pre_nms_top_n = {**rpn._pre_nms_top_n, "testing": max(count, rpn._pre_nms_top_n["testing"])}
    rpn.nms_thresh = 1.0
    roi_heads.score_thresh, roi_heads.nms_thresh = 0.0, 1.0
    detections = min(roi_heads.detections_per_img, count)
    source = "the model's maximum, rpn post_nms_top_n_test" if proposals is None else f"set by proposals={count}"
    note = (
        f"two-stage detector: the box head runs on up to {count} proposals per image ({source}), the later heads "
        f"on up to {detections} detections (box_detections_per_img); NMS and score thresholds are lifted so that "
        "all survive but degenerate (zero-size) boxes, which random weights can produce: the roi_heads rows show "
        "the counts used; trained weights on a real image often keep fewer; set it with proposals= / --proposals"
    )
    return [note]


def resolve_torchvision(
    name: str, *, input_shape: Sequence[int] | None, batch_size: int | None, device: torch.device, proposals: int | None = None
) -> ResolvedModel:
    """Build torchvision model ``name`` (a name of :func:`torchvision_families`) and its example input.

    ``proposals`` sets a two-stage detector's proposal count (see :func:`at_most_proposals`)."""
    family = torchvision_families()[name]
    plan = _input_plan(name, family)
    shape = effective_shape(plan.shape, input_shape, batch_size, layout=plan.layout, model=name)
    kwargs = published_kwargs(name)
    builder = torchvision.models.get_model_builder(name)
    notes = _notes(name, family, kwargs)

    def make() -> torch.nn.Module:
        model = builder(weights=None, **kwargs)
        if name in _FROZEN_BN_WHEN_TRAINED:
            _freeze_batch_norm(model.backbone)
        return cast(torch.nn.Module, model)

    if family == "quantized":
        if device.type != "cpu":
            notes.append(f"quantized models run on CPU only; device {device.type!r} ignored")
            device = torch.device("cpu")
        make = _quietly(make)
    model, build_notes = build_module(make, device, name)
    model.eval()
    proposal_notes = at_most_proposals(model, proposals)
    if proposals is not None and not proposal_notes:
        raise InvalidInputError(f"proposals applies to two-stage detectors (R-CNN), not to {name}")
    notes.extend(proposal_notes)
    if plan.form == "images" and input_shape is None and batch_size is None:
        notes.append(f"input: 1 image {format_shape(shape[1:])}, the model's own resize size")
    return ResolvedModel(name=name, family=family, model=model, args=plan.make(shape, device), kwargs={}, notes=(*notes, *build_notes))


def _quietly(make: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
    """Silence the warnings of eager-mode quantization (deprecations, unused observers) the user cannot act on."""

    def quiet_make() -> torch.nn.Module:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return make()

    return quiet_make


#: torchvision's families, as :data:`_FAMILY_MODULES` lists them; every one takes images (or frames).
FAMILIES = (
    Family("classification", image_input=True),
    Family("quantized", image_input=True),
    Family(
        "detection",
        needs_real_values=True,  # post-processing (nonzero, nms) has data-dependent shapes: run for real
        dynamo_skip="torchvision's detectors have data-dependent box counts, on which Dynamo export fails after tens of seconds",
        library="torchvision.models.detection.",
        image_input=True,
    ),
    Family("segmentation", image_input=True),
    Family("video", image_input=True),
    Family(
        "optical_flow",
        image_input=True,
        # measured on raft_small at its defaults (torch 2.14, 2 CPU cores, load 0.9): a specialised export works
        # where a symbolic one fails, but it unrolls the refinement loop: 9.4 s against 0.9 s eager, same MACs
        dynamo_skip="RAFT's Dynamo export unrolls its refinement loop (9 s, against under 1 s for the whole eager profile, with the same counts)",
    ),
)


def _resolve(spec: str, request: Request) -> ResolvedModel:
    return resolve_torchvision(spec.lower(), **request.shape_options, proposals=request.proposals)


#: ``resnet18``, ``quantized_resnet18``, ``fasterrcnn_resnet50_fpn``: any torchvision name, case-insensitive.
SOURCE = Source(
    "torchvision",
    claims=lambda spec: spec.lower() in torchvision_families(),
    resolve=_resolve,
    family_of=lambda spec: torchvision_families().get(spec.lower()),
    families=FAMILIES,
    list_models=list_torchvision,
    takes_proposals=True,
)
