"""Will a training step fit (issue 39, point 1): the simulated step's peak by what holds it, checked by
hand on one layer, against the CPU allocator on real steps, and per rank under FSDP."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from toys import Blocks
from typer.testing import CliRunner

from graphprof.base.choices import Phase
from graphprof.errors import InvalidInputError
from graphprof.models import resolve_model
from graphprof.training import measure_step, parse_memory, plan_memory
from graphprof_cli.main import app


def test_one_linear_layer_by_hand() -> None:
    """Linear(1024, 1024), batch 8, float32, AdamW one tensor at a time (torch's CPU default)."""
    plan = plan_memory(nn.Linear(1024, 1024), input_shape=(8, 1024), foreach=False)
    peak = plan.peak
    assert peak.phase is Phase.OPTIMIZER and peak.module == "optimizer.step"
    b = peak.breakdown
    assert b.parameters == 1024 * 1024 * 4 + 1024 * 4  # 4,194,304 + 4,096 = 4,198,400
    assert b.gradients == b.parameters  # one gradient per parameter, held by .grad until zero_grad
    assert b.optimizer_state == 2 * b.parameters + 2 * 4  # two moments + a float32 step count per parameter
    assert b.inputs == 8 * 1024 * 4  # 32,768
    assert b.activations == 0  # a Linear on an input that needs no grad saves only the input and the weight
    # AdamW's denominator for the weight: exp_avg_sq.sqrt() (4 MiB) / bias_correction (4 MiB more) at once
    assert b.transients == 2 * 1024 * 1024 * 4
    assert b.total == plan.peak_bytes == 25_214_984


def test_breakdowns_sum_and_phases_are_in_order() -> None:
    plan = plan_memory("resnet18", batch_size=2, hardware="h100")
    assert [p.phase for p in plan.phases] == [Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER]
    for p in plan.phases:
        d = p.breakdown.to_dict()
        assert d.pop("total") == sum(d.values())
    assert plan.fits is True and plan.device_memory_bytes == 80 * 10**9
    assert plan.foreach  # a GPU preset: torch's multi-tensor optimizer step
    assert plan.to_dict()["peak_bytes"] == plan.peak_bytes


@pytest.mark.slow
@pytest.mark.parametrize(("name", "batch"), [("resnet18", 4), ("hf:llama?num_hidden_layers=2", 2), ("pyg:gcn?num_nodes=2000", None)])
def test_predicted_peak_within_ten_percent_of_the_allocator(name: str, batch: int | None) -> None:
    plan = plan_memory(name, batch_size=batch, foreach=False)
    torch.manual_seed(0)
    built = resolve_model(name, batch_size=batch, device="cpu")
    measured = measure_step(built.model, tuple(built.args), dict(built.kwargs))
    assert abs(plan.peak_bytes / measured.peak_bytes - 1) < 0.10, (plan.peak_bytes, measured.peak_bytes)


def test_per_rank_under_fsdp() -> None:
    # four 64 -> 256 -> 64 blocks: FSDP shards each (33,088 parameters) over the ranks
    whole = plan_memory(Blocks(depth=4), input_shape=(32, 64), foreach=False)
    rank = plan_memory(Blocks(depth=4), input_shape=(32, 64), foreach=False, shard="fsdp:4")
    assert whole.peak.breakdown.parameters == 4 * 33_088 * 4  # 529,408 B
    # each parameter's first dimension split in 4 (256 and 64 rows divide evenly): a quarter each
    assert rank.peak.breakdown.parameters == whole.peak.breakdown.parameters // 4
    assert rank.peak.breakdown.optimizer_state < whole.peak.breakdown.optimizer_state / 3
    assert rank.saved_activation_bytes == whole.saved_activation_bytes  # the same per-rank batch
    assert rank.shard == "fsdp:4" and not torch.distributed.is_initialized()


def test_memory_sizes() -> None:
    assert parse_memory("40GB") == 40 * 10**9
    assert parse_memory("1.5 GiB") == 3 * 2**29
    for bad in ("", "-3GB", "12XB", "nan", "GB"):
        with pytest.raises(InvalidInputError):
            parse_memory(bad)


def test_cli_fits_and_its_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["fits", "--model", "resnet18", "-b", "2", "--hardware", "h100", "--width", "160"])
    assert result.exit_code == 0, result.output
    assert "estimated peak" in result.output and "fits" in result.output and "optimizer state" in result.output
    # AdamW by default, as `graphprof shard --fits`: two moments per parameter; SGD's momentum is one
    adamw = runner.invoke(app, ["fits", "--model", "resnet18", "-b", "2", "-o", "-"])
    sgd = runner.invoke(app, ["fits", "--model", "resnet18", "-b", "2", "--optimizer", "sgd", "-o", "-"])
    assert adamw.exit_code == sgd.exit_code == 0, adamw.output + sgd.output
    state = [json.loads(r.stdout)["breakdown"]["optimizer_state"] for r in (adamw, sgd)]
    params = 11_689_512 * 4  # resnet18's parameters in float32
    assert state[1] == params and state[0] >= 2 * params, state


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["fits", "--model", "resnet18", "--memory-budget", "2GB"], "hardware"),
        (["fits", "--model", "resnet18", "--memory-budget", "lots"], "memory 'lots'"),
        (["shard", "--model", "resnet18", "fsdp:auto", "--fits"], "--hardware"),
        (["shard", "--model", "resnet18", "pp:2", "--fits"], "fsdp"),
    ],
)
def test_cli_plan_mistakes_are_one_line_and_exit_2(argv: list[str], says: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_cli_shard_fits_per_rank() -> None:
    result = CliRunner().invoke(
        app, ["shard", "--model", "hf:llama?num_hidden_layers=2", "fsdp:4", "--fits", "--hardware", "h100", "--width", "160"]
    )
    assert result.exit_code == 0, result.output
    assert "fsdp:4 per rank" in result.output and "estimated peak per rank" in result.output
