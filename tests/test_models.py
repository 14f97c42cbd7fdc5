"""Model resolution: listing, published architectures, default inputs, overrides, errors, no downloads."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torchvision
from toys import TINY_MODULE

from graphprof.errors import DownloadUnavailableError, InvalidInputError, ModelBuildError, ModelNotFoundError
from graphprof.models import ModelInfo, ResolvedModel, list_models, resolve_model
from graphprof.models.torchvision_zoo import published_kwargs, torchvision_families
from graphprof.models.yolo import _ultralytics_models_dir, yolo_architectures

ROOT = Path(__file__).resolve().parents[1]
TORCHVISION_NAMES = torchvision.models.list_models()
FLOAT_TORCHVISION = [n for n in TORCHVISION_NAMES if torchvision_families()[n] != "quantized"]
QUANTIZED = [n for n in TORCHVISION_NAMES if torchvision_families()[n] == "quantized"]
HAS_ULTRALYTICS = _ultralytics_models_dir() is not None
needs_ultralytics = pytest.mark.skipif(not HAS_ULTRALYTICS, reason="ultralytics is not installed")


def _published(name: str) -> dict:
    return torchvision.models.get_model_weights(name).DEFAULT.meta


def _describe(resolved: ResolvedModel) -> str:
    """The default_input text that list_models gives, recomputed from the tensors resolve_model made."""
    args = resolved.args
    if resolved.kwargs:
        return f"input_ids {'x'.join(map(str, resolved.kwargs['input_ids'].shape))}"
    if isinstance(args[0], list):
        shape = "x".join(map(str, args[0][0].shape))
        return f"list of {len(args[0])} image{'s' if len(args[0]) != 1 else ''} {shape}"
    shape = "x".join(map(str, args[0].shape))
    return f"2 x {shape}" if len(args) == 2 else shape


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------- listing


def test_list_covers_every_torchvision_model_with_its_family():
    infos = {i.name: i for i in list_models()}
    assert set(TORCHVISION_NAMES) <= set(infos)
    for family, module in [
        ("quantized", torchvision.models.quantization),
        ("detection", torchvision.models.detection),
        ("segmentation", torchvision.models.segmentation),
        ("video", torchvision.models.video),
        ("optical_flow", torchvision.models.optical_flow),
    ]:
        names = torchvision.models.list_models(module=module)
        assert names and {infos[n].family for n in names} == {family}
    assert infos["resnet18"].family == "classification"
    assert infos["quantized_resnet18"].family == "quantized"  # torchvision's own name; no clash with resnet18


@pytest.mark.parametrize(
    ("name", "default_input"),
    [
        ("resnet18", "1x3x224x224"),
        ("inception_v3", "1x3x299x299"),
        ("vit_h_14", "1x3x518x518"),  # its DEFAULT weights are SWAG 518px
        ("quantized_resnet18", "1x3x224x224"),
        ("fcn_resnet50", "1x3x520x520"),
        ("fasterrcnn_resnet50_fpn", "list of 1 image 3x800x800"),
        ("ssdlite320_mobilenet_v3_large", "list of 1 image 3x320x320"),
        ("r3d_18", "1x3x16x112x112"),
        ("swin3d_t", "1x3x32x224x224"),
        ("raft_large", "2 x 1x3x520x960"),
        ("hf:llama", "input_ids 1x128"),
    ],
)
def test_listed_default_inputs(name, default_input):
    (info,) = [i for i in list_models() if i.name == name]
    assert info.default_input == default_input


@needs_ultralytics
def test_list_covers_every_packaged_yolo_yaml_and_task():
    infos = {i.name: i for i in list_models() if i.family == "yolo"}
    expected = {
        "yolov8n": "detect",
        "yolov8x": "detect",
        "yolo11s": "detect",
        "yolov5n": "detect",
        "yolov10n": "detect",
        "yolov9c": "detect",
        "rtdetr-l": "detect",
        "yolov8n-seg": "segment",
        "yolo11x-seg": "segment",
        "yolo11n-pose": "pose",
        "yolov8n-cls": "classify",
        "yolo11n-obb": "obb",
    }
    for name, task in expected.items():
        assert infos[name].task == task, name
    for scale in "nsmlx":
        assert f"yolo11{scale}" in infos and f"yolov8{scale}-seg" in infos
    assert infos["yolo11n-cls"].default_input == "1x3x224x224"
    assert infos["yolov8n"].default_input == "1x3x640x640"
    # every yaml shipped inside ultralytics gives at least one name
    shipped = set(_ultralytics_models_dir().rglob("*.yaml"))
    assert shipped == {a.path for a in yolo_architectures().values()}


def test_list_has_hf_llama():
    (info,) = [i for i in list_models() if i.name == "hf:llama"]
    assert info == ModelInfo(name="hf:llama", family="hf", default_input="input_ids 1x128")


def test_filter_is_a_case_insensitive_substring_of_name_family_or_task():
    assert {i.name for i in list_models("OPTICAL_flow")} == {"raft_large", "raft_small"}
    assert {i.name for i in list_models("ResNet18")} >= {"resnet18", "quantized_resnet18"}
    assert all("resnet18" in i.name for i in list_models("ResNet18"))
    assert len(list_models("quantized")) == len(QUANTIZED)
    assert list_models("no-such-model-anywhere") == []
    assert list_models(None) == list_models("") == list_models()
    if HAS_ULTRALYTICS:
        assert {i.task for i in list_models("pose") if i.family == "yolo"} == {"pose"}


@pytest.mark.slow  # a subprocess, about 18 s
def test_listing_is_fast_and_imports_neither_ultralytics_nor_transformers():
    code = textwrap.dedent(
        """
        import sys, time
        import torch, torchvision
        from graphprof.models import list_models
        start = time.perf_counter()
        count = len(list_models())
        elapsed = time.perf_counter() - start
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("ultralytics", "transformers"))
        print(count, elapsed, heavy)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    count, elapsed, heavy = done.stdout.split(maxsplit=2)
    assert int(count) > len(TORCHVISION_NAMES)
    assert float(elapsed) < 5.0  # a smoke test: it takes about 0.1 s
    assert heavy.strip() == "[]"


