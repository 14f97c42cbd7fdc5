"""Tests for graphprof.base.names: name abbreviation and module paths of graph nodes."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import fx, nn

from graphprof.base.names import abbreviate, module_path, module_type, normalize_path
from graphprof.errors import InvalidInputError

# --- abbreviate: hand-written cases -------------------------------------------------------------

SEED_EXAMPLES = [
    ("layer1.0.conv1", "layer1.0.conv1"),
    ("g__model___model_0_conv", "model.0.conv"),
    # The seed prints model.22 here; that is a typo. The name is the mangled
    # getattr(getattr(L['yolo_model'].model.23.cv3.0, '0'), '0').conv, a YOLO11 Detect head
    # (model.23; yolov8's Detect is model.22 and has no cv3.0.0.0). An index is never rewritten.
    ("getattr_getattr_L__yolo_model___model_23_cv3_0___0_____0___conv", "model.23.cv3.0[0][0].conv"),
]

CASES = [
    # FX names: unchanged, including FX's own numbering of repeated names.
    ("conv1", "conv1"),
    ("relu_1", "relu_1"),
    ("getattr_1", "getattr_1"),
    ("add", "add"),
    # symbolic_trace names a call_module node by its target with dots replaced.
    ("layer1_0_conv1", "layer1.0.conv1"),
    # A trailing number may be FX's numbering, so it is kept (documented limit).
    ("layer1_0_downsample_0", "layer1.0.downsample_0"),
    # Dynamo get_attr names (torch 2.14), with the parameter or buffer as the last component.
    ("l__self___conv1_weight", "conv1.weight"),
    ("l__self___layer1_0_downsample_0_weight", "layer1.0.downsample.0.weight"),
    ("l__self___layer2_1_bn1_running_mean", "layer2.1.bn1.running_mean"),
    ("L__self___model_22_cv3_0_2_bias", "model.22.cv3.0.2.bias"),
    # Real underscores survive: no number component next to them.
    ("L__self___blocks_0_conv_dw", "blocks.0.conv_dw"),
    ("l__self___downsample", "downsample"),
    ("l__self___self_attn_q_proj", "self_attn_q_proj"),
    # Older Dynamo spellings.
    ("self_layer1_0_conv1", "layer1.0.conv1"),
    ("L__self___layer1_0__conv1", "layer1.0.conv1"),
    ("l_x_", "x"),
    # nn_module_stack paths, old and new.
    ("L['self'].layer1.0.conv1", "layer1.0.conv1"),
    ("L['self'].layer1[0].conv1", "layer1[0].conv1"),
    ("getattr(L['self'].model, '23').cv3", "model[23].cv3"),
    ("L['self'].model._modules['22'].cv2", "model[22].cv2"),
    ("G['model'].model.0.conv", "model.0.conv"),
    # Repeated leading components fold, index components never do.
    ("model.model.0.conv", "model.0.conv"),
    ("model.model.model.0.conv", "model.0.conv"),
    ("0.0.conv", "0.0.conv"),
]


@pytest.mark.parametrize(("name", "expected"), SEED_EXAMPLES + CASES)
def test_abbreviate(name: str, expected: str) -> None:
    assert abbreviate(name) == expected


@pytest.mark.parametrize("name", [name for name, _ in SEED_EXAMPLES + CASES])
def test_abbreviate_is_idempotent(name: str) -> None:
    once = abbreviate(name)
    assert abbreviate(once) == once
    short = abbreviate(name, max_len=9)
    assert abbreviate(short, max_len=9) == short


def test_truncation_keeps_start_and_end() -> None:
    name = "L__self___encoder_layers_11_self_attention_output_dense_weight"
    full = abbreviate(name, max_len=1000)
    assert full == "encoder_layers.11.self_attention_output_dense.weight"
    short = abbreviate(name, max_len=30)
    # 30 - len("...") = 27 kept: 13 from the start, 14 from the end.
    assert short == "encoder_layer...t_dense.weight"
    assert len(short) == 30
    assert short.startswith(full[:13])
    assert short.endswith(full[-14:])


@pytest.mark.parametrize("max_len", [5, 6, 7, 16, 48, 51])
def test_truncation_respects_max_len(max_len: int) -> None:
    name = "L__self___encoder_layers_11_self_attention_output_dense_weight"  # 52 once decoded
    short = abbreviate(name, max_len=max_len)
    assert len(short) == max_len
    assert short.startswith("e")
    assert "..." in short
    assert short.endswith("t")


def test_short_names_are_not_truncated() -> None:
    assert abbreviate("model.0.conv", max_len=12) == "model.0.conv"


def test_max_len_below_five_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="max_len"):
        abbreviate("model.0.conv", max_len=4)


# --- normalize_path -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("L['self'].layer1.0.conv1", "layer1.0.conv1"),
        ("L['self'].layer1[0].conv1", "layer1.0.conv1"),
        ("getattr(L['self'].model, '23')", "model.23"),
        ("getattr(getattr(L['self'].model, '23').cv3[0], '0')", "model.23.cv3.0.0"),
        ("L['self']._modules['layer1']._modules['0']", "layer1.0"),
        ("L__self___layer1_0_conv1", "layer1.0.conv1"),
        ("getattr_getattr_L__yolo_model___model_23_cv3_0___0_____0___conv", "model.23.cv3.0.0.0.conv"),
        ("layer1.0.conv1", "layer1.0.conv1"),
        ("model.model.0", "model.model.0"),  # a real path is never folded
        ("L['self'][0].conv", "0.conv"),  # the root is a Sequential
        ("L['self']", ""),
        ("", ""),
    ],
)
def test_normalize_path(path: str, expected: str) -> None:
    assert normalize_path(path) == expected


@pytest.mark.slow  # about 6 s
def test_seed_example_decodes_to_a_yolo11_module() -> None:
    tasks = pytest.importorskip("ultralytics.nn.tasks")
    modules = dict(tasks.DetectionModel("yolo11n.yaml", verbose=False).named_modules())
    name = "getattr_getattr_L__yolo_model___model_23_cv3_0___0_____0___conv"
    assert normalize_path(name) in modules
    assert "model.22.cv3.0.0.0.conv" not in modules  # the seed's spelling names nothing


# --- module_path and module_type on real graphs -----------------------------------------------------


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv_dw(x)) + x


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 1)
        self.blocks = nn.Sequential(_Block(), _Block())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x)).mean()


def test_module_path_symbolic_trace() -> None:
    gm = fx.symbolic_trace(_Net())
    found = {n.name: module_path(n) for n in gm.graph.nodes}
    assert found["x"] is None
    assert found["stem"] == "stem"
    assert found["blocks_0_conv_dw"] == "blocks.0.conv_dw"
    assert found["add_1"] == "blocks.1"  # the residual add of the second block
    assert found["mean"] is None  # runs in the root module itself
    assert found["output"] is None


def test_module_type_symbolic_trace() -> None:
    net = _Net()
    gm = fx.symbolic_trace(net)
    found = {n.name: module_type(n, net) for n in gm.graph.nodes}
    assert found["blocks_0_conv_dw"] == "Conv2d"
    assert found["add"] == "_Block"
    assert found["x"] is None


def test_module_path_torch_export() -> None:
    net = _Net().eval()
    program = torch.export.export(net, (torch.randn(1, 3, 8, 8),))
    calls = [n for n in program.graph.nodes if n.op == "call_function"]
    paths = [module_path(n) for n in calls]
    # torch.export lists the root as path "": ops of the root belong to no submodule.
    assert paths == ["stem", "blocks.0.conv_dw", "blocks.0.act", "blocks.0", "blocks.1.conv_dw", "blocks.1.act", "blocks.1", None]
    assert [module_type(n) for n in calls][:4] == ["Conv2d", "Conv2d", "ReLU", "_Block"]


def _dynamo_export(model: nn.Module, x: torch.Tensor) -> fx.GraphModule:
    """Warm up, then capture with Dynamo, quietly, leaving Dynamo's caches as they were."""
    quiet = [logging.getLogger(n) for n in ("torch._dynamo", "torch.fx.experimental.symbolic_shapes")]
    levels = [logger.level for logger in quiet]
    try:
        for logger in quiet:
            logger.setLevel(logging.ERROR)
        with torch.no_grad():
            model(x)
        return torch._dynamo.export(model)(x).graph_module
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)
        torch._dynamo.reset()


