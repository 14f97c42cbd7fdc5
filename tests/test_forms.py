"""Models as users hand them over (issue 26): wrapped, shared between parents, scripted, sliced, sparse.

Each form is checked against the plain eager model's count (the same MACs) or a hand computation.
"""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

import graphprof


class _Sub(nn.Module):
    def __init__(self, shared: nn.Module) -> None:
        super().__init__()
        self.l = shared

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l(x)


class _TwoParents(nn.Module):
    """One Linear(4, 4) object held by two parents, each calling it once."""

    def __init__(self) -> None:
        super().__init__()
        shared = nn.Linear(4, 4)
        self.a, self.b = _Sub(shared), _Sub(shared)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


def test_data_parallel_is_profiled_as_its_module() -> None:
    m = torchvision.models.resnet18()
    plain = graphprof.profile_model(m, input_shape=(1, 3, 64, 64))
    wrapped = graphprof.profile_model(nn.DataParallel(m), input_shape=(1, 3, 64, 64))
    assert wrapped.total_macs == plain.total_macs and wrapped.total_params == plain.total_params
    assert wrapped.model_name == "ResNet" and any("DataParallel" in n for n in wrapped.notes)


def test_shared_module_gives_each_parent_its_own_call_whatever_the_capture() -> None:
    for methods in (None, ("eager",), ("dynamo.export",)):
        p = graphprof.profile_model(_TwoParents(), input_shape=(2, 4), methods=methods)
        macs = {m.path: m.forward.macs for m in p.modules}
        # each call: 2 rows x 4 in x 4 out = 32 MACs
        assert macs["a"] == macs["b"] == 32 and macs[""] == 64, (p.capture_method, macs)


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_torchscript_modules_are_counted_as_they_run() -> None:
    m = torchvision.models.resnet18().eval()
    plain = graphprof.profile_model(m, input_shape=(1, 3, 64, 64)).total_macs
    scripted = graphprof.profile_model(torch.jit.script(m), input_shape=(1, 3, 64, 64))
    traced = graphprof.profile_model(torch.jit.trace(m, torch.randn(1, 3, 64, 64)), input_shape=(1, 3, 64, 64))
    assert scripted.total_macs == traced.total_macs == plain == 148_557_824
    assert scripted.execution == "dry-run" and any("TorchScript" in n for n in scripted.notes)


def test_a_small_input_that_is_a_view_is_profiled() -> None:
    x = torch.randn(10, 4)
    p = graphprof.profile_model(nn.Linear(4, 2), example_inputs=(x[:4],))
    assert p.total_macs == 4 * 4 * 2  # 4 rows x 4 in x 2 out
    batch = torch.arange(3).repeat_interleave(2)  # a PyG-style batch vector, built from a view
    p = graphprof.profile_model(_Pool(), example_inputs=(torch.randn(6, 4), batch))
    assert p.total_macs == 6 * 4 * 4  # the Linear(4, 4) on 6 rows; the scatter is not a product


class _Pool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(3, 4).index_add(0, batch, self.l(x))
        return out


def _sparse_adjacency(n: int = 10) -> torch.Tensor:
    rows = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 5])
    cols = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 5, 0])
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(12), (n, n)).coalesce()


class _SpMM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 8)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(adj, self.l(x))


def test_sparse_inputs_run_for_real_with_a_note() -> None:
    adj, x = _sparse_adjacency(), torch.randn(10, 16)
    for a in (adj, adj.to_sparse_csr(), adj.t()):
        p = graphprof.profile_model(_SpMM(), example_inputs=(a, x))
        assert p.execution == "real" and "cannot be a FakeTensor" in p.execution_note
        # the Linear on 10 rows: 10 x 16 x 8 = 1,280; the sparse product: nnz x F = 12 x 8 = 96
        assert p.total_macs == 1_280 + 96 and not p.unsupported


_FACTORIES = """
import torch, torchvision
from torch import nn


def data_parallel():
    return nn.DataParallel(torchvision.models.resnet18())


def scripted():
    return torch.jit.script(torchvision.models.resnet18().eval())
"""


@pytest.mark.slow  # over 1.5 s: the full suite runs it, the fast tier does not
def test_cli_profiles_factories_that_return_wrapped_or_scripted_models(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    (tmp_path / "handed_over.py").write_text(_FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    for factory in ("data_parallel", "scripted"):
        result = CliRunner().invoke(
            app, ["--model", f"handed_over:{factory}", "--input-shape", "1,3,64,64", "--output", "-", "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        assert '"total_macs": 148557824' in result.output, factory
