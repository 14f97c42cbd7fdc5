"""Tensor parallelism per rank (issue 39): DTensor's ColwiseParallel / RowwiseParallel on a fake process
group, by a plan read from the model's data flow; per-rank figures checked by hand at 2 and 8 ranks, and
in 2-D with FSDP."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed as dist
from torch import nn
from typer.testing import CliRunner

from graphprof.errors import InvalidInputError
from graphprof.sharding import shard_profile
from graphprof_cli.main import app


class Blocks(nn.Module):
    """Three 64 -> 256 -> 64 blocks and a head; float32, a batch of 4."""

    def __init__(self, hidden: int = 256) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 64)) for _ in range(3))
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _flops(n: int) -> int:
    """One rank's step at tp:n, by hand (x: 4 x 64, no gradient; the loss: the sum of the 4 x 10 logits).

    Forward, per block: column-wise 2*4*64*(256/n) + its bias 4*256/n; ReLU 4*256/n; row-wise 2*4*(256/n)*64
    + its whole bias 4*64, which DTensor first divides by n (64 divisions, so the all-reduce adds it once);
    the head 2*4*64*10 + 40 and the loss's sum of 40: 3 * (264,192/n + 320) + 5,200.
    Backward, per block: row-wise input and weight gradients 2 * 131,072/n, its bias gradient (a sum of
    4*64), ReLU's 1,024/n, column-wise weight gradient 131,072/n and bias gradient 1,024/n, and its input
    gradient 131,072/n in the two blocks whose input needs one; the head 2*5,120 + 40:
    10,280 + 3 * (395,264/n + 256) + 2 * 131,072/n.  In all: 2,240,512/n + 17,208.
    """
    return 2_240_512 // n + 17_208


@pytest.mark.parametrize("n", [2, 8])
def test_tp_per_rank_figures_by_hand(n: int) -> None:
    model = Blocks()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    p = shard_profile(model, f"tp:{n}", input_shape=(4, 64))
    assert p.colwise == ("blocks.0.0", "blocks.1.0", "blocks.2.0") and p.rowwise == ("blocks.0.2", "blocks.1.2", "blocks.2.2")
    # per block: Linear(64, 256) column-wise holds 64*256/n weights and 256/n biases; Linear(256, 64) row-wise
    # 256*64/n weights and its 64 biases whole; the head's 650 replicated. tp:2: 3 * 16,576 + 650 = 50,378
    # elements = 201,512 B; tp:8: 3 * 4,192 + 650 = 13,226 = 52,904 B
    elements = 3 * (64 * 256 // n + 256 // n + 256 * 64 // n + 64) + 650
    assert elements * 4 == p.rank.param_bytes == p.analytic.param_bytes == {2: 201_512, 8: 52_904}[n]
    assert p.rank.grad_bytes == p.rank.param_bytes and p.rank.optimizer_bytes == 2 * p.rank.param_bytes
    # all-reduces: each row-wise output in the forward, B * d * 4 bytes = 4 * 64 * 4 = 1,024 B, three times;
    # each column-wise input gradient in the backward, 1,024 B, in blocks 1 and 2 (block 0's input, x, needs none)
    assert (
        (p.rank.all_reduce_bytes, p.rank.all_reduce_calls) == (5 * 1_024, 5) == (p.analytic.all_reduce_bytes, p.analytic.all_reduce_calls)
    )
    assert p.rank.all_gather_bytes == p.rank.reduce_scatter_bytes == p.rank.unsharded_bytes == 0
    assert p.rank.flops == _flops(n)  # tp:2 1,137,464; tp:8 297,272
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model as found
    assert not dist.is_initialized()


def test_tp_flops_relations() -> None:
    two, eight, plain = (shard_profile(Blocks(), s, input_shape=(4, 64)) for s in ("tp:2", "tp:8", "fsdp:2"))
    # the split part scales as 1/n, the replicated part (the head, row-wise biases, the loss: 17,208) stays
    assert two.rank.flops - 17_208 == 4 * (eight.rank.flops - 17_208) == 1_120_256
    assert two.analytic.flops == round(plain.analytic.flops / 2)  # the reference: the unsharded step / n
    assert eight.rank.activation_bytes < two.rank.activation_bytes < plain.rank.activation_bytes


def test_2d_fsdp_over_tp_by_hand() -> None:
    p = shard_profile(Blocks(), "fsdp:2,tp:2", input_shape=(4, 64))
    tp = shard_profile(Blocks(), "tp:2", input_shape=(4, 64))
    assert (p.shard, p.strategy, p.world) == ("fsdp:2,tp:2", "fsdp,tp", 4)
    # FSDP shards what tensor parallelism leaves a rank: 201,512 B / 2 (every dimension 0 is even: no padding)
    assert p.rank.param_bytes == 201_512 // 2 == p.analytic.param_bytes
    # each block's tp-local 16,576 elements (66,304 B) gathered forward and backward, the head's 2,600 B once
    assert p.rank.all_gather_bytes == 2 * 3 * 66_304 + 2_600 and p.rank.all_gather_calls == 7
    assert p.rank.reduce_scatter_bytes == 201_512 and p.rank.reduce_scatter_calls == 4
    assert p.rank.unsharded_bytes == 2 * 66_304
    assert (p.rank.all_reduce_bytes, p.rank.all_reduce_calls) == (5_120, 5)  # as tp:2: FSDP adds no all-reduce
    assert abs(p.rank.flops / tp.rank.flops - 1) < 0.001  # the same arithmetic (FSDP scales the gradients)
    assert not dist.is_initialized()


def test_a_model_without_a_plan_is_refused_in_one_line() -> None:
    conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
    with pytest.raises(InvalidInputError, match="no plan applies"):
        shard_profile(conv, "tp:2", input_shape=(2, 3, 8, 8))
    with pytest.raises(InvalidInputError, match=r"blocks.0.0's 100 outputs \(colwise\) do not split over 8 ranks"):
        shard_profile(Blocks(hidden=100), "tp:8", input_shape=(4, 64))
    assert not dist.is_initialized()


def test_the_plan_read_from_llama_is_hfs_own() -> None:
    """The data flow gives HF's hand-written ``base_model_tp_plan`` for LLaMA (its colwise/rowwise entries)."""
    pytest.importorskip("transformers")
    p = shard_profile("hf:llama?num_hidden_layers=2", "tp:2")
    hf = {"self_attn.q_proj": "colwise", "self_attn.k_proj": "colwise", "self_attn.v_proj": "colwise",
          "self_attn.o_proj": "rowwise", "mlp.gate_proj": "colwise", "mlp.up_proj": "colwise", "mlp.down_proj": "rowwise"}  # fmt: skip
    planned = {**dict.fromkeys(p.colwise, "colwise"), **dict.fromkeys(p.rowwise, "rowwise")}
    assert planned == {f"model.layers.{i}.{k}": v for i in range(2) for k, v in hf.items()}
    # per layer: 2 all-reduces in the forward (o_proj, down_proj), 5 in the backward (q, k, v, gate, up's
    # input gradients), each of 1 x 128 tokens x 256 features x 4 bytes = 131,072 B
    assert (p.rank.all_reduce_calls, p.rank.all_reduce_bytes) == (2 * 7, 2 * 7 * 131_072)