@pytest.fixture(scope="module")
def resnet18_graph() -> tuple[nn.Module, fx.GraphModule]:
    models = pytest.importorskip("torchvision.models")
    model = models.resnet18().eval()
    return model, _dynamo_export(model, torch.randn(1, 3, 224, 224))


@pytest.fixture(scope="module")
def yolov8n_graph() -> tuple[nn.Module, fx.GraphModule]:
    tasks = pytest.importorskip("ultralytics.nn.tasks")
    model = tasks.DetectionModel("yolov8n.yaml", verbose=False).eval()
    return model, _dynamo_export(model, torch.randn(1, 3, 640, 640))


def _check_paths(model: nn.Module, graph: fx.GraphModule) -> set[str]:
    """Every call_function path names a module of ``model``, of the class the graph recorded."""
    # remove_duplicate=False: ultralytics shares one SiLU (Conv.default_act) across every Conv, so the
    # default named_modules() lists it only as model.0.act, while model.1.act is just as real.
    modules = dict(model.named_modules(remove_duplicate=False))
    seen = set()
    for node in graph.graph.nodes:
        if node.op != "call_function":
            continue
        path = module_path(node)
        if path is None:
            continue
        assert path in modules, f"{node.name}: {path!r} is not a module of the model"
        assert module_type(node) == type(modules[path]).__name__, node.name
        seen.add(path)
    return seen


@pytest.mark.slow  # a Dynamo export, about 8 s
def test_module_path_resnet18_dynamo(resnet18_graph: tuple[nn.Module, fx.GraphModule]) -> None:
    model, graph = resnet18_graph
    seen = _check_paths(model, graph)
    assert {"conv1", "layer1.0.conv1", "layer4.1.bn2", "layer2.0.downsample.0", "fc"} <= seen
    names = {abbreviate(n.name) for n in graph.graph.nodes if n.op == "get_attr"}
    assert {"conv1.weight", "layer2.0.downsample.0.weight", "layer4.1.bn2.running_var"} <= names


@pytest.mark.slow  # a Dynamo export of YOLO, about 40 s
def test_module_path_yolov8n_dynamo(yolov8n_graph: tuple[nn.Module, fx.GraphModule]) -> None:
    model, graph = yolov8n_graph
    seen = _check_paths(model, graph)
    # A DetectionModel's layers really are model.N: the prefix is kept.
    assert {"model.0.conv", "model.1.act", "model.22.cv3.0.2", "model.22.dfl.conv"} <= seen
    names = {abbreviate(n.name, max_len=100) for n in graph.graph.nodes if n.op == "get_attr"}
    assert {"model.0.conv.weight", "model.22.cv3.0.0.bn.running_mean"} <= names
