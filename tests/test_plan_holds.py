"""A checkpoint plan made for a CPU holds on the real step: "fits" is decided on the allocator's peak of the
step run with the plan applied, and that is the peak printed (issue 52, "plans that hold")."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from graphprof.errors import InvalidInputError
from graphprof.run.step import checkpointed
from graphprof.training import measure_step, plan_memory


class Convs(nn.Module):
    """Four conv blocks: the CPU's convolution backward allocates buffers a dry run cannot see."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1)) for _ in range(4)
        )
        self.stem = nn.Conv2d(3, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        return x


SHAPE = (8, 3, 64, 64)


def _plan(budget_fraction: float, hardware: str = "desktop-cpu", **options: object) -> tuple[int, object]:
    base = plan_memory(Convs(), input_shape=SHAPE, foreach=False)
    budget = int(budget_fraction * base.peak_bytes)
    plan = plan_memory(Convs(), input_shape=SHAPE, foreach=False, memory_budget=budget, hardware=hardware, **options)  # type: ignore[arg-type]
    return budget, plan.checkpoint


@pytest.mark.slow
def test_a_cpu_plan_is_measured_and_says_fits_only_on_the_real_peak() -> None:
    budget, cp = _plan(0.8)
    assert cp.measured_peak_bytes is not None and cp.peak_bytes == cp.measured_peak_bytes  # type: ignore[attr-defined]
    assert cp.feasible == (cp.measured_peak_bytes <= budget)  # type: ignore[attr-defined]
    # the same plan stepped apart, on another copy of the model: the allocator gives the same peak
    torch.manual_seed(0)
    model = Convs()
    names = {c.module for c in cp.chosen}  # type: ignore[attr-defined]
    apart = measure_step(model, (torch.randn(SHAPE),), {}, wraps=(checkpointed(names),), repeats=1).peak_bytes
    assert abs(apart / cp.measured_peak_bytes - 1) < 0.02  # type: ignore[attr-defined]
    if cp.feasible:  # type: ignore[attr-defined]
        assert apart <= budget * 1.02
    # the simulated figure stays beside it, and the JSON carries both
    data = cp.to_dict()  # type: ignore[attr-defined]
    assert data["peak_bytes"] == data["measured_peak_bytes"] and data["planned"]["peak_bytes"] == cp.planned.peak_bytes  # type: ignore[attr-defined]


def test_a_gpu_plan_is_simulated_and_says_so() -> None:
    budget, cp = _plan(0.8, hardware="h100")
    assert cp.measured_peak_bytes is None and cp.peak_bytes == cp.planned.peak_bytes  # type: ignore[attr-defined]
    assert cp.feasible == (cp.planned.peak_bytes <= budget)  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="not a CPU preset"):
        _plan(0.8, hardware="h100", verify=True)


@pytest.mark.slow
def test_resnet18_at_470mb_no_longer_claims_to_fit() -> None:
    # the case: simulated with the plan applied 465.8 MB (under 470), the real step 479.0 MB (over)
    from graphprof_cli.main import app

    out = CliRunner().invoke(app, ["fits", "--model", "resnet18", "-b", "16", "--memory-budget", "470MB", "--hardware", "cpu", "-o", "-"])
    assert out.exit_code == 0, out.output
    import json

    cp = json.loads(out.stdout)["checkpoint"]
    assert cp["measured_peak_bytes"] > 470e6 and not cp["feasible"]
    assert cp["planned"]["peak_bytes"] < cp["measured_peak_bytes"]  # the dry run misses the CPU kernels' buffers


def test_the_cpu_matrix_product_copies_an_operand_blas_cannot_read() -> None:
    from graphprof.training.tracker import cpu_matrix_copies

    mm, addmm = torch.ops.aten.mm.default, torch.ops.aten.addmm.default
    grad = torch.ones(()).expand(4096, 1000)  # a summed loss's gradient: every stride 0
    w = torch.empty(1000, 64)
    assert cpu_matrix_copies(mm, (grad, w)) == 4096 * 1000 * 4  # 16,384,000 B copied inside the kernel
    assert cpu_matrix_copies(mm, (grad.t(), torch.empty(4096, 64))) == 4096 * 1000 * 4
    assert cpu_matrix_copies(mm, (torch.empty(4096, 1000), w)) == 0  # row-major
    assert cpu_matrix_copies(mm, (torch.empty(1000, 4096).t(), w)) == 0  # column-major
    assert cpu_matrix_copies(addmm, (torch.empty(64), torch.empty(8, 1000)[:, ::2], torch.empty(500, 64))) == 8 * 500 * 4
    assert cpu_matrix_copies(torch.ops.aten.add.Tensor, (grad, grad)) == 0


@pytest.mark.slow
def test_the_lm_heads_backward_copy_puts_the_simulated_peak_on_the_real_one() -> None:
    # hf:llama (4 layers, vocabulary 32,000) at 4 x 256 tokens: the LM head's backward copies the expanded
    # loss gradient, 4 x 256 x 32,000 x 4 B = 131 MB, inside the CPU's mm; the step's peak is there
    from graphprof.base.inputs import materialize
    from graphprof.measure.run import materialized
    from graphprof.session import build_model

    plan = plan_memory("hf:llama", input_shape=(4, 256), foreach=False)
    backward = next(p for p in plan.phases if p.phase.value == "backward")
    assert (backward.module, backward.op) == ("lm_head", "mm")
    built = build_model("hf:llama", input_shape=(4, 256))
    model, _ = materialized(built.model, torch.device("cpu"), None, 0)
    cpu = torch.device("cpu")
    real = measure_step(model, materialize(tuple(built.args), cpu), materialize(dict(built.kwargs), cpu), repeats=1).peak_bytes
    assert abs(plan.peak_bytes / real - 1) < 0.02, (plan.peak_bytes, real)