# ---------------------------------------------------------------- published architectures


@pytest.mark.parametrize("name", FLOAT_TORCHVISION)
def test_param_count_matches_published_weights(name):
    resolved = resolve_model(name, device="meta")
    model = resolved.model
    assert all(t.is_meta for t in (*model.parameters(), *model.buffers()))
    assert not model.training
    meta = _published(name)
    if name == "inception_v3":
        # torchvision's meta counts the AuxLogits head, which its builder removes after loading the weights
        with torch.device("meta"):
            aux = torchvision.models.inception.InceptionAux(768, len(meta["categories"]))
        assert _count(model) + _count(aux) == meta["num_params"]  # 23,834,568 + 3,326,696 = 27,161,264
        assert model.AuxLogits is None
    else:
        assert _count(model) == meta["num_params"]
    info = next(i for i in list_models() if i.name == name)
    assert _describe(resolved) == info.default_input
    if resolved.family == "detection":
        side = resolved.args[0][0].shape[-1]
        assert side == model.transform.min_size[-1]  # the transform leaves the image as it is


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_architecture_matches_published_weights(name):
    # the float architecture before fusion is what meta["num_params"] counts; quantizing packs the weights
    kwargs = {**published_kwargs(name), "quantize": False}
    with torch.device("meta"):
        model = torchvision.models.get_model_builder(name)(weights=None, **kwargs)
    meta = _published(name)
    if name == "quantized_inception_v3":
        with torch.device("meta"):
            aux = torchvision.models.inception.InceptionAux(768, len(meta["categories"]))
        assert _count(model) + _count(aux) == meta["num_params"]
    else:
        assert _count(model) == meta["num_params"]


