"""Capture: fx first, Dynamo when fx fails, eager when both do; the model is left as found."""

import pytest
import torch
import torchvision
from torch import nn

import graphprof
from graphprof.capture.methods import capture_graph, preserved_state, slice_batch
from graphprof.errors import CaptureError


class ShapeLoop(nn.Module):
    """Iterates over a tensor: symbolic_trace cannot, Dynamo can."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return torch.stack([self.lin(row) for row in x])


class DataDependent(nn.Module):
    """Output shape depends on values: neither fx nor Dynamo export capture it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y[y > 0].sum() if y.sum() > 0 else y.mean()


class LazyInit(nn.Module):
    """Initialises an attribute on its first forward, as YOLO's detect head does."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.anchors = None

    def forward(self, x):
        if self.anchors is None or self.anchors.shape[0] != x.shape[-1]:
            self.anchors = torch.arange(x.shape[-1], dtype=x.dtype)
        return self.conv(x) + self.anchors[: x.shape[-1] - 2]


def test_resnet_uses_symbolic_trace():
    m = torchvision.models.resnet18().eval()
    assert capture_graph(m, (torch.randn(1, 3, 64, 64),), {}).method == "fx.symbolic_trace"


def test_python_loop_falls_back_to_dynamo():
    cap = capture_graph(ShapeLoop().eval(), (torch.randn(3, 8),), {})
    assert cap.method == "dynamo.export"
    assert cap.attempts[0][0] == "fx.symbolic_trace"


def test_data_dependent_model_is_captured_eagerly_and_run_for_real():
    p = graphprof.profile_model(DataDependent(), input_shape=(1, 3, 8, 8))
    assert p.capture_method == "eager"
    assert [m for m, _ in p.capture_attempts] == ["fx.symbolic_trace", "dynamo.export"]  # auto: FX, then Dynamo, then eager
    assert p.execution in ("dry-run", "real")
    assert p.total_macs > 0


def test_lazy_init_model_profiles_after_warm_up():
    p = graphprof.profile_model(LazyInit(), input_shape=(1, 3, 10, 10))
    assert p.total_params == sum(q.numel() for q in LazyInit().parameters())


def test_every_method_failing_names_each_cause():
    with pytest.raises(CaptureError) as info:
        capture_graph(DataDependent(), (torch.randn(1, 3, 8, 8),), {}, methods=("fx.symbolic_trace", "dynamo.export"))
    assert "fx.symbolic_trace:" in str(info.value) and "dynamo.export:" in str(info.value)


def test_slice_batch_takes_first_sample():
    assert slice_batch(torch.zeros(8, 3)).shape == (1, 3)
    assert len(slice_batch([torch.zeros(3, 4, 4)] * 3)) == 1
    assert slice_batch({"input_ids": torch.zeros(4, 7)})["input_ids"].shape == (1, 7)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_model_left_exactly_as_found(mode):
    m = torchvision.models.resnet18(num_classes=10)
    m.train()
    m.layer1[0].bn1.eval()
    calls = []
    handle = m.fc.register_forward_hook(lambda *a: calls.append(1))
    m.conv1.weight.requires_grad_(False)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    flags = {name: mod.training for name, mod in m.named_modules()}
    graphprof.profile_model(m, input_shape=(2, 3, 32, 32), mode=mode)
    assert {name: mod.training for name, mod in m.named_modules()} == flags
    assert all(torch.equal(state[k], v) for k, v in m.state_dict().items())
    assert all(p.grad is None for p in m.parameters())
    assert not m.conv1.weight.requires_grad and m.fc.weight.requires_grad
    assert all(p.device.type == "cpu" for p in m.parameters())
    calls.clear()
    m(torch.randn(2, 3, 32, 32))  # still in train mode: batch-norm needs two samples
    assert calls == [1]  # the user's hook is still there
    handle.remove()


def test_preserved_state_restores_buffers_changed_in_place():
    bn = nn.BatchNorm1d(4).train()
    with preserved_state(bn):
        bn(torch.randn(8, 4))
    assert torch.equal(bn.running_mean, torch.zeros(4)) and int(bn.num_batches_tracked) == 0


def test_train_mode_on_a_real_run_counts_backward():
    """A model that needs values runs for real; its backward is still counted and nothing accumulates."""
    m = DataDependent()
    p = graphprof.profile_model(m, input_shape=(2, 3, 8, 8), mode="train")
    assert p.backward.macs > 0
    assert all(q.grad is None for q in m.parameters())


class SlicedLayers(nn.Module):
    """FX cannot slice the ModuleList by a traced shape; every op runs inside a Linear (a leaf)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[: x.shape[-1] // 8]:
            x = layer(x)
        return x


class SlicedWithResidual(SlicedLayers):
    """The same, with an add in the container's own forward: a layer of its own in Dynamo's graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + x


def test_eager_first_where_dynamo_would_add_nothing() -> None:
    p = graphprof.profile_model(SlicedLayers(), input_shape=(4, 16))
    assert p.capture_method == "eager"
    assert p.capture_attempts[1][0] == "dynamo.export" and p.capture_attempts[1][1].startswith("not tried: the eager capture")
    assert p.total_macs == 2 * 4 * 16 * 16  # two Linear layers (16 // 8) on 4 rows
    # an add in the container's forward: Dynamo gives it a layer, so it is tried (and works here)
    q = graphprof.profile_model(SlicedWithResidual(), input_shape=(4, 16))
    assert q.capture_method == "dynamo.export" and q.total_macs == p.total_macs


def test_a_dynamo_export_is_specialised_first_and_symbolic_once_sizes_change() -> None:
    """SlicedWithResidual (Dynamo, for the add in its own forward): the first export is specialised to 4 rows;
    6 rows fail its guards and it exports again with symbolic sizes, which 8 rows then reuse. MACs: two
    Linear(16, 16) (16 // 8 of the four) per row, 2 x 256 = 512 a row."""
    pm = graphprof.prepare(SlicedWithResidual(), input_shape=(4, 16))
    first = pm.profile()
    assert first.capture_method == "dynamo.export" and first.total_macs == 4 * 512
    specialised = pm._captures[False].graph
    assert specialised.static_shapes and not specialised.accepts((torch.empty(6, 16),), {})
    six = pm.profile(input_shape=(6, 16))
    assert not six.capture_reused and six.total_macs == 6 * 512
    assert any(n.startswith("captured again") for n in six.notes)
    symbolic = pm._captures[False].graph
    assert not symbolic.static_shapes and symbolic.method == "dynamo.export"
    eight = pm.profile(input_shape=(8, 16))
    assert eight.capture_reused and eight.total_macs == 8 * 512 and pm._captures[False].graph is symbolic
    assert [r.name for r in first.layers] == [r.name for r in six.layers] == [r.name for r in eight.layers]


def test_a_family_whose_layers_compute_in_containers_skips_the_eager_trial() -> None:
    from graphprof.capture.methods import METHODS
    from graphprof.capture.plan import CapturePlan
    from graphprof.models.registry import family_traits

    assert family_traits("pyg").no_eager_trial is not None
    assert CapturePlan.for_model(nn.Linear(2, 2), "pyg", METHODS).trial is False
    assert CapturePlan.for_model(nn.Linear(2, 2), "custom", METHODS).trial is True
    assert CapturePlan.for_model(nn.Linear(2, 2), "custom", METHODS[::-1]).trial is False  # a forced order: no trial
