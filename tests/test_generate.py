"""Generation profiles: the KV cache, prefill and decode with a real transformers cache, exported and compiled models.

The numbers are checked by hand arithmetic (in the comments), by invariants (blocks sum to totals, the
affine sum equals profiling every step) and against eager profiles of the same model.
"""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest
import torch

import graphprof
from graphprof.errors import InvalidInputError, UnsafeLoadError
from graphprof.formulas import Cost
from graphprof.generate import kv_spec, profile_generation
from graphprof.generate.blocks import decoder_list
from graphprof.generate.estimate import _decode_profiles, _spec, prepare_generation
from graphprof.generate.phases import KVTraffic, exact_phase
from graphprof.models.hf import PRESETS

transformers = pytest.importorskip("transformers")

# hf:llama: hidden 256, MLP 688, 4 layers, 4 heads of 64, 2 KV heads, vocab 32000
# linear MACs per token and layer: q 256*256 + k 256*128 + v 256*128 + o 256*256 + MLP 3*256*688 = 724,992
LAYER_LINEAR = 65_536 + 32_768 + 32_768 + 65_536 + 3 * 256 * 688
LM_HEAD = 256 * 32_000


def _config(name: str):
    preset = dict(PRESETS[name])
    return transformers.AutoConfig.for_model(preset.pop("model_type"), **preset)


def test_kv_bytes_per_token_llama3_8b_exact():
    spec = kv_spec(_config("llama-3-8b"))
    assert spec.bytes_per_token(torch.bfloat16) == 131_072  # 2 * 32 layers * 8 KV heads * 128 * 2 bytes
    assert spec.bytes_per_token(torch.float32) == 2 * 131_072
    # with the 32 attention heads instead of the 8 KV heads the figure would be four times larger
    assert spec.attention_heads // spec.kv_heads == 4
    assert spec.size(1279, 2, torch.bfloat16) == 131_072 * 1279 * 2


@pytest.fixture(scope="module")
def small():
    return profile_generation("hf:llama", prompt_len=32, new_tokens=6, hardware="h100")


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_small_decode_macs_by_hand(small):
    # first step: the cache holds 32 tokens, the new one attends to 33 keys: QK^T and AV per head,
    # 4 heads * 64 * 33 * 2 = 16,896 per layer
    attention = 4 * 64 * 33 * 2
    assert small.decode_first.total.cost.macs == 4 * (LAYER_LINEAR + attention) + LM_HEAD == 11_159_552
    # the last step (context 36) attends to 37 keys
    assert small.decode_last.total.cost.macs == 4 * (LAYER_LINEAR + 4 * 64 * 37 * 2) + LM_HEAD


def test_small_blocks_sum_to_totals_and_split_per_layer(small):
    for phase in (small.prefill, small.decode_first, small.decode_last, small.decode_total):
        assert sum((b.cost for b in phase.blocks), Cost()) == phase.total.cost
        assert sum(b.lower_bound_s or 0.0 for b in phase.blocks) == pytest.approx(phase.total.lower_bound_s)
    names = [b.name for b in small.prefill.blocks]
    assert [f"model.layers.{i}" for i in range(4)] == [n for n in names if n.startswith("model.layers.")]
    assert names == [b.name for b in small.decode_first.blocks]
    layer = {b.name: b for b in small.prefill.blocks}["model.layers.0"]
    # prefill of 32 tokens: linear 32 * 724,992; causal attention counted in full, 4 heads * 32 * 32 * 64 * 2
    assert layer.cost.macs == 32 * LAYER_LINEAR + 4 * 32 * 32 * 64 * 2
    # logits_to_keep=1, as generate() passes it: the LM head runs on the last position only
    assert {b.name: b for b in small.prefill.blocks}["lm_head"].cost.macs == LM_HEAD


