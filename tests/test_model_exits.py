"""A model's ``sys.exit`` on every path (API, sweep, --measure, --graph): the model's error, exit 8, never graphprof's exit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import graphprof
from graphprof.errors import ModelExitError

# ---- a model's sys.exit on every path added since the last round (point 3) ----------------------------


EXITING = """
import sys
import torch
from torch import nn

REAL_CALLS = [0]


class Quits(nn.Module):
    '''Calls sys.exit(3) from its forward once it has run for real `after` times (dry runs do not count).'''

    def __init__(self, after=0):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.after = after

    def forward(self, x):
        if not isinstance(x, torch._subclasses.fake_tensor.FakeTensor) and not isinstance(x, torch.fx.Proxy):
            REAL_CALLS[0] += 1
            if REAL_CALLS[0] > self.after:
                sys.exit(3)
        return self.fc(x)


def quits():
    return Quits()


class QuitsOnSecondCall(nn.Module):
    '''Calls sys.exit(3) from its second forward, dry or real (the eager capture calls forward each pass).'''

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.calls = 0

    def forward(self, x):
        QUIT_CALLS[0] += 1
        if QUIT_CALLS[0] >= 2:
            sys.exit(3)
        return self.fc(x)


QUIT_CALLS = [0]


def quits_on_second_call():
    return QuitsOnSecondCall()
"""


@pytest.fixture()
def quitting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    (tmp_path / "quitting_models.py").write_text(EXITING)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("quitting_models")
    module.REAL_CALLS[0] = module.QUIT_CALLS[0] = 0
    yield module
    sys.modules.pop("quitting_models", None)


class _QuitsInDryRuns(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.quit = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quit:
            sys.exit(3)
        return self.fc(x)


def test_sys_exit_through_the_api_is_the_models_error(quitting: object) -> None:
    model = _QuitsInDryRuns()
    pm = graphprof.prepare(model, input_shape=(2, 8), methods=("eager",))
    model.quit = True
    for call in (lambda: pm.run([]), lambda: pm.graph(), lambda: pm.profile(batch_size=4)):
        with pytest.raises(ModelExitError, match="_QuitsInDryRuns"):
            call()
    with pytest.raises(ModelExitError):
        graphprof.Profiler(model, auto_profile=False, measure=False).profile_once(torch.randn(2, 8))
    real = graphprof.prepare(quitting.Quits(), input_shape=(2, 8))  # type: ignore[attr-defined]
    with pytest.raises(ModelExitError):
        real.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)


def test_a_sweep_keeps_the_points_before_the_models_exit() -> None:
    calls = [0]

    def factory(num_layers: int = 1) -> nn.Module:
        calls[0] += 1
        model = _QuitsInDryRuns()
        model.quit = calls[0] >= 3  # the third point's model quits
        return model

    with pytest.raises(ModelExitError) as caught:
        graphprof.sweep(factory, "layers", [1, 2, 3, 4], input_shape=(2, 8))
    partial = caught.value.partial  # type: ignore[attr-defined]
    assert [r.value for r in partial.rows] == [1, 2]


def test_cli_measure_exit_reports_the_dry_run_and_exit_code_8(quitting: object) -> None:
    from graphprof_cli.main import app

    result = CliRunner().invoke(
        app, ["--model", "quitting_models:quits", "--input-shape", "2,8", "--measure", "--device", "cpu", "--iters", "2"]
    )
    assert result.exit_code == 8, result.output
    assert "Hierarchical graph profile" in result.stdout  # what was done is kept: the dry run's report
    assert "sys.exit" in result.stderr or "SystemExit" in result.stderr


def test_cli_graph_exit_is_code_8_after_the_report(quitting: object, tmp_path: Path) -> None:
    from graphprof_cli.main import app

    target = tmp_path / "g.json"
    args = ["--model", "quitting_models:quits_on_second_call", "--input-shape", "2,8", "--graph", str(target), "--capture", "eager"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 8, result.output  # the graph pass is the model's second forward
    assert "Hierarchical graph profile" in result.stdout and not target.exists()