@pytest.mark.slow  # a real run of a quantized model, about 4 s
def test_quantized_model_builds_on_cpu_and_runs():
    resolved = resolve_model("quantized_resnet18", device="meta")
    assert any("device 'meta' ignored" in note for note in resolved.notes)
    packed = 0
    for module in resolved.model.modules():
        if isinstance(module, (torch.ao.nn.quantized.Conv2d, torch.ao.nn.quantized.Linear)):
            packed += module.weight().numel() + (module.bias().numel() if module.bias() is not None else 0)
    # fusion folds each BatchNorm (weight + bias per channel) into a conv bias (one per channel)
    float_model = torchvision.models.resnet18()
    folded = sum(m.num_features for m in float_model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    assert packed == _published("quantized_resnet18")["num_params"] - folded
    with torch.no_grad():
        out = resolved.model(*resolved.args)
    assert out.shape == (1, 1000)


# ---------------------------------------------------------------- a sample, built on CPU and run once


@pytest.mark.parametrize(
    ("spec", "input_shape", "check"),
    [
        ("resnet18", None, lambda out: out.shape == (1, 1000)),
        ("fasterrcnn_mobilenet_v3_large_320_fpn", None, lambda out: set(out[0]) == {"boxes", "labels", "scores"}),
        ("lraspp_mobilenet_v3_large", None, lambda out: out["out"].shape == (1, 21, 520, 520)),
        ("r3d_18", (1, 3, 4, 56, 56), lambda out: out.shape == (1, 400)),
        ("raft_small", (1, 3, 128, 128), lambda out: out[-1].shape == (1, 2, 128, 128)),
        ("quantized_mobilenet_v3_large", None, lambda out: out.shape == (1, 1000)),
        pytest.param("yolov8n", None, lambda out: out[0].shape == (1, 84, 8400), marks=needs_ultralytics),
        pytest.param("yolov8n-seg.yaml", None, lambda out: out[0][0].shape == (1, 116, 8400), marks=needs_ultralytics),
        pytest.param("yolo11n-cls", None, lambda out: out[0].shape == (1, 1000), marks=needs_ultralytics),
        ("hf:llama", None, lambda out: out.logits.shape == (1, 128, 32000)),
    ],
)
@pytest.mark.slow  # real forward passes of a zoo sample, about 20 s
def test_sample_builds_and_runs_with_its_default_input(spec, input_shape, check):
    if spec.startswith("hf:"):
        pytest.importorskip("transformers")
    resolved = resolve_model(spec, input_shape=input_shape)
    assert not resolved.model.training
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for p in resolved.model.parameters())
    assert any("without weights" in note for note in resolved.notes)
    with torch.no_grad():
        out = resolved.model(*resolved.args, **resolved.kwargs)
    assert check(out)


def test_inputs_are_seeded_and_deterministic():
    first, second = resolve_model("resnet18"), resolve_model("resnet18")
    assert torch.equal(first.args[0], second.args[0])
    assert first.args[0].dtype == torch.float32


@needs_ultralytics
@pytest.mark.slow  # about 4 s
def test_yolo_counts_match_ultralytics_reports():
    assert _count(resolve_model("yolov8n").model) == 3_157_200  # "YOLOv8n summary: 225 layers, 3157200 parameters"
    assert _count(resolve_model("yolov8n.yaml").model) == 3_157_200


@needs_ultralytics
def test_yolo_torchvision_backbone_is_built_without_its_weights():
    # its yaml asks for resnet18 DEFAULT weights, a download; the network guard would refuse it
    resolved = resolve_model("yolo11-cls-resnet18", device="meta")
    assert any("without pretrained weights" in note for note in resolved.notes)


# ---------------------------------------------------------------- input overrides


def test_batch_size_and_input_shape_overrides():
    assert resolve_model("resnet18", batch_size=4, device="meta").args[0].shape == (4, 3, 224, 224)
    assert resolve_model("resnet18", input_shape=(2, 3, 128, 96), device="meta").args[0].shape == (2, 3, 128, 96)
    both = resolve_model("resnet18", input_shape=(2, 3, 64, 64), batch_size=5, device="meta")
    assert both.args[0].shape == (5, 3, 64, 64)

    images = resolve_model("ssd300_vgg16", input_shape=(2, 3, 300, 400), device="meta").args[0]
    assert [tuple(i.shape) for i in images] == [(3, 300, 400)] * 2
    assert len(resolve_model("ssd300_vgg16", batch_size=3, device="meta").args[0]) == 3

    clip = resolve_model("r3d_18", input_shape=(1, 3, 8, 112, 112), device="meta").args[0]
    assert clip.shape == (1, 3, 8, 112, 112)

    first, second = resolve_model("raft_small", input_shape=(1, 3, 128, 256), device="meta").args
    assert first.shape == second.shape == (1, 3, 128, 256)


def test_hf_input_shape_is_batch_and_sequence():
    pytest.importorskip("transformers")
    resolved = resolve_model("hf:llama", input_shape=(2, 16), device="meta")
    assert resolved.args == ()
    assert resolved.kwargs["input_ids"].shape == (2, 16)
    assert resolved.kwargs["input_ids"].dtype == torch.long
    assert resolve_model("hf:llama", batch_size=3, device="meta").kwargs["input_ids"].shape == (3, 128)


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("resnet18", {"input_shape": (3, 224, 224)}, "N,C,H,W"),
        ("r3d_18", {"input_shape": (1, 3, 112, 112)}, "N,C,T,H,W"),
        ("resnet18", {"input_shape": (1, 3, 0, 224)}, "positive"),
        ("resnet18", {"input_shape": (1, -3, 224, 224)}, "positive"),
        ("resnet18", {"batch_size": 0}, "batch size"),
        ("fasterrcnn_resnet50_fpn", {"input_shape": (3, 800, 800)}, "N,C,H,W"),
        ("resnet18", {"device": "warp-drive"}, "device"),
    ],
)
def test_invalid_inputs_are_one_line_errors(spec, kwargs, message):
    with pytest.raises(InvalidInputError, match=message) as caught:
        resolve_model(spec, **kwargs)
    assert "\n" not in str(caught.value)


