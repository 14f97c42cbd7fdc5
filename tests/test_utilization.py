"""MFU and HFU (issue 39, point 2): achieved FLOP/s over the device's dense peak, checked by hand."""

from __future__ import annotations

import dataclasses
import types

import pytest
from torch import nn

import graphprof
from graphprof.devices.hardware import custom_hardware, get_hardware
from graphprof.measure.utilization import utilization, with_utilization
from graphprof.render.measured import _utilization


@dataclasses.dataclass(frozen=True)
class Timed:
    """The fields of a measurement that utilisation reads (means in milliseconds, as RuntimeStats keeps them)."""

    forward: types.SimpleNamespace
    training_step: types.SimpleNamespace | None
    optimizer: str = "adamw"
    utilization: tuple[object, ...] = ()


def _timed(forward_ms: float, step_ms: float | None = None) -> Timed:
    return Timed(types.SimpleNamespace(mean=forward_ms), None if step_ms is None else types.SimpleNamespace(mean=step_ms))


def test_forward_mfu_by_hand() -> None:
    profile = graphprof.profile_model(nn.Linear(64, 32), input_shape=(4, 64))
    assert profile.forward.flops == 2 * 4 * 64 * 32 + 4 * 32  # 16,384 multiply-add FLOPs + 128 bias adds = 16,512
    profile = dataclasses.replace(profile, measurement=_timed(forward_ms=2.0))
    (u,) = utilization(profile, custom_hardware(peak_tflops=0.01, bandwidth_gbs=100))
    # 16,512 FLOPs / 0.002 s = 8.256 MFLOP/s over a 0.01 TFLOP/s (1e10 FLOP/s) peak
    assert u.mfu == pytest.approx(16_512 / 0.002 / 1e10) == pytest.approx(8.256e-4)
    assert u.hfu == u.mfu  # nothing skipped, nothing recomputed
    assert u.precision == "float32"


def test_training_step_mfu_reads_the_peak_at_the_runs_dtype() -> None:
    profile = graphprof.profile_model(nn.Linear(64, 32), input_shape=(4, 64), mode="train", dtype="bfloat16")
    profile = dataclasses.replace(profile, measurement=_timed(forward_ms=1.0, step_ms=4.0))
    h100 = get_hardware("h100")
    forward, step = utilization(profile, h100)
    assert step.model_flops == profile.total_flops and step.precision == "bfloat16"
    assert step.mfu == pytest.approx(profile.total_flops / 0.004 / 989.5e12)  # the dense BF16 peak, not the sparse 1,979
    assert forward.mfu == pytest.approx(profile.forward.flops / 0.001 / 989.5e12)
    shown = with_utilization(profile, h100)
    text = " ".join(t.plain for t in _utilization(shown.measurement))
    assert "MFU" in text and "HFU" in text and "dense" in text and "bfloat16" in text


def test_causal_attention_hfu_is_below_mfu() -> None:
    class Causal(nn.Module):
        def forward(self, q):  # type: ignore[no-untyped-def]
            return nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)

    profile = graphprof.profile_model(Causal(), input_shape=(1, 4, 256, 64), target="cuda")  # a fused kernel skips masked tiles
    (u,) = utilization(dataclasses.replace(profile, measurement=_timed(1.0)), custom_hardware(1.0, 100))
    assert u.executed_flops < u.model_flops and u.hfu < u.mfu
