"""Independent references: torch's FlopCounterMode on every torchvision classification model, and the
analytic count of a LLaMA.

FlopCounterMode counts contractions only, two FLOPs per multiply-accumulate, so graphprof's MACs must
equal its total / 2. It does not see the fused inference kernel of ``nn.MultiheadAttention``
(``aten._native_multi_head_attention``); for those models the same count with the fast path disabled
(which runs the same products as separate matmuls) must agree with graphprof's count on the fused path.
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode

import graphprof
from graphprof.models import list_models, resolve_model

CLASSIFICATION = [m.name for m in list_models() if m.family == "classification"]


def flop_counter_macs(model: torch.nn.Module, args: tuple, kwargs: dict, *, fastpath: bool = True) -> int:
    """FlopCounterMode's total / 2 on a dry run (FakeTensors), optionally with the MHA fast path off."""
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(fastpath)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake_args = torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, (args, kwargs))
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                model(*fake_args[0], **fake_args[1])
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)
    return counter.get_total_flops() // 2


@pytest.mark.parametrize("name", CLASSIFICATION)
@pytest.mark.slow  # zoo-wide: every classification model against FlopCounterMode, about 4 min
def test_macs_equal_flop_counter_mode(name):
    resolved = resolve_model(name, device="meta")
    model = resolved.model.eval()
    profile = graphprof.profile_model(model, example_inputs=resolved.args, example_kwargs=resolved.kwargs)
    fused = any(op.op == "aten._native_multi_head_attention" for _, op in profile.iter_ops())
    # FlopCounterMode does not count the fused MHA kernel, which graphprof's CPU dry run records where the eager
    # forward runs it (the ViTs): it is held against the same products run as separate matmuls, the fast path off
    # (on this meta-device model it is off in effect anyway: the module refuses the meta device)
    assert flop_counter_macs(model, resolved.args, resolved.kwargs, fastpath=False) == profile.total_macs
    assert fused == name.startswith("vit_")  # the torchvision models built on nn.MultiheadAttention


def test_llama_macs_equal_analytic_count():
    resolved = resolve_model("hf:llama?num_hidden_layers=2", device="meta")
    model, kwargs = resolved.model, resolved.kwargs
    cfg = model.config
    batch, seq = kwargs["input_ids"].shape
    tokens = batch * seq
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    kv = cfg.num_key_value_heads * head_dim
    per_layer_weights = (
        cfg.hidden_size * cfg.hidden_size  # q_proj
        + 2 * cfg.hidden_size * kv  # k_proj, v_proj
        + cfg.hidden_size * cfg.hidden_size  # o_proj
        + 3 * cfg.hidden_size * cfg.intermediate_size  # gate, up, down
    )
    weights = cfg.num_hidden_layers * per_layer_weights + cfg.hidden_size * cfg.vocab_size  # + lm_head
    # QK^T and attention x V, per query head, over the full (unmasked) score matrix
    attention = cfg.num_hidden_layers * 2 * batch * cfg.num_attention_heads * seq * seq * head_dim
    profile = graphprof.profile_model("hf:llama?num_hidden_layers=2")
    assert profile.total_macs == tokens * weights + attention


@pytest.mark.parametrize("name", ["yolov8n", "yolo11n"])
@pytest.mark.slow  # YOLO against FlopCounterMode, about 10 s each
def test_yolo_macs_equal_flop_counter_mode(name):
    resolved = resolve_model(name)
    model = resolved.model.eval()
    with torch.no_grad():
        model(*resolved.args)  # YOLO initialises its anchors on the first forward
    profile = graphprof.profile_model(model, example_inputs=resolved.args)
    assert profile.unsupported == ()
    assert profile.total_macs == flop_counter_macs(model, resolved.args, {})


@pytest.mark.slow  # Ultralytics' own counter, about 13 s
def test_yolo_agrees_with_ultralytics_own_count():
    """Ultralytics reports GFLOPs from thop (2 x its MACs, plus some element-wise work): within 2%."""
    from ultralytics.utils.torch_utils import get_flops

    resolved = resolve_model("yolov8n")
    profile = graphprof.profile_model("yolov8n")
    assert 2 * profile.total_macs / 1e9 == pytest.approx(get_flops(resolved.model, 640), rel=0.02)