def test_hf_options_and_their_errors():
    pytest.importorskip("transformers")
    resolved = resolve_model("hf:llama?hidden_size=128&num_hidden_layers=2&num_attention_heads=2&num_key_value_heads=1", device="meta")
    config = resolved.model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_key_value_heads) == (128, 2, 1)
    with pytest.raises(InvalidInputError, match="hiden_size"):
        resolve_model("hf:llama?hiden_size=128", device="meta")
    with pytest.raises(InvalidInputError, match="exceeds"):
        resolve_model("hf:gpt2", input_shape=(1, 4096), device="meta")
    with pytest.raises(ModelNotFoundError, match="did you mean hf:llama"):
        resolve_model("hf:lama")


def test_hf_local_config_dir(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, vocab_size=1000)
    config.save_pretrained(tmp_path)
    resolved = resolve_model(f"hf:{tmp_path}?num_hidden_layers=2")
    assert type(resolved.model).__name__ == "LlamaForCausalLM"
    assert resolved.model.config.num_hidden_layers == 2
    with torch.no_grad():
        out = resolved.model(**resolved.kwargs)
    assert out.logits.shape == (1, 128, 1000)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model(f"hf:{empty}")


# ---------------------------------------------------------------- meta device


@pytest.mark.slow  # about 8 s
def test_meta_device_where_the_family_allows_it():
    resolved = resolve_model("regnet_y_128gf", device="meta")  # its builder needs real tensors for its widths
    assert _count(resolved.model) == _published("regnet_y_128gf")["num_params"]
    assert resolved.args[0].is_meta
    if HAS_ULTRALYTICS:
        yolo = resolve_model("yolov8n", device="meta")
        assert all(p.is_meta for p in yolo.model.parameters())
        assert any("moved to meta" in note for note in yolo.notes)


# ---------------------------------------------------------------- errors and downloads


def test_unknown_name_suggests_close_ones():
    with pytest.raises(ModelNotFoundError, match=r"unknown model 'resnet19'; did you mean resnet18.*\(graphprof --list\)"):
        resolve_model("resnet19")
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        resolve_model("zzzzzz")


def test_missing_checkpoint_is_refused_at_once():
    start = time.perf_counter()
    with pytest.raises(DownloadUnavailableError) as caught:
        resolve_model("no_such_model.pt")
    assert time.perf_counter() - start < 1.0
    assert str(caught.value).startswith("no_such_model.pt is not on disk and graphprof never downloads weights")
    if HAS_ULTRALYTICS:  # a path with a folder names the user's own file: never replaced by the yaml
        with pytest.raises(DownloadUnavailableError, match="--model yolov8n.yaml"):
            resolve_model("missing_dir/yolov8n.pt")


@pytest.mark.skipif(not HAS_ULTRALYTICS, reason="needs ultralytics")
@pytest.mark.slow  # about 7 s
def test_absent_named_checkpoint_is_built_from_its_packaged_yaml():
    resolved = resolve_model("yolov8n.pt", device="meta")
    # yolov8n: 3,157,200 parameters (Ultralytics' model table, 3.2M; same as the yolov8n.yaml build)
    assert sum(p.numel() for p in resolved.model.parameters()) == 3_157_200
    assert resolved.notes[0].startswith("yolov8n.pt is not on disk")
    assert "built from the packaged yolov8n.yaml" in resolved.notes[0]


def test_hub_ids_are_refused():
    with pytest.raises(DownloadUnavailableError, match="never downloads"):
        resolve_model("hf:meta-llama/Llama-2-7b-hf")


@needs_ultralytics
def test_local_ultralytics_checkpoint(tmp_path):
    model = resolve_model("yolov8n").model.half()
    path = tmp_path / "best.pt"
    torch.save({"model": model, "ema": None, "train_args": {"imgsz": 320}}, path)
    resolved = resolve_model(str(path))
    assert resolved.family == "yolo"
    assert resolved.args[0].shape == (1, 3, 320, 320)
    assert all(p.dtype == torch.float32 for p in resolved.model.parameters())
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    with pytest.raises(ModelBuildError, match="not a model"):
        resolve_model(str(tmp_path / "weights.pt"))


