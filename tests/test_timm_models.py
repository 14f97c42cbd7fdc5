"""timm models that once failed inside graphprof profile cleanly (timm is in the test extra)."""

from __future__ import annotations

import pytest
import torch

import graphprof

timm = pytest.importorskip("timm")


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.slow  # about 13 s
def test_cait_profiles_in_both_modes(mode: str) -> None:
    # issue 13 reported AssertionError "Expected gradient function to be set" here
    with torch.device("meta"):
        model = timm.create_model("cait_xxs24_224", pretrained=False)
    p = graphprof.profile_model(model, input_shape=(1, 3, 224, 224), mode=mode)
    assert not p.unsupported
    # timm's model card lists cait_xxs24_224 at 2.5 GMACs; forward + backward is about 3 x forward
    assert 2.4e9 < p.total_macs / (3 if mode == "train" else 1) < 2.6e9


def test_timm_models_by_name() -> None:
    p = graphprof.profile_model("timm:resnet10t", batch_size=2)
    assert p.family == "timm" and p.execution == "dry-run" and not p.unsupported
    # the default pretrained config's input_size (176 for resnet10t, as timm.data.resolve_data_config gives), batch 2
    assert p.input_shapes == ((2, *timm.models.get_pretrained_cfg("resnet10t").input_size),) == ((2, 3, 176, 176),)
    model = timm.create_model("resnet10t", pretrained=False)
    assert p.total_params == sum(t.numel() for t in model.parameters())
    with torch.device("meta"):
        same = graphprof.profile_model(timm.create_model("resnet10t"), input_shape=(2, 3, 176, 176))
    assert p.total_macs == same.total_macs
    with pytest.raises(graphprof.errors.ModelNotFoundError, match="did you mean hiera_tiny_224"):
        graphprof.profile_model("timm:hiera_tiny")
    # a timm function with keywords is still a factory spec
    q = graphprof.profile_model("timm:create_model?model_name=resnet10t", input_shape=(2, 3, 176, 176))
    assert q.total_macs == p.total_macs


def test_timm_keywords_after_a_question_mark_reach_create_model() -> None:
    """``timm:resnet18?drop_rate=0.1`` was taken for a user's factory: "timm has no attribute 'resnet18'"."""
    from graphprof.errors import ModelBuildError

    profile = graphprof.profile_model("timm:resnet18?drop_rate=0.1", input_shape=(1, 3, 32, 32))
    assert profile.total_macs == graphprof.profile_model("timm:resnet18", input_shape=(1, 3, 32, 32)).total_macs
    assert any("drop_rate=0.1" in note for note in profile.notes)
    with pytest.raises(ModelBuildError, match="warp"):
        graphprof.profile_model("timm:resnet18?warp=9", input_shape=(1, 3, 32, 32))
