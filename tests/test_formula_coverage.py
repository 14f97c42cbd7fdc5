"""Every aten op a representative model zoo reaches at dispatch is counted or known to cost nothing.

Each model runs under ``FakeTensorMode`` (nothing real is computed) inside a dispatch mode that hands
every call to :func:`graphprof.formulas.op_cost`, so this also runs every formula on real argument
layouts. Eval runs use ``torch.no_grad()`` (which lets nn.MultiheadAttention take its fused
``_native_multi_head_attention`` path); train runs take gradients of the parameters.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from graphprof.base.choices import OpStatus
from graphprof.formulas import op_cost, op_status

aten = torch.ops.aten


class _CostEveryOp(TorchDispatchMode):
    """Runs each aten call, then costs it; remembers the ops with no formula and every op seen."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[torch._ops.OpOverload] = set()
        self.unsupported: dict[str, int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.seen.add(func)
        if op_cost(func, args, kwargs, out) is None:
            assert op_status(func) is OpStatus.UNSUPPORTED
            self.unsupported[str(func)] += 1
        return out


def _logits(out: Any) -> torch.Tensor:
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, dict):
        return sum(v.float().sum() for v in out.values() if isinstance(v, torch.Tensor))
    if isinstance(out, (tuple, list)):
        return _logits(out[0])
    return out


def _run(model: torch.nn.Module, inputs: tuple[Any, ...], train: bool) -> _CostEveryOp:
    model.train(train)
    recorder = _CostEveryOp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with FakeTensorMode(allow_non_fake_inputs=True), recorder:
            if train:
                params = [p for p in model.parameters() if p.requires_grad]
                loss = _logits(model(*inputs)).float().sum()
                torch.autograd.grad(loss, params, allow_unused=True)
            else:
                with torch.no_grad():
                    model(*inputs)
    return recorder


def _torchvision(name: str, **kwargs: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        from torchvision.models import get_model

        return get_model(name, weights=None, **kwargs)

    return build


_YOLO_SIZE = 128


def _yolov8n() -> torch.nn.Module:
    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel("yolov8n.yaml", verbose=False).eval()
    with torch.no_grad():
        # a real run at the same size first: the detect head builds its anchors lazily, from data
        model(torch.zeros(1, 3, _YOLO_SIZE, _YOLO_SIZE))
    return model


def _tiny_llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def _image(size: int = 224, batch: int = 1) -> tuple[torch.Tensor]:
    return (torch.zeros(batch, 3, size, size),)


_NO_AUX = {"aux_logits": False, "init_weights": False}

# name -> (builder, inputs, train?)
CASES: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], tuple[Any, ...]], bool]] = {
    "resnet18": (_torchvision("resnet18"), _image, False),
    "resnet18[train]": (_torchvision("resnet18"), lambda: _image(batch=2), True),
    "mobilenet_v3_small": (_torchvision("mobilenet_v3_small"), _image, False),
    "mobilenet_v3_small[train]": (_torchvision("mobilenet_v3_small"), lambda: _image(batch=2), True),
    "efficientnet_b0": (_torchvision("efficientnet_b0"), _image, False),
    "efficientnet_b0[train]": (_torchvision("efficientnet_b0"), lambda: _image(batch=2), True),
    "vit_b_16": (_torchvision("vit_b_16", image_size=112), lambda: _image(112), False),
    "vit_b_16[train]": (_torchvision("vit_b_16", image_size=112), lambda: _image(112, batch=2), True),
    "swin_t": (_torchvision("swin_t"), _image, False),
    "swin_t[train]": (_torchvision("swin_t"), lambda: _image(batch=2), True),
    "convnext_tiny": (_torchvision("convnext_tiny"), _image, False),
    "regnet_x_400mf": (_torchvision("regnet_x_400mf"), _image, False),
    "densenet121": (_torchvision("densenet121"), _image, False),
    "densenet121[train]": (_torchvision("densenet121"), lambda: _image(batch=2), True),
    "squeezenet1_0": (_torchvision("squeezenet1_0"), _image, False),
    "inception_v3": (_torchvision("inception_v3", **_NO_AUX), lambda: _image(299), False),
    "googlenet": (_torchvision("googlenet", **_NO_AUX), _image, False),
    "shufflenet_v2_x0_5": (_torchvision("shufflenet_v2_x0_5"), _image, False),
    "mnasnet0_5": (_torchvision("mnasnet0_5"), _image, False),
    "maxvit_t": (_torchvision("maxvit_t"), _image, False),
    "maxvit_t[train]": (_torchvision("maxvit_t"), lambda: _image(batch=2), True),
    "deeplabv3_mobilenet_v3_large[train]": (
        _torchvision("deeplabv3_mobilenet_v3_large", weights_backbone=None, aux_loss=False),
        lambda: _image(batch=2),
        True,
    ),
    "r3d_18": (_torchvision("r3d_18"), lambda: (torch.zeros(1, 3, 8, 112, 112),), False),
    "yolov8n": (_yolov8n, lambda: _image(_YOLO_SIZE), False),
    "yolov8n[train]": (_yolov8n, lambda: _image(_YOLO_SIZE), True),
    "llama": (_tiny_llama, lambda: (torch.zeros(1, 32, dtype=torch.long),), False),
    "llama[train]": (_tiny_llama, lambda: (torch.zeros(2, 32, dtype=torch.long),), True),
}

_OPTIONAL = {"yolov8n": "ultralytics", "llama": "transformers"}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.slow  # zoo-wide: a model of each family in both modes, about 45 s
def test_every_op_is_counted_or_zero_cost(case: str) -> None:
    base = case.split("[")[0]
    if base in _OPTIONAL:
        pytest.importorskip(_OPTIONAL[base])
    build, inputs, train = CASES[case]
    torch.manual_seed(0)
    recorder = _run(build(), inputs(), train)
    assert recorder.seen, f"{case}: no aten op was recorded"
    assert not recorder.unsupported, f"{case}: ops with no formula: {dict(recorder.unsupported)}"


def test_multihead_attention_fast_path_is_reached_under_fake_tensors() -> None:
    # vit's encoder calls nn.MultiheadAttention(x, x, x, need_weights=False): in eval under no_grad its
    # conditions hold even for FakeTensors, and the whole block is one fused aten call
    from torchvision.models import get_model

    recorder = _run(get_model("vit_b_32", weights=None, image_size=64), _image(64), train=False)
    assert aten._native_multi_head_attention.default in recorder.seen
    assert aten._scaled_dot_product_flash_attention_for_cpu.default not in recorder.seen


@pytest.mark.slow  # over 1.5 s: the full suite runs it, the fast tier does not
def test_sdpa_reaches_the_cpu_flash_kernel_with_gqa() -> None:
    pytest.importorskip("transformers")
    recorder = _run(_tiny_llama(), (torch.zeros(1, 8, dtype=torch.long),), train=True)
    assert aten._scaled_dot_product_flash_attention_for_cpu.default in recorder.seen
    assert aten._scaled_dot_product_flash_attention_for_cpu_backward.default in recorder.seen
