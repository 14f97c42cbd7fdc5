"""The roofline chart's points (issue 25): the lower bound sits on the roof, the predicted and measured
points below it, one point per layer and kind."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import graphprof
from graphprof.cost.roofline import with_roofline
from graphprof.devices.hardware import get_hardware
from graphprof.render.plots import roofline_points


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def test_lower_bound_on_the_roof_predicted_below_it() -> None:
    p = graphprof.profile_model(_mlp(), input_shape=(32, 64))
    p = with_roofline(p, get_hardware("h100"))
    roofline = p.roofline
    assert roofline is not None
    points = roofline_points(p)
    assert points["measured"] == []  # no measurement, no measured point
    assert roofline.peak_flops is not None and roofline.bandwidth is not None
    for _, intensity, achieved, _ in points["lower bound"]:
        # the roof: min(peak, intensity x bandwidth)
        assert achieved == pytest.approx(min(roofline.peak_flops, intensity * roofline.bandwidth), rel=1e-9)
    lower = {name: y for name, _, y, _ in points["lower bound"]}
    assert {name for name, *_ in points["predicted"]} == set(lower)  # one point per layer and kind
    assert all(y <= lower[name] * (1 + 1e-9) for name, _, y, _ in points["predicted"])


@pytest.mark.slow
def test_measured_points_come_from_the_measured_layers() -> None:
    pm = graphprof.prepare(_mlp(), example_inputs=(torch.randn(32, 64),))
    p = dataclasses.replace(pm.profile(), measurement=pm.measure(device="cpu", iters=3, warmup=1, layer_runs=1, breakdown=False))
    points = roofline_points(with_roofline(p, get_hardware("h100")))
    assert {name for name, *_ in points["measured"]} == {"0", "1", "2"}  # Linear, ReLU (one FLOP per element), Linear
