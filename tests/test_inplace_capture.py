"""Issue 53: an augmented assignment (``out += identity``) is dispatched in place by the dry run, as the eager forward
does it.

FX's own proxy has no ``__iadd__``, so Python fell back to ``__add__`` and torchvision's residual blocks were traced as
an out-of-place ``aten.add`` with a fresh output, where the eager CPU forward runs ``aten.add_`` into ``out``; the
predictor priced a fresh 25.7 MB output for each of resnet50's batch-8 adds and the heap replay saw allocations the
forward never makes. Checked against a real ``torch.profiler`` run of the same models; the MACs and the layer names do
not change.
"""

from __future__ import annotations

import collections

import pytest
import torch
import torchvision
from torch import nn

import graphprof
from graphprof.base.choices import Method, Phase


class Residual(nn.Module):
    """Every augmented assignment a residual block might use, on tensors and on a Python number."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        out += x
        out *= 2.0
        out -= x
        out /= 4.0
        scale = 1
        scale += 2  # a number: folded away at trace time, as before
        return out * scale


def _aten(profile: graphprof.Profile) -> collections.Counter[str]:
    return collections.Counter(op.op for row in profile.layers for op in row.ops if op.phase is Phase.FORWARD and op.op.startswith("aten."))


def _eager(model: nn.Module, x: torch.Tensor) -> collections.Counter[str]:
    """The top-level aten calls of the eager forward, as torch.profiler sees them."""
    from torch.profiler import profile

    with torch.no_grad():
        model(x)
        with profile() as prof:
            model(x)
    return collections.Counter(e.name.replace("aten::", "aten.") for e in prof.events() if e.cpu_parent is None)


def test_the_dry_run_dispatches_the_eager_forwards_in_place_calls() -> None:
    model, x = Residual().eval(), torch.randn(1, 4, 8, 8)
    profile = graphprof.profile_model(model, input_shape=(1, 4, 8, 8), mode="eval")
    assert profile.capture_method is Method.FX
    ran, eager = _aten(profile), _eager(model, x)
    for name in ("aten.add_", "aten.mul_", "aten.sub_", "aten.div_"):
        assert ran[name] == eager[name] == 1, name
    assert ran["aten.add"] == eager["aten.add"] == 0
    # the traced graph computes what the eager forward computes, printing each node as the statement it was
    from graphprof.capture.methods import _symbolic_trace

    gm = _symbolic_trace(model)
    with torch.no_grad():
        assert torch.equal(gm(x), model(x))
    assert "+= x" in gm.code and "*= 2.0" in gm.code


def test_resnet18_adds_are_in_place_with_unchanged_macs_and_layer_names() -> None:
    model = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    profile = graphprof.profile_model(model, input_shape=(1, 3, 64, 64), mode="eval")
    ran, eager = _aten(profile), _eager(model, x)
    assert ran["aten.add_"] == eager["aten.add_"] == 8 and ran["aten.add"] == 0
    # eight adds of the block's output, each one MAC-free: the convolutions and the classifier give every MAC
    # (by hand, the stem alone: 64 x 3 x 7 x 7 weights over a 32 x 32 output = 9,633,792 MACs)
    stem = next(op for row in profile.layers if row.module == "conv1" for op in row.ops if op.op.startswith("aten.conv"))
    assert stem.cost.macs == 64 * 3 * 7 * 7 * 32 * 32 == 9_633_792
    adds = [row for row in profile.layers if any(op.op == "aten.add_" for op in row.ops)]
    assert [row.name for row in adds][:2] == ["layer1.0.add", "layer1.1.add_1"]  # the names the out-of-place trace gave
    assert {row.type for row in adds} == {"add"}


@pytest.mark.parametrize("name", ["resnet50"])
def test_in_place_adds_leave_the_totals_as_eager_counts_them(name: str) -> None:
    """An in-place add reads both operands and writes one, as the out-of-place add did: the totals a user reads do
    not move (resnet50 at 224: 4,089,184,256 MACs, torchvision's own figure 4.09 GMACs)."""
    profile = graphprof.profile_model(getattr(torchvision.models, name)(), input_shape=(1, 3, 224, 224), mode="eval")
    assert profile.total_macs == 4_089_184_256
