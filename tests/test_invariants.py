"""Invariants of a Profile: rows sum to totals, modules roll up exactly, costs scale with batch."""

import pytest
import torch
import torchvision

import graphprof
from graphprof.formulas import Cost


@pytest.fixture(scope="module")
def resnet_profile():
    return graphprof.profile_model(torchvision.models.resnet18().eval(), input_shape=(2, 3, 64, 64))


def test_rows_sum_to_totals(resnet_profile):
    p = resnet_profile
    total = sum((row.cost for row in p.layers), Cost())
    assert total == p.total
    assert p.to_dict()["total_flops"] == sum(layer["flops"] for layer in p.to_dict()["layers"])


def test_ops_sum_to_rows(resnet_profile):
    for row in resnet_profile.layers:
        assert sum((op.cost for op in row.ops), Cost()) == row.cost


def test_root_module_equals_total(resnet_profile):
    root = resnet_profile.modules[0]
    assert root.path == "" and root.cost == resnet_profile.total


def test_module_is_sum_of_children(resnet_profile):
    by_path = {m.path: m for m in resnet_profile.modules}
    layer1 = by_path["layer1"]
    assert layer1.cost == by_path["layer1.0"].cost + by_path["layer1.1"].cost


def test_params_equal_numel(resnet_profile):
    m = torchvision.models.resnet18()
    assert resnet_profile.total_params == sum(p.numel() for p in m.parameters()) == 11_689_512
    assert resnet_profile.graph_params == resnet_profile.total_params


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
@pytest.mark.slow  # several batch sizes of two models, about 10 s
def test_macs_scale_linearly_with_batch(name):
    m = getattr(torchvision.models, name)().eval()
    one = graphprof.profile_model(m, input_shape=(1, 3, 64, 64))
    eight = graphprof.profile_model(m, input_shape=(8, 3, 64, 64))
    assert eight.total_macs == 8 * one.total_macs
    assert eight.total_flops == 8 * one.total_flops


def test_no_unsupported_ops_on_resnet(resnet_profile):
    assert resnet_profile.unsupported == ()


def test_train_mode_counts_backward():
    m = torchvision.models.resnet18().eval()
    p = graphprof.profile_model(m, input_shape=(2, 3, 64, 64), mode="train")
    assert p.mode == "train"
    assert p.forward.macs > 0 and p.backward.macs > 0
    # the first convolution needs no input gradient, every other contraction needs both gradients
    assert p.forward.macs < p.backward.macs <= 2 * p.forward.macs
    assert not m.training


def test_dtype_changes_bytes_not_macs():
    m = torchvision.models.resnet18().eval()
    f32 = graphprof.profile_model(m, input_shape=(1, 3, 64, 64))
    bf16 = graphprof.profile_model(m, input_shape=(1, 3, 64, 64), dtype="bf16")
    assert bf16.total_macs == f32.total_macs
    assert bf16.total.bytes_moved * 2 == pytest.approx(f32.total.bytes_moved, rel=0.01)
    assert next(m.parameters()).dtype == torch.float32
