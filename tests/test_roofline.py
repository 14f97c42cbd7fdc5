"""Roofline maths by hand, and the hardware presets."""

from dataclasses import replace

import pytest
from torch import nn

import graphprof
from graphprof.cost.bounds import DEFAULT_THRESHOLD, Bound, classify_layer, ridge_point, roofline_time
from graphprof.cost.result import LayerRow
from graphprof.cost.roofline import classify
from graphprof.devices.hardware import HARDWARE, PRECISIONS, custom_hardware, get_hardware, list_hardware, resolve_hardware
from graphprof.errors import InvalidInputError
from graphprof.formulas import Cost


@pytest.fixture(scope="module")
def small_profile():
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 4))
    return graphprof.profile_model(net, input_shape=(1, 3, 8, 8))


def _row(name: str, flops: int, nbytes: int) -> LayerRow:
    return LayerRow(
        name=name,
        node=name,
        module=name,
        type="Fake",
        params=0,
        output_shapes=((1,),),
        forward=Cost(flops=flops, bytes_read=nbytes),
        backward=Cost(),
    )


# ---- the formulas ------------------------------------------------------------------------------------
def test_ridge_point_by_hand():
    # 989.5e12 FLOP/s / 3.35e12 B/s = 295.37... FLOPs/byte
    assert ridge_point(989.5e12, 3.35e12) == pytest.approx(295.3731, rel=1e-6)
    assert get_hardware("h100").ridge_point("bfloat16") == pytest.approx(989.5e12 / 3350e9)
    # A100 float32: 19.5e12 / 2039e9 = 9.5635...
    assert get_hardware("a100").ridge_point("float32") == pytest.approx(9.5635, rel=1e-4)


def test_roofline_time_by_hand():
    # 2 GFLOPs, 10 MB on an H100 in bf16: max(2e9 / 989.5e12, 10e6 / 3.35e12) = max(2.021 us, 2.985 us)
    assert roofline_time(2_000_000_000, 10_000_000, 989.5e12, 3.35e12) == pytest.approx(2.98507e-6, rel=1e-5)
    # compute side wins: 1e12 FLOPs at 1e12 FLOP/s = 1 s, 1 byte at 1e9 B/s = 1 ns
    assert roofline_time(10**12, 1, 1e12, 1e9) == 1.0


def test_classification_at_the_boundary():
    # AI = 100 / 10 = 10 = threshold: memory-bound, as the seeds' "AI <= 10"
    assert classify_layer(100, 10, 10.0) is Bound.MEMORY
    assert classify_layer(101, 10, 10.0) is Bound.COMPUTE
    assert classify_layer(99, 10, 10.0) is Bound.MEMORY
    assert classify_layer(5, 0, 10.0) is Bound.COMPUTE  # computes without moving bytes
    assert classify_layer(0, 64, 10.0) is Bound.MEMORY
    assert classify_layer(0, 0, 10.0) is Bound.NONE


def test_classify_with_a_custom_device(small_profile):
    # 1 TFLOP/s and 100 GB/s: ridge point 1e12 / 1e11 = 10 FLOPs/byte
    device = custom_hardware(peak_tflops=1.0, bandwidth_gbs=100.0)
    profile = replace(small_profile, layers=(_row("a", 2000, 100), _row("b", 500, 100), _row("c", 0, 0)))
    roof = classify(profile, device)
    assert roof.threshold == pytest.approx(10.0)
    assert [layer.bound for layer in roof.layers] == [Bound.COMPUTE, Bound.MEMORY, Bound.NONE]
    # a: max(2000 / 1e12, 100 / 1e11) = max(2 ns, 1 ns) = 2 ns; b: max(0.5 ns, 1 ns) = 1 ns; c: 0
    assert [layer.seconds for layer in roof.layers] == pytest.approx([2e-9, 1e-9, 0.0])
    assert roof.seconds == pytest.approx(3e-9)
    assert roof.flops_share(Bound.COMPUTE) == pytest.approx(2000 / 2500)
    assert roof.time_share(Bound.COMPUTE) == pytest.approx(2 / 3)
    # the whole model as one kernel: max(2500 / 1e12, 200 / 1e11) = 2.5 ns <= the per-layer sum
    assert roof.model_bound_seconds == pytest.approx(2.5e-9)
    assert roof.model_bound_seconds <= roof.seconds


def test_no_hardware_uses_the_fixed_threshold(small_profile):
    roof = classify(small_profile)
    assert roof.fixed_threshold and roof.threshold == DEFAULT_THRESHOLD == 10.0
    assert roof.seconds is None and roof.time_share(Bound.COMPUTE) is None
    assert len(roof.layers) == len(small_profile.layers)
    assert roof.total_flops == small_profile.total_flops
    assert roof.to_dict()["threshold_source"] == "fixed"


def test_missing_precision_falls_back_to_float32(small_profile):
    bf16 = replace(small_profile, dtype="bfloat16")
    roof = classify(bf16, get_hardware("t4"))  # Turing: no bfloat16
    assert roof.precision == "float32"
    assert roof.peak_flops == pytest.approx(8.1e12)
    assert any("bfloat16" in note for note in roof.notes)
    assert classify(bf16, get_hardware("h100")).notes == ()


# ---- the presets -----------------------------------------------------------------------------------
def test_presets_cover_the_required_devices():
    names = set(HARDWARE)
    assert {"a100", "h100", "h200", "l4", "rtx4090", "jetson-orin", "apple-m1-max", "desktop-cpu"} <= names
    for device in list_hardware():
        assert device.source and "float32" in device.peak_tflops and device.bandwidth_gbs > 0
        assert set(device.peak_tflops) <= set(PRECISIONS)


def test_preset_values_are_dense_datasheet_figures():
    h100 = get_hardware("h100")
    assert h100.peak_tflops["bfloat16"] == 989.5  # 1,979 sparse / 2
    assert h100.bandwidth == 3.35e12
    assert get_hardware("h200").peak_tflops == h100.peak_tflops
    assert get_hardware("h200").bandwidth_gbs == 4800.0
    assert get_hardware("a100").peak_tflops["float16"] == 312.0


def test_get_hardware_names_and_errors():
    assert get_hardware("H100") is get_hardware("h100") is get_hardware("h100_sxm")
    with pytest.raises(InvalidInputError, match="did you mean h100"):
        get_hardware("h10")
    with pytest.raises(InvalidInputError, match="unknown hardware 'nosuch'"):
        get_hardware("nosuch")


def test_resolve_hardware():
    assert resolve_hardware() is None
    assert resolve_hardware("l4") is get_hardware("l4")
    custom = resolve_hardware(peak_tflops=100.0, bandwidth_gbs=1000.0)
    assert custom.ridge_point("float16") == pytest.approx(100.0)  # 100e12 / 1000e9
    tuned = resolve_hardware("h100", bandwidth_gbs=1000.0)
    assert tuned.bandwidth_gbs == 1000.0 and tuned.peak_tflops["bfloat16"] == 989.5
    with pytest.raises(InvalidInputError, match="both"):
        resolve_hardware(peak_tflops=10.0)
    with pytest.raises(InvalidInputError, match="positive"):
        resolve_hardware(peak_tflops=-1.0, bandwidth_gbs=10.0)


def test_real_model_time_scales_with_bandwidth(small_profile):
    slow = classify(small_profile, custom_hardware(1.0, 10.0))
    fast = classify(small_profile, custom_hardware(1.0, 1000.0))
    assert fast.seconds < slow.seconds
    assert sum(layer.flops for layer in slow.layers) == small_profile.total_flops
    assert slow.precision == "float32"  # the profile is float32