def test_shard_command_tp_and_its_json(tmp_path) -> None:
    from graphprof.schemas import validate

    path = tmp_path / "tp.json"
    done = CliRunner().invoke(app, ["shard", "--model", "hf:llama?num_hidden_layers=2", "tp:2", "--output", str(path), "--width", "160"])
    assert done.exit_code == 0, done.output
    assert "all-reduce per step" in done.output and "colwise: q_proj x2" in done.output
    data = json.loads(path.read_text())
    validate(data)
    assert data["shard"] == "tp:2" and data["rank"]["all_reduce_calls"] == 14


def test_fits_writes_json_that_fits_its_schema(tmp_path) -> None:
    from graphprof.schemas import validate

    path = tmp_path / "fits.json"
    argv = ["fits", "--model", "resnet18", "-b", "2", "--hardware", "h100", "--output", str(path)]
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    data = json.loads(path.read_text())
    validate(data)
    assert data["kind"] == "fits" and data["fits"] is True and data["peak_bytes"] == data["breakdown"]["total"]
    bad = CliRunner().invoke(app, [*argv[:-1], str(tmp_path / "fits.csv")])
    assert bad.exit_code != 0 and "fits writes JSON only" in bad.output and "Traceback" not in bad.output


def test_fits_per_rank_with_tp_reads_the_same_shards() -> None:
    from graphprof.training import plan_memory

    plan = plan_memory(Blocks(), shard="tp:2", input_shape=(4, 64))
    assert plan.shard == "tp:2" and plan.peak.breakdown.parameters == 201_512  # the tp:2 shards above
    assert any("over 2 ranks, colwise: blocks.*.0 x3; rowwise: blocks.*.2 x3" in n for n in plan.notes), plan.notes
    assert not dist.is_initialized()


def test_a_degree_that_splits_an_attention_head_is_refused_in_one_line() -> None:
    # hf:llama has 2 key/value heads of 64: over 4 ranks k_proj's 128 outputs split into 32, half a head,
    # and the attention's view(1, 128, -1, 64) cannot run on a rank's 32 columns
    done = CliRunner().invoke(app, ["shard", "--model", "hf:llama", "tp:4"])
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert done.exit_code == 2 and len(lines) == 1, done.output
    assert "split over 4 ranks" in lines[0] and "smaller tp degree" in lines[0] and "Traceback" not in done.output
