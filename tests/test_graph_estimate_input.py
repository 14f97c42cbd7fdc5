"""graph-estimate and graph sweeps: bad input refused, not ignored."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


# ---- graph-estimate and graph sweeps: bad input refused, not ignored --------------------------------------
@pytest.mark.parametrize("ratio", ["nan", "inf", "-1", "0"])
def test_graph_estimate_refuses_a_sparse_ratio_outside_0_1(ratio: str) -> None:
    result = invoke("graph-estimate", "--model", "pyg:gin", "--sparse-ratio", ratio)
    assert result.exit_code == 2, result.output
    assert "sparse_ratio" in result.output and len(result.output.strip().splitlines()) == 1


def test_graph_estimate_refuses_a_model_that_is_not_a_graph_model() -> None:
    result = invoke("graph-estimate", "--model", "resnet18")
    assert result.exit_code == 2, result.output
    assert "not 'resnet18'" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("extra", "named"), [(("--batch", "1,2"), "--batch"), (("--mode", "train"), "--mode"),
                                              (("--measure", "--device", "bogus"), "--device")])  # fmt: skip
def test_a_graph_sweep_refuses_the_options_it_would_ignore(extra: tuple[str, ...], named: str) -> None:
    result = invoke("sweep", "--model", "pyg:gin", "--nodes", "100,200", *extra)
    assert result.exit_code == 2, result.output
    assert f"does not take {named}" in result.output
