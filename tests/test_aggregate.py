"""graphprof.cost.aggregate.subtree_parameters: every module's parameter count from one walk equals
``count_parameters`` asked of that module alone, where modules and parameters are shared."""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from graphprof.cost.aggregate import subtree_parameters
from graphprof.run.params import count_parameters


def _shared() -> nn.Module:
    block = nn.Linear(4, 4)  # one module at two paths
    tied = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = tied.weight  # one parameter in two modules
    return nn.Sequential(nn.Sequential(block, nn.ReLU(), block), tied, nn.Sequential(head, nn.Linear(10, 3)))


def _quantized() -> nn.Module:
    q = torch.ao.nn.quantized.Linear(8, 4)  # packed weights, no parameters
    return nn.Sequential(nn.Linear(3, 8), nn.Sequential(q), nn.Linear(4, 2))


def test_each_module_counts_as_count_parameters_does() -> None:
    for model in (torchvision.models.resnet18(), _shared(), _quantized()):
        modules = dict(model.named_modules(remove_duplicate=False))
        got = subtree_parameters(modules)
        assert got == {path: count_parameters(m) for path, m in modules.items()}, type(model).__name__


def test_a_shared_module_and_a_tied_weight_count_once_in_their_parent() -> None:
    got = subtree_parameters(dict(_shared().named_modules(remove_duplicate=False)))
    assert got["0"] == got["0.0"] == got["0.2"] == 4 * 4 + 4  # the same Linear twice: 20, not 40
    assert got["2.0"] == 40 and got["2"] == 40 + 10 * 3 + 3  # the head holds the embedding's weight
    assert got[""] == 20 + 40 + 33  # the tied weight once in the whole model
    assert got["0.1"] == 0


def test_packed_quantized_weights_count() -> None:
    got = subtree_parameters(dict(_quantized().named_modules(remove_duplicate=False)))
    assert got["1.0"] == got["1"] == 8 * 4 + 4 and got[""] == (3 * 8 + 8) + 36 + (4 * 2 + 2)
