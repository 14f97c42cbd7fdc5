"""Tied weights through the sharded step: FSDP2 shards one embedding, not two (to_empty unties them)."""

from __future__ import annotations

import copy

import pytest
import torch

from graphprof.base.tied import retie, tied_groups
from graphprof.sharding.run import run_sharded_step
from graphprof.sharding.spec import ShardSpec
from graphprof.sharding.wraps import fake_world, shard_units, sharding_wraps

transformers = pytest.importorskip("transformers")


def _gpt2(tied: bool, device: str = "cpu") -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=64, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0
    )
    with torch.device(device):  # graphprof's catalogue builds on the meta device
        return transformers.GPT2LMHeadModel(config).eval()


def test_to_empty_unties_and_retie_ties_again() -> None:
    model = _gpt2(True, "meta")
    groups = tied_groups(model)
    assert groups == [("transformer.wte.weight", "lm_head.weight")]
    copied = copy.deepcopy(model).to_empty(device="cpu")
    assert copied.lm_head.weight is not copied.transformer.wte.weight  # what FSDP would shard twice
    retie(copied, groups)
    assert copied.lm_head.weight is copied.transformer.wte.weight


@pytest.mark.parametrize("tied", [True, False])
def test_sharded_step_shards_match_a_real_fsdp2_wrap_to_the_byte(tied: bool) -> None:
    # the real wrap: fully_shard on the real (not fake) model, same units, same fake process group of 4
    from torch.distributed.fsdp import fully_shard

    model = _gpt2(tied, "meta")
    ids = torch.zeros(1, 16, dtype=torch.int64)
    spec = ShardSpec(fsdp=4)
    with fake_world(spec) as meshes:
        mesh = meshes.dp
        step = run_sharded_step(model, (), {"input_ids": ids}, sharding_wraps(spec, meshes, (), {"input_ids": ids}, "gpt2"), None)
        real = _gpt2(tied)
        for unit in shard_units(real):
            fully_shard(unit, mesh=mesh)
        fully_shard(real, mesh=mesh)
        real_bytes = sum(p.to_local().numel() * p.element_size() for p in real.parameters())  # type: ignore[attr-defined]
    assert step.shard_bytes == real_bytes
    # wte is 1000 x 64 float32 = 256,000 bytes, 64,000 per rank: tied, one copy is sharded
    assert (step.shard_bytes - _gpt2(True).num_parameters() * 4 // 4 == 0) is tied  # type: ignore[operator]
