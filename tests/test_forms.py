"""Models as users hand them over (issue 26): wrapped, shared between parents, scripted, sliced, sparse.

Each form is checked against the plain eager model's count (the same MACs) or a hand computation.
"""

from __future__ import annotations

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