def test_small_kv_traffic(small):
    per_token = small.kv_bytes_per_token
    assert per_token == 2 * 4 * 2 * 64 * 2 == 2048
    assert small.decode_first.total.kv_bytes_written == per_token
    assert small.decode_first.total.kv_bytes_read == per_token * 32
    assert small.prefill.total.kv_bytes_written == per_token * 32
    assert small.kv_cache_bytes == per_token * (32 + 6 - 1)


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_affine_sum_equals_every_step_profiled():
    spec = _spec(32, 6, 1, None, None, "static", "h100")
    pm = prepare_generation("hf:llama", spec)
    kv, path = kv_spec(pm.model.config), decoder_list(pm.model)
    traffic = KVTraffic(kv, path, 1, spec.kv_dtype)
    every = exact_phase("decode_total", _decode_profiles(pm, spec, kv, path, list(range(32, 37))), spec.hardware, traffic)
    summed = profile_generation("hf:llama", prompt_len=32, new_tokens=6, hardware="h100").decode_total
    assert summed is not None and summed.forwards == every.forwards == 5
    assert summed.total.cost == every.total.cost
    assert [b.cost for b in summed.blocks] == [b.cost for b in every.blocks]
    assert summed.total.lower_bound_s == pytest.approx(every.total.lower_bound_s, rel=1e-12)
    assert summed.total.predicted_s == pytest.approx(every.total.predicted_s, rel=1e-12)


def test_graph_writes_one_token_per_step_into_the_static_cache():
    spec = _spec(32, 2, 2, None, None, "static", None)
    pm = prepare_generation("hf:llama", spec)
    kv, path = kv_spec(pm.model.config), decoder_list(pm.model)
    ((_, profile),) = _decode_profiles(pm, spec, kv, path, [32])
    written = sum(op.cost.bytes_written for _, op in profile.iter_ops() if op.op == "aten.index_copy_")
    assert written == kv.bytes_per_token(torch.bfloat16) * 2  # batch 2, one token each


def test_kv_dtype_float8_reprices_the_cache_exactly(small):
    fp8 = profile_generation("hf:llama", prompt_len=32, new_tokens=2, hardware="h100", kv_dtype="float8")
    assert fp8.kv_bytes_per_token == small.kv_bytes_per_token // 2
    assert fp8.decode_first is not None and small.decode_first is not None
    assert fp8.decode_first.total.cost.macs == small.decode_first.total.cost.macs
    # 32 cached tokens read and one written, one byte less per element: 1024 * 33 bytes fewer
    saved = small.decode_first.total.cost.bytes_moved - fp8.decode_first.total.cost.bytes_moved
    assert saved == 1024 * 33


def test_refuses_a_model_that_is_not_a_decoder():
    with pytest.raises(InvalidInputError):
        profile_generation("resnet18", prompt_len=4, new_tokens=2)
    with pytest.raises(InvalidInputError):
        profile_generation("hf:llama", prompt_len=0)
    with pytest.raises(InvalidInputError):
        profile_generation("hf:llama", prompt_len=4, cache="paged")


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_llama3_8b_prefill_compute_bound_decode_memory_bound_on_h100():
    g = profile_generation("hf:llama-3-8b", prompt_len=1024, new_tokens=2, hardware="h100")
    assert g.kv_bytes_per_token == 131_072
    assert g.prefill.total.bound == "compute-bound"
    step = g.decode_first
    assert step is not None and step.total.bound == "memory-bound"
    assert 0.9 < (step.total.arithmetic_intensity or 0) < 1.2  # every weight read once per token: ~1 FLOP/byte
    # by hand: linear weights 8,030,261,248 - embedding 128256*4096 - norms (65 * 4096) = 7,504,658,432 MACs;
    # attention 32 layers * 32 heads * 128 * 1025 keys * 2 = 268,697,600
    assert step.total.cost.macs == 7_504_658_432 + 268_697_600
    assert step.total.kv_bytes_read == 131_072 * 1024
    fit = g.fit
    assert fit is not None and fit.fits and fit.max_context == 8192  # the model's positions
    # bfloat16 parameters, plus the rotary buffers (inv_freq and its original copy: 2 * 64 float32 = 512 bytes)
    assert fit.weight_bytes == 8_030_261_248 * 2 + 512