@needs_ultralytics
@pytest.mark.slow  # about 8 s
def test_local_yaml_and_case(tmp_path):
    local = tmp_path / "my-yolov8s.yaml"
    local.write_text(yolo_architectures()["yolov8s"].path.read_text())
    assert _count(resolve_model(str(local), device="meta").model) == _count(resolve_model("YOLOv8s", device="meta").model)


def test_pickled_module_needs_an_input_shape(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(torch.nn.Linear(8, 2), path)
    with pytest.raises(InvalidInputError, match="--input-shape"):
        resolve_model(str(path))
    resolved = resolve_model(str(path), input_shape=(3, 8))
    assert resolved.family == "user" and resolved.model(*resolved.args).shape == (3, 2)


# ---------------------------------------------------------------- users' factories


USER_MODULE = (
    TINY_MODULE
    + """
def make_model():
    return Tiny()

def broken():
    raise RuntimeError("no such layer")

def downloads():
    import socket
    socket.getaddrinfo("localhost", 80)
    return Tiny()

def not_a_model():
    return 42

class NoInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self):
        return self.w * 2

class BadTree(Tiny):
    def named_modules(self, *args, **kwargs):
        raise RuntimeError("tree walk refused")
"""
)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    name = f"graphprof_test_user_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def test_user_factory_and_class(user_module):
    path_before = list(sys.path)
    for attribute in ("make_model", "Tiny"):
        resolved = resolve_model(f"{user_module}:{attribute}", input_shape=(4, 8))
        assert resolved.family == "user"
        assert resolved.model(*resolved.args).shape == (4, 2)
    assert sys.path == path_before
    by_path = resolve_model(f"{user_module}.py:make_model", input_shape=(1, 8), batch_size=3)
    assert by_path.args[0].shape == (3, 8)
    assert resolve_model(f"{user_module}:Tiny", input_shape=(1, 8), device="meta").args[0].is_meta


def test_user_factory_errors(user_module):
    with pytest.raises(InvalidInputError, match="--input-shape"):
        resolve_model(f"{user_module}:make_model")
    with pytest.raises(ModelNotFoundError, match="no_such_module"):
        resolve_model("no_such_module:make_model", input_shape=(1, 8))
    with pytest.raises(ModelNotFoundError, match="make_modle"):
        resolve_model(f"{user_module}:make_modle", input_shape=(1, 8))
    with pytest.raises(ModelBuildError, match="no such layer") as caught:
        resolve_model(f"{user_module}:broken", input_shape=(1, 8))
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(ModelBuildError, match="not a torch.nn.Module"):
        resolve_model(f"{user_module}:not_a_model", input_shape=(1, 8))


@pytest.mark.parametrize(("attribute", "code", "words"), [("NoInput", 2, "forward()"), ("BadTree", 5, "tree walk refused")])
def test_a_user_model_that_cannot_run_is_one_line(user_module, attribute: str, code: int, words: str) -> None:
    """A ``forward(self)`` given --input-shape, a ``named_modules()`` that raises: one line naming it, no exit 70."""
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["--model", f"{user_module}:{attribute}", "--input-shape", "1,8"])
    assert result.exit_code == code, result.output
    assert words in result.output and "Traceback" not in result.output and "internal error" not in result.output


def test_network_is_refused_while_resolving_and_only_then(user_module):
    start = time.perf_counter()
    with pytest.raises(DownloadUnavailableError, match="tried to download"):
        resolve_model(f"{user_module}:downloads", input_shape=(1, 8))
    assert time.perf_counter() - start < 1.0
    assert socket.getaddrinfo("localhost", 80)  # outside resolve_model the hook does nothing


def test_two_stage_detector_proposals_are_the_maximum_or_set():
    default = resolve_model("fasterrcnn_mobilenet_v3_large_320_fpn", device="meta")
    rpn, heads = default.model.rpn, default.model.roi_heads
    assert rpn.post_nms_top_n() == 150  # the model's rpn_post_nms_top_n_test
    assert (rpn.nms_thresh, heads.score_thresh, heads.nms_thresh) == (1.0, 0.0, 1.0)
    assert any("box head runs on up to 150 proposals per image (the model's maximum" in n for n in default.notes)
    chosen = resolve_model("fasterrcnn_mobilenet_v3_large_320_fpn", device="meta", proposals=20)
    assert chosen.model.rpn.post_nms_top_n() == 20
    assert any("up to 20 proposals per image (set by proposals=20" in n for n in chosen.notes)
    with pytest.raises(InvalidInputError, match="two-stage"):
        resolve_model("resnet18", device="meta", proposals=20)
    with pytest.raises(InvalidInputError, match="two-stage"):
        resolve_model("hf:llama", device="meta", proposals=20)
