"""Issue 51: activation checkpointing is one rule for a sharded step's memory and its time.

``graphprof shard --fits --checkpoint`` plans the step with every FSDP unit checkpointed as the priced step
recomputes it, and ``fsdp:auto``'s checkpointed candidate checkpoints the very blocks its priced step recomputes
(before, it checkpointed every candidate block, the embedding and the LM head included, while the step it
priced recomputed the decoder layers only).
"""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from graphprof.errors import InvalidInputError
from graphprof.sharding import StepOptions
from graphprof.sharding.checkpoint import unit_checkpoint, unit_names

LLAMA = "hf:llama?num_hidden_layers=2"


def _plan(checkpoint: str) -> Any:
    from graphprof.training import plan_memory

    return plan_memory(LLAMA, shard="fsdp:2", hardware="h100", dtype="bfloat16", input_shape=(2, 128), checkpoint=checkpoint)


def test_fits_keeps_less_as_checkpointing_recomputes_more() -> None:
    none, selective, full = (_plan(c) for c in ("none", "selective", "full"))
    # selective keeps attention's outputs and every other mm of each layer; full keeps the layers' inputs only
    assert none.saved_activation_bytes > selective.saved_activation_bytes > full.saved_activation_bytes > 0
    assert none.peak_bytes > selective.peak_bytes > full.peak_bytes
    assert any("checkpointing 'full'" in n for n in full.notes) and not any("checkpointing" in n for n in none.notes)


def test_a_budget_and_a_checkpoint_policy_are_refused_together() -> None:
    from graphprof.training import plan_memory

    with pytest.raises(InvalidInputError, match="not both"):
        plan_memory(LLAMA, shard="fsdp:2", hardware="h100", memory_budget="1GB", checkpoint="full")


def test_the_command_plans_with_the_checkpoint_it_is_given() -> None:
    from graphprof_cli.main import app

    def peak(checkpoint: str) -> str:
        args = ["shard", "--model", LLAMA, "fsdp:2", "--fits", "--hardware", "h100", "--dtype", "bf16", "--seq-len", "128",
                "--checkpoint", checkpoint]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())

    none, full = peak("none"), peak("full")
    assert "checkpointing 'full'" in full and "checkpointing" not in none
    assert none != full


def test_the_units_are_the_decoder_layers_not_the_embedding_or_the_head() -> None:
    from graphprof.session import build_model

    model = build_model(LLAMA).model
    assert unit_names(model) == ["model.layers.0", "model.layers.1"]
    assert unit_checkpoint("none") is None


def _wrapped(model: Any) -> list[str]:
    return [n for n, m in model.named_modules() if type(m).__name__ == "CheckpointWrapper"]


def test_fsdp_auto_checkpoints_the_blocks_its_priced_step_recomputes(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof.sharding.profile as shard_module
    import graphprof.training.ranks as ranks
    from graphprof.session import build_model
    from graphprof.sharding import shard_profile

    searched: list[tuple[Any, ...]] = []
    real_search = ranks._search

    def search(step: Any, memory: int, limit: int, wraps: tuple[Any, ...], **run: Any) -> Any:
        searched.append(wraps)
        return real_search(step, memory, limit, wraps, **run)

    monkeypatch.setattr(ranks, "_search", search)
    ranks.plan_ranks(LLAMA, "h100", dtype="bf16", rank=False, max_world=8)
    (full,) = searched[1]
    checkpointed = [n.replace("._checkpoint_wrapped_module", "") for n in _wrapped(full(build_model(LLAMA).model))]

    priced: list[list[str]] = []
    real_price = shard_module.price_step

    def price(step: Any, spec: Any, device: Any, plain: Any, blocks: list[str], options: Any) -> Any:
        priced.append(list(blocks))
        return real_price(step, spec, device, plain, blocks, options)

    monkeypatch.setattr(shard_module, "price_step", price)
    shard_profile(LLAMA, "fsdp:2", hardware="h100", dtype="bf16", seq_len=32, timing=StepOptions(checkpoint="full"))
    assert checkpointed == priced[0] == ["model.layers.0", "model.layers.1"]