def test_cli_generate_json():
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    result = CliRunner().invoke(
        app, ["generate", "--model", "hf:llama", "--prompt-len", "16", "--new-tokens", "3", "--hardware", "h100", "--output", "-"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kv_cache"]["bytes_per_token"] == 2048 and data["decode_steps"] == 2
    assert set(data["phases"]) == {"prefill", "decode_first", "decode_last", "decode_total"}
    # model FLOPs per token of the prefill's 16 tokens: train is 3 x forward, and the model's products are a
    # part of what graphprof counts (norms, softmax, rotary, residual adds are not model FLOPs)
    t = data["per_token"]
    assert t["tokens"] == 16 and t["model_flops_train"] == pytest.approx(3 * t["model_flops_forward"])
    assert 0 < t["model_flops_forward"] < t["counted_flops"] and t["executed_flops"] <= t["counted_flops"]


def test_cli_generate_report():
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["generate", "--model", "hf:llama", "--prompt-len", "16", "--new-tokens", "2", "--width", "160"])
    assert result.exit_code == 0, result.output
    assert "KV cache per token" in result.stdout and "model.layers.0-3 (x4, each)" in result.stdout


# ---- exported and compiled models -------------------------------------------------------------


@pytest.fixture(scope="module")
def resnet18_pt2(tmp_path_factory):
    import torchvision

    model = torchvision.models.resnet18().eval()
    path = tmp_path_factory.mktemp("pt2") / "resnet18.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(1, 3, 224, 224),)), path)
    return path


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_pt2_resnet18_same_macs_as_eager_with_module_names(resnet18_pt2):
    exported = graphprof.profile_model(str(resnet18_pt2))
    eager = graphprof.profile_model("resnet18")
    assert exported.total_macs == eager.total_macs == 1_814_073_344
    assert exported.total_flops == eager.total_flops
    assert {"conv1", "layer1.0.conv1", "fc"} <= {m.path for m in exported.modules}


def test_pt2_that_would_unpickle_is_refused(resnet18_pt2, tmp_path):
    bad = tmp_path / "bad.pt2"
    with zipfile.ZipFile(resnet18_pt2) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith("_weights_config.json"):
                config = json.loads(data)
                first = next(iter(config["config"]))
                config["config"][first]["use_pickle"] = True
                data = json.dumps(config).encode()
            dst.writestr(item, data)
    with pytest.raises(UnsafeLoadError, match="pickle"):
        graphprof.profile_model(str(bad))
    shutil.copy(resnet18_pt2, tmp_path / "good.pt2")
    assert graphprof.profile_model(str(tmp_path / "good.pt2")).total_macs == 1_814_073_344


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_compiled_resnet18_counts_as_eager():
    import torchvision

    model = torchvision.models.resnet18().eval()
    compiled = torch.compile(model)
    profile = graphprof.prepare(compiled, input_shape=(1, 3, 224, 224)).profile()
    assert profile.total_macs == 1_814_073_344
    assert any("_orig_mod" in n for n in profile.notes)


@pytest.mark.slow
def test_pt2_small_llama_same_macs_as_eager(tmp_path):
    from graphprof.models import resolve_model

    resolved = resolve_model("hf:llama", input_shape=(1, 32), device="cpu")
    path = tmp_path / "llama.pt2"
    torch.export.save(torch.export.export(resolved.model, (), dict(resolved.kwargs)), path)
    exported = graphprof.profile_model(str(path))
    eager = graphprof.profile_model("hf:llama", input_shape=(1, 32))
    assert exported.total_macs == eager.total_macs


@pytest.mark.slow
def test_real_generate_measured_beside_the_estimate():
    from graphprof.generate.measure import with_measurement

    g = with_measurement("hf:llama", prompt_len=32, new_tokens=6, dtype="float32", runs=2)
    m = g.measurement
    assert m is not None and m.runs == 2 and len(m.prefill_s) == 2
    assert len(m.decode_step_s) == 2 * 5  # every decode step of every run
    assert all(t > 0 for t in (*m.prefill_s, *m.decode_step_s))
    assert m.peak_memory_bytes is not None and m.peak_memory_bytes > 19_286_272 * 4  # at least the float32 weights
    assert g.hardware is not None and g.lower_bound is not None
