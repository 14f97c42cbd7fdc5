"""The dry run's fallbacks, one ladder (graphprof.base.ladder): five rungs in order on every profile, each
with what it settled on and the options it passed over, in the JSON and the report alike."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import graphprof
from graphprof.base.ladder import Fallback, Rung
from graphprof_cli.main import app

RUNGS = [Rung.BUILD, Rung.CAPTURE, Rung.TENSORS, Rung.VALUES, Rung.EXECUTION]


def test_a_plain_model_takes_the_first_option_of_every_rung() -> None:
    p = graphprof.profile_model("resnet18", input_shape=(1, 3, 32, 32))
    assert [f.rung for f in p.fallbacks] == RUNGS
    assert [f.used for f in p.fallbacks] == ["meta device", "fx.symbolic_trace", "meta kernels", "no op needed values", "dry run"]
    assert not any(f.stepped_down for f in p.fallbacks)


def test_each_step_down_names_the_option_passed_over_and_why() -> None:
    """A transformers LLaMA built on the meta device: its forward asks ``Tensor.item()``, which the meta
    kernels cannot answer and FakeTensors can; FX cannot trace it; Dynamo is skipped for the family."""
    p = graphprof.profile_model("hf:llama?num_hidden_layers=1")
    rungs = {f.rung: f for f in p.fallbacks}
    assert rungs[Rung.BUILD].used == "meta device" and not rungs[Rung.BUILD].stepped_down
    assert rungs[Rung.CAPTURE].used == "eager" and rungs[Rung.CAPTURE].passed_over == tuple(p.capture_attempts)
    tensors = rungs[Rung.TENSORS]
    assert tensors.used == "FakeTensors"
    ((option, reason),) = tensors.passed_over
    assert option == "meta kernels" and "item()" in reason
    assert rungs[Rung.EXECUTION].used == "dry run"


def test_a_real_run_is_the_execution_rung_stepping_down() -> None:
    class Nonzero(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0].sum().reshape(1) * torch.ones(3)

    p = graphprof.profile_model(Nonzero(), example_inputs=(torch.randn(8),))
    execution = p.fallbacks[-1]
    assert execution.rung is Rung.EXECUTION and execution.used == "real run"
    assert execution.passed_over[0][0] == "dry run" and execution.passed_over[0][1] == p.execution_note


def test_the_json_and_the_report_carry_the_same_ladder() -> None:
    result = CliRunner().invoke(app, ["--model", "hf:llama?num_hidden_layers=1", "-o", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [f["rung"] for f in data["fallbacks"]] == [r.value for r in RUNGS]
    passed = [(f["rung"], p["option"]) for f in data["fallbacks"] for p in f["passed_over"]]
    assert ("capture", "fx.symbolic_trace") in passed and ("tensors", "meta kernels") in passed
    report = CliRunner().invoke(app, ["--model", "hf:llama?num_hidden_layers=1", "--width", "200"])
    for rung, option in passed:
        assert f"{rung}: {option} failed" in report.output or f"{rung}: {option} not tried" in report.output
    assert "capture: dynamo.export not tried" in report.output and "tensors: meta kernels failed" in report.output


@pytest.mark.parametrize("rung", RUNGS)
def test_a_rung_is_written_as_its_record(rung: Rung) -> None:
    f = Fallback(rung, "x", (("y", "why"),))
    assert f.to_dict() == {"rung": rung.value, "used": "x", "passed_over": [{"option": "y", "reason": "why"}]}
