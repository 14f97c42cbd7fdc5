"""Sharded training per rank (issue 33): FSDP2's fully_shard over a fake process group, on a dry run,
checked against the analytic figures, and the process group left as found."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist
from torch import nn
from toys import Blocks
from typer.testing import CliRunner

from graphprof.errors import InvalidInputError
from graphprof.sharding import parse_shard, shard_profile
from graphprof_cli.main import app


def test_the_spec_is_parsed_once_and_a_bad_one_is_one_line() -> None:
    assert str(parse_shard("FSDP:64")) == "fsdp:64"
    assert str(parse_shard("tp:8,fsdp:4")) == "fsdp:4,tp:8" and parse_shard("fsdp:4, tp:8").world == 32
    for bad in (
        "fsdp",
        "pp:4",
        "fsdp:0",
        "tp:1",
        "fsdp:1,tp:2",
        "fsdp:x",
        "fsdp:²",
        "fsdp:99999999",
        "tp:2,tp:4",
        "fsdp:4,",
        "fsdp:512,tp:256",
    ):
        with pytest.raises(InvalidInputError, match="sharding"):
            parse_shard(bad)
    one = parse_shard("fsdp:1")  # one GPU, unsharded: what torchtitan runs on a single device
    assert (str(one), one.world, one.strategy) == ("fsdp:1", 1, "")


def test_one_rank_holds_the_whole_model_and_sends_nothing() -> None:
    p = shard_profile(Blocks(depth=3, head=10), "fsdp:1", input_shape=(4, 64), hardware="h100")
    assert p.shard == "fsdp:1" and p.world == 1
    assert p.rank.param_bytes == p.analytic.param_bytes == 99_914 * 4  # 3 x 33,088 + 650 parameters in float32
    assert (p.rank.all_gather_bytes, p.rank.reduce_scatter_bytes, p.rank.all_gather_calls) == (0, 0, 0)
    assert p.step is not None and p.step.breakdown.communication_s == 0.0 and p.step.communication_total_s == 0.0
    assert p.step.time_s == pytest.approx(sum(dataclasses.astuple(p.step.breakdown)))


@pytest.mark.parametrize("world", [2, 8, pytest.param(1024, marks=pytest.mark.slow)])
def test_per_rank_figures_match_the_analytic_ones_by_hand(world: int) -> None:
    model = Blocks(depth=3, head=10)  # 3 x 33,088 + 650 = 99,914 parameters
    before = {k: v.clone() for k, v in model.state_dict().items()}
    p = shard_profile(model, f"fsdp:{world}", input_shape=(4, 64))
    block, head = 33_088 * 4, 650 * 4  # bytes in float32: 64*256 + 256 + 256*64 + 64, 64*10 + 10
    # FSDP pads each parameter's first dimension to a multiple of the world size: the head's 10 rows and
    # 10 biases become 16 each on 8 ranks (1,040 elements), 1,024 each on 1,024 ranks
    padded_head = {2: 650, 8: 16 * 64 + 16, 1024: 1024 * 64 + 1024}[world] * 4
    padded_block = {2: 33_088, 8: 33_088, 1024: 1024 * 64 + 1024 + 1024 * 256 + 1024}[world] * 4
    # each block gathered forward and backward, the root's own parameters (the head) once
    assert p.rank.all_gather_bytes == 2 * 3 * padded_block + padded_head
    assert p.analytic.all_gather_bytes == 2 * 3 * block + head
    assert p.rank.reduce_scatter_bytes == 3 * padded_block + padded_head  # every gradient once
    assert (p.rank.all_gather_calls, p.rank.reduce_scatter_calls) == (7, 4)
    # shards: FSDP pads each parameter's first dimension to a multiple of the world size
    assert p.analytic.param_bytes == round((3 * block + head) / world)
    assert p.rank.param_bytes == (3 * padded_block + padded_head) // world
    assert p.rank.optimizer_bytes == 2 * p.rank.param_bytes
    assert abs(p.rank.flops / p.analytic.flops - 1) < 0.01  # the same arithmetic, plus the gradients' scaling
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model as found
    assert not dist.is_initialized()  # the fake process group is gone


def test_a_process_group_of_the_users_is_refused_and_kept(tmp_path) -> None:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        with pytest.raises(InvalidInputError, match="already exists"):
            shard_profile(Blocks(depth=3, head=10), "fsdp:4", input_shape=(4, 64))
        assert dist.is_initialized()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_the_shard_command_prints_one_rank(tmp_path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["shard", "--model", "hf:llama", "fsdp:8", "--hardware", "h100",
                               "--output", str(tmp_path / "s.json"), "--width", "120"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "all-gather per step" in done.output and "fits" in done.output
    from graphprof.schemas import validate

    validate(__import__("json").loads((tmp_path / "s.json").read_text()))


@pytest.mark.slow  # Llama-3-8B on 64 ranks and Llama-3-70B on 512, dry runs of a training step: about a minute
@pytest.mark.parametrize("spec, world", [("hf:llama-3-8b", 64), ("hf:llama-3-70b", 512)])
def test_llama_at_full_size_within_one_percent(spec: str, world: int) -> None:
    p = shard_profile(spec, f"fsdp:{world}", dtype="bfloat16", hardware="h100")
    d = p.differences()
    for key in ("flops", "param_bytes", "grad_bytes", "optimizer_bytes", "all_gather_bytes", "reduce_scatter_bytes"):
        assert abs(d[key]) <= 0.01, (key, d[key])


def test_a_layout_too_large_to_finish_is_refused_before_the_step() -> None:
    """``--shard fsdp:65536`` on Llama-3-70B ran past ten minutes: FSDP2 works per tensor and per rank."""
    import time

    from graphprof.errors import InvalidInputError
    from graphprof.sharding import shard_profile

    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(100)])  # 200 parameter tensors
    start = time.perf_counter()
    with pytest.raises(InvalidInputError, match="200 parameter tensors x 8,192 ranks"):
        shard_profile(model, "fsdp:8192", input_shape=(2, 4))
    assert time.perf_counter() - start < 10


def test_the_peak_with_float32_master_shards_is_given_beside_the_counted_one() -> None:
    p = shard_profile(Blocks(depth=3, head=10), "fsdp:2", input_shape=(4, 64), dtype="bfloat16", hardware="h100")
    assert p.step is not None and p.step.master_dtype == "float32" and p.step.master_scale == 2.0
    shards = p.rank.param_bytes + p.rank.grad_bytes + p.rank.optimizer_bytes  # counted in bf16 by the dry run
    assert p.master_memory_bytes == p.rank.memory_bytes + shards  # each of the three twice as large in float32
    assert p.to_dict()["step"]["memory_bytes_master"] == p.master_memory_bytes
    same = shard_profile(Blocks(depth=3, head=10), "fsdp:2", input_shape=(4, 64), hardware="h100")  # float32 step
    assert same.master_memory_bytes is None and same.to_dict()["step"]["memory_bytes_master"] is None
