"""Recurrent layers, grouped (MoE) products, Bilinear, weight_norm and user-registered custom ops.

Per token and layer-direction, an LSTM of input size I and hidden size H costs 4H(I + H) MACs, a GRU
3H(I + H), an RNN H(I + H). Element-wise gate work per token and layer-direction (H hidden units, G gates,
rates: sigmoid 4, tanh 1, relu 1, add / mul 1; see graphprof.formulas.recurrent):
biases 2GH (both b_ih and b_hh) + gate sum GH + LSTM 18H / GRU 13H / RNN 1H.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from toys import LinearThen

import graphprof
from graphprof.base.choices import OpStatus
from graphprof.errors import FormulaRegistryError
from graphprof.formulas import Cost, TensorMeta, op_cost, op_status

aten = torch.ops.aten


def _profile(model: nn.Module, *inputs: torch.Tensor) -> graphprof.Profile:
    return graphprof.profile_model(model, example_inputs=inputs)


def _ops(profile: graphprof.Profile) -> set[str]:
    return {r.op for row in profile.layers for r in row.ops}


# ---- recurrent layers -----------------------------------------------------------------------------------


def test_lstm_bidirectional_two_layers_hand_count() -> None:
    p = _profile(nn.LSTM(8, 16, num_layers=2, bidirectional=True), torch.randn(5, 3, 8))
    # 15 tokens; layer 0: 4*16*(8+16) = 1536 per direction; layer 1 input is 2*16: 4*16*(32+16) = 3072
    # (1536 + 3072) * 2 directions * 15 tokens = 138240
    assert p.total_macs == 138_240
    # element-wise per token and layer-direction: biases 2*64 + gate sum 64 + 18*16 = 480; 4 layer-dirs
    # FLOPs = 2 * 138240 + 15 * 4 * 480 = 276480 + 28800 = 305280
    assert p.total_flops == 305_280
    assert "aten.mkldnn_rnn_layer" in _ops(p)
    assert not p.unsupported


def test_fused_lstm_counts_as_its_decomposition() -> None:
    model, x = nn.LSTM(8, 16, num_layers=2, bidirectional=True), torch.randn(5, 3, 8)
    fused = _profile(model, x)
    with torch.backends.mkldnn.flags(enabled=False):
        decomposed = _profile(model, x)
    assert "aten.mkldnn_rnn_layer" not in _ops(decomposed)  # addmm + sigmoid/tanh/mul/add instead
    assert (fused.total_macs, fused.total_flops) == (decomposed.total_macs, decomposed.total_flops)


def test_lstm_proj_size() -> None:
    p = _profile(nn.LSTM(8, 16, proj_size=4), torch.randn(5, 3, 8))
    # W_ih 64x8, W_hh 64x4 (hidden state is projected), W_hr 4x16: 512 + 256 + 64 = 832 per token; 15 tokens
    assert p.total_macs == 15 * 832 == 12_480


def test_gru_and_rnn_hand_count() -> None:
    gru = _profile(nn.GRU(8, 16), torch.randn(5, 3, 8))
    # 15 tokens * 3*16*(8+16) = 15 * 1152 = 17280; element-wise 2*48 + 48 + 13*16 = 352 per token
    assert gru.total_macs == 17_280
    assert gru.total_flops == 2 * 17_280 + 15 * 352
    rnn = _profile(nn.RNN(8, 16, nonlinearity="relu", num_layers=2), torch.randn(5, 3, 8))
    # layer 0: 16*(8+16) = 384, layer 1: 16*(16+16) = 512; 15 tokens -> 13440
    assert rnn.total_macs == 15 * (384 + 512) == 13_440
    # element-wise: 2*16 biases + 16 sum + 16 relu = 64 per layer per token
    assert rnn.total_flops == 2 * 13_440 + 15 * 2 * 64


def test_cells() -> None:
    lstm = _profile(nn.LSTMCell(8, 16), torch.randn(3, 8))
    assert lstm.total_macs == 3 * 64 * (8 + 16)  # 4608
    assert lstm.total_flops == 2 * 4608 + 3 * 480
    gru = _profile(nn.GRUCell(8, 16, bias=False), torch.randn(3, 8))
    # no biases: gate sum 48 + 13 * 16 = 256 per row
    assert gru.total_macs == 3 * 48 * 24
    assert gru.total_flops == 2 * 3456 + 3 * 256


def test_packed_sequence_counts_only_real_tokens() -> None:
    class Packed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(8, 16, bidirectional=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(nn.utils.rnn.pack_padded_sequence(x, [5, 3, 2]))[0].data

    p = graphprof.profile_model(Packed(), input_shape=(5, 3, 8))
    # lengths 5 + 3 + 2 = 10 tokens (not 15); 1536 MACs per token and direction -> 10 * 1536 * 2 = 30720
    assert p.total_macs == 30_720
    assert not p.unsupported


def test_cudnn_rnn_formula_on_hand_made_shapes() -> None:
    # 2-layer bidirectional LSTM, I=8, H=16, proj_size=4, packed: batch_sizes (3, 3, 2, 1, 1) = 10 tokens
    m = lambda *s: TensorMeta(s, torch.float16)  # noqa: E731
    weights = []
    for layer in range(2):
        for _direction in range(2):
            in_size = 8 if layer == 0 else 2 * 4
            weights += [m(64, in_size), m(64, 4), m(64), m(64), m(4, 16)]
    args = (m(10, 8), weights, 5, None, m(4, 3, 4), m(4, 3, 16), 2, 16, 4, 2, False, 0.0, False, True, [3, 3, 2, 1, 1])
    out = (m(10, 8), m(4, 3, 4), m(4, 3, 16), m(1), m(1))
    cost = op_cost(aten._cudnn_rnn.default, args, {}, out)
    # per token: layer 0: 64*8 + 64*4 + 4*16 = 832 per direction; layer 1: 64*8 + 256 + 64 = 832 too
    # 4 layer-directions * 832 * 10 tokens = 33280
    assert cost.macs == 33_280
    # element-wise per token: biases 4 * 128 = 512; 4 layer-dirs * (64 + 18 * 16) = 1408
    assert cost.flops == 2 * 33_280 + 10 * (512 + 1408)
    backward_args = (
        args[0], weights, 5, m(1), args[4], args[5], m(10, 8), m(10, 8), None, None,
        2, 16, 4, 2, False, 0.0, True, True, [3, 3, 2, 1, 1], None, m(1), [True, False, False, True],
    )  # fmt: skip
    grad = op_cost(aten._cudnn_rnn_backward.default, backward_args, {}, (m(10, 8), m(4, 3, 4), m(4, 3, 16), weights))
    assert grad.macs == 2 * 33_280  # input gradients + weight gradients


def test_every_recurrent_kernel_is_counted() -> None:
    names = [
        "mkldnn_rnn_layer", "mkldnn_rnn_layer_backward", "_cudnn_rnn", "_cudnn_rnn_backward", "miopen_rnn",
        "lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
        "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
    ]  # fmt: skip
    assert all(op_status(getattr(aten, n)) is OpStatus.COUNTED for n in names)


# ---- Bilinear, weight_norm, grouped products --------------------------------------------------------------


def test_bilinear() -> None:
    p = _profile(nn.Bilinear(3, 4, 5), torch.randn(7, 3), torch.randn(7, 4))
    # 7 rows * 5 outputs * 3 * 4 = 420 terms x1_i A_oij x2_j: 420 MACs, 3 * 420 FLOPs + 35 bias adds
    assert p.total_macs == 420
    assert p.total_flops == 3 * 420 + 35
    assert "aten._trilinear" in _ops(p)


def test_weight_norm() -> None:
    model = nn.utils.parametrizations.weight_norm(nn.Linear(6, 5))
    p = _profile(model, torch.randn(2, 6))
    assert not p.unsupported
    wn = [r for row in p.layers for r in row.ops if r.op == "aten._weight_norm_interface"]
    assert len(wn) == 1
    # v is 5x6 = 30, g is 5: 3 * 30 + 2 * 5 = 100
    assert wn[0].cost.flops == 100
    assert p.total_macs == 2 * 6 * 5


def test_grouped_mm_counts_rows_through_one_expert_each() -> None:
    m = lambda *s: TensorMeta(s, torch.bfloat16)  # noqa: E731
    # 12 routed token rows of K=8 through 4 experts of (8, 16): 12 * 8 * 16 = 1536, whatever the split
    cost = op_cost(aten._grouped_mm.default, (m(12, 8), m(4, 8, 16), TensorMeta((4,), torch.int32)), {}, m(12, 16))
    assert cost.macs == 1536
    # batched 3-D x 3-D: 4 * 5 * 8 * 16 = 2560
    assert op_cost(aten._grouped_mm.default, (m(4, 5, 8), m(4, 8, 16)), {}, m(4, 5, 16)).macs == 2560


# ---- custom ops ---------------------------------------------------------------------------------------------


@torch.library.custom_op("graphprof_test::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale_rows.register_fake
def _(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.empty_like(x)


class _WithCustomOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale_rows(self.fc(x), 2.0)


def test_custom_op_without_formula_is_named_and_the_rest_counted() -> None:
    op = torch.ops.graphprof_test.scale_rows
    if op_status(op) is OpStatus.COUNTED:  # registered by the test below in an earlier run of this process
        pytest.skip("formula already registered in this process")
    p = _profile(_WithCustomOp(), torch.randn(3, 4))
    assert [u.op for u in p.unsupported] == ["graphprof_test.scale_rows"]
    assert p.total_macs == 3 * 4 * 6  # the Linear is still counted: 72


@torch.library.custom_op("graphprof_test::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def test_register_formula_for_a_custom_op() -> None:
    graphprof.register_formula(double, lambda x, *, out: Cost(flops=out.numel))
    p = _profile(LinearThen(4, 6, double), torch.randn(3, 4))
    assert not p.unsupported
    # Linear: 72 MACs, 144 FLOPs + 18 bias adds; double: 18 multiplies -> 180
    assert (p.total_macs, p.total_flops) == (72, 144 + 18 + 18)
    with pytest.raises(FormulaRegistryError, match="already has a cost formula"):
        graphprof.register_formula("graphprof_test::double", lambda x, *, out: Cost())
    with pytest.raises(FormulaRegistryError):
        graphprof.register_formula(aten.mm, lambda *a, out: Cost())  # graphprof's own formula stays


def test_register_formula_rejects_a_non_cost_result() -> None:
    @torch.library.custom_op("graphprof_test::bad", mutates_args=())
    def bad(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    graphprof.register_formula(bad, lambda x, *, out: 5)
    x = TensorMeta((2,), torch.float32)
    with pytest.raises(FormulaRegistryError, match="not a graphprof Cost"):
        op_cost(torch.ops.graphprof_test.bad.default, (x,), {}, x)


# ---- mixture of experts (transformers) -------------------------------------------------------------------


def test_mixtral_moe_dry_run_counts_active_experts() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.MixtralConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        num_local_experts=8, num_experts_per_tok=2, vocab_size=1000,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    p = graphprof.profile_model(model, example_kwargs={"input_ids": torch.zeros(1, 16, dtype=torch.long, device="meta")})
    assert p.execution == "dry-run"
    assert not p.unsupported
    grouped = [r for row in p.layers for r in row.ops if r.op == "aten._grouped_mm"]
    assert len(grouped) == 4  # gate_up and down per layer, 2 layers
    # 16 tokens x top-2 = 32 routed rows per layer; gate_up 64 -> 256, down 128 -> 64:
    # 32 * (64 * 256 + 128 * 64) = 786432 per layer, 1572864 for both
    assert sum(r.cost.macs for r in grouped) == 1_572_864
    (note,) = [n for n in p.notes if n.startswith("mixture of experts")]
    assert "1,572,864 MACs for the active experts" in note
    assert "all 8 experts on every token: 6,291,456 MACs" in note  # x 8 / 2


@pytest.mark.parametrize("kind", ["qwen2_moe", "deepseek_v3"])
def test_other_moe_families_count_routed_experts(kind: str) -> None:
    transformers = pytest.importorskip("transformers")
    common = dict(
        hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_attention_heads=4, num_experts_per_tok=2, vocab_size=1000
    )
    if kind == "qwen2_moe":
        config = transformers.Qwen2MoeConfig(
            **common, num_hidden_layers=2, num_key_value_heads=2, num_experts=8, shared_expert_intermediate_size=64
        )
    else:  # the first layer dense, then two MoE layers; multi-head latent attention
        config = transformers.DeepseekV3Config(
            **common, num_hidden_layers=3, first_k_dense_replace=1, num_key_value_heads=4, n_routed_experts=8,
            n_group=2, topk_group=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
            v_head_dim=16,
        )  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    p = graphprof.profile_model(model, example_kwargs={"input_ids": torch.zeros(1, 16, dtype=torch.long, device="meta")})
    assert p.execution == "dry-run" and not p.unsupported
    grouped = [r for row in p.layers for r in row.ops if r.op == "aten._grouped_mm"]
    assert len(grouped) == 4  # gate_up and down in each of the two MoE layers
    # 16 tokens x top-2 = 32 routed rows; gate_up 64 -> 2*32, down 32 -> 64: 32*64*64 + 32*32*64 = 196,608 per layer
    assert sum(r.cost.macs for r in grouped) == 2 * 196_608
    (note,) = [n for n in p.notes if n.startswith("mixture of experts")]
    assert "393,216 MACs for the active experts" in note and "all 8 experts on every token: 1,572,864 MACs" in note
