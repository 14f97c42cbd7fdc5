"""A representative model of every family resolves, is captured by some method and is fully counted."""

import pytest

import graphprof
from graphprof.models import resolve_model
from graphprof.run.params import count_parameters

# (spec, input shape override or None, expected capture methods, expected execution)
SAMPLE = [
    ("resnet18", None, {"fx.symbolic_trace"}, "dry-run"),
    ("quantized_mobilenet_v2", (1, 3, 96, 96), {"fx.symbolic_trace"}, "real"),
    ("lraspp_mobilenet_v3_large", (1, 3, 128, 128), {"fx.symbolic_trace"}, "dry-run"),
    ("ssdlite320_mobilenet_v3_large", None, {"eager"}, "real"),
    ("r3d_18", (1, 3, 8, 56, 56), {"fx.symbolic_trace"}, "dry-run"),
    # symbolic tracing fails on RAFT's loop and YOLO's detect head: the eager capture (Dynamo on request)
    ("raft_small", (1, 3, 128, 128), {"eager"}, "dry-run"),
    ("yolov8n", (1, 3, 320, 320), {"eager"}, "dry-run"),
    ("yolo11n-cls", None, {"eager", "fx.symbolic_trace"}, "dry-run"),
    ("hf:llama?num_hidden_layers=2", None, {"eager"}, "dry-run"),
]


@pytest.mark.parametrize("spec,shape,methods,execution", SAMPLE, ids=[s[0] for s in SAMPLE])
@pytest.mark.slow  # zoo-wide: a sample of each family, about 40 s
def test_family_sample_is_captured_and_counted(spec, shape, methods, execution):
    p = graphprof.profile_model(spec, input_shape=shape)
    assert p.capture_method in methods
    assert p.execution == execution
    assert p.unsupported == ()
    assert p.total_macs > 0
    assert p.to_dict()["capture_method"] == p.capture_method
    built = resolve_model(spec, input_shape=shape, device="meta").model
    assert p.total_params == count_parameters(built)


def test_user_factory(tmp_path, monkeypatch):
    (tmp_path / "mymodels.py").write_text(
        "import torch.nn as nn\n"
        "def make_model():\n"
        "    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))\n"
    )
    monkeypatch.chdir(tmp_path)
    p = graphprof.profile_model("mymodels:make_model", input_shape=(1, 3, 8, 8))
    # conv: 8 x 6 x 6 outputs x 3 x 3 x 3 = 7776; linear: 288 x 10 = 2880
    assert p.total_macs == 7776 + 2880
    assert p.capture_method == "fx.symbolic_trace"
