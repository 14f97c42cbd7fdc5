"""timm models that once failed inside graphprof profile cleanly (timm is in the test extra)."""

from __future__ import annotations

import pytest
import torch

import graphprof

timm = pytest.importorskip("timm")


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_cait_profiles_in_both_modes(mode: str) -> None:
    # issue 13 reported AssertionError "Expected gradient function to be set" here
    with torch.device("meta"):
        model = timm.create_model("cait_xxs24_224", pretrained=False)
    p = graphprof.profile_model(model, input_shape=(1, 3, 224, 224), mode=mode)
    assert not p.unsupported
    # timm's model card lists cait_xxs24_224 at 2.5 GMACs; forward + backward is about 3 x forward
    assert 2.4e9 < p.total_macs / (3 if mode == "train" else 1) < 2.6e9
