"""Errors in their class (bad input, the model's own exception), a custom op without a fake kernel, option checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from toys import LinearThen
from typer.testing import CliRunner

import graphprof

# ---- errors in their class (point 8), a custom op (point 9), small ones (point 10) --------------------


def test_transformers_config_rejections_are_bad_input() -> None:
    with pytest.raises(graphprof.errors.InvalidInputError, match="rejects hidden_size"):
        graphprof.profile_model("hf:llama?hidden_size=nan")


def test_measure_reports_the_models_own_exception_as_a_measurement_error() -> None:
    def fails_for_real(y: torch.Tensor) -> torch.Tensor:
        if not isinstance(y, torch._subclasses.fake_tensor.FakeTensor):
            raise ValueError("boom")
        return y

    pm = graphprof.prepare(LinearThen(4, 2, fails_for_real), input_shape=(1, 4), methods=("eager",))
    with pytest.raises(graphprof.errors.MeasurementError, match="the model raised .* ValueError: boom"):
        pm.measure(device="cpu", iters=2, warmup=1)


def test_graph_depth_and_export_name_are_checked() -> None:
    pm = graphprof.prepare(nn.Linear(4, 2), input_shape=(1, 4))
    with pytest.raises(graphprof.errors.InvalidInputError, match="depth"):
        pm.graph(depth=-1)


@torch.library.custom_op("graphprof_tests::double", mutates_args=())
def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_custom_op_without_a_fake_kernel_is_profiled() -> None:
    p = graphprof.profile_model(LinearThen(4, 4, _double), input_shape=(2, 4))
    assert p.total_macs == 2 * 4 * 4 and p.execution == "real"
    assert [u.op for u in p.unsupported] == ["graphprof_tests.double"]  # named, never silently zero


def test_measure_options_are_checked_without_measure_and_narrow_columns_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof_cli.common import console
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["--model", "alexnet", "--iters", "-5"])
    assert result.exit_code == 2 and "-5" in result.stderr
    monkeypatch.setenv("COLUMNS", "5")
    assert console().width >= 40
