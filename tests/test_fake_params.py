"""graphprof.run.fakes: a dry run's FakeTensors made straight from a tensor's metadata equal torch's converter's.

``fake_from_metadata`` skips ``FakeTensorMode.from_tensor`` for plain dense tensors (a model's parameters
and buffers); each field a dry run can read must be the same as the converter gives, and anything the
shortcut does not describe must go to the converter."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from graphprof.run.fakes import fake_from_metadata, plain_dense


def _fields(t: torch.Tensor) -> tuple[Any, ...]:
    return (
        type(t), isinstance(t, nn.Parameter), tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device,
        t.requires_grad, t.is_leaf, t.grad_fn is None, t.untyped_storage().nbytes(),
        t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last),
    )  # fmt: skip


TENSORS = {
    "conv weight": nn.Conv2d(3, 8, 3).weight,
    "frozen weight": nn.Parameter(torch.randn(4, 5), requires_grad=False),
    "channels-last weight": nn.Parameter(torch.randn(8, 3, 3, 3).to(memory_format=torch.channels_last)),
    "running mean": nn.BatchNorm2d(8).running_mean,
    "int64 buffer": torch.arange(6).reshape(2, 3).clone(),
    "bfloat16 parameter": nn.Parameter(torch.randn(3, 2, dtype=torch.bfloat16)),
    "empty": torch.empty(0, 4),
    "expanded": torch.zeros(4, 1).expand(4, 3).contiguous(),
    "scalar": torch.tensor(2.5),
}


@pytest.mark.parametrize("name", TENSORS)
def test_a_plain_tensor_becomes_the_fake_the_converter_gives(name: str) -> None:
    t = TENSORS[name]
    assert plain_dense(t)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        ours = fake_from_metadata(mode, t)
        theirs = mode.from_tensor(t)
    assert isinstance(ours, FakeTensor) and ours.fake_mode is mode and ours.constant is None
    assert _fields(ours) == _fields(theirs), name
    with mode:  # and it computes like one: a parameter through an op, with autograd
        assert _fields((ours * 2).sum()) == _fields((theirs * 2).sum())


def test_a_small_constant_keeps_its_values_until_something_writes_to_it() -> None:
    """As ``from_real_tensor(make_constant=True)``: the values are kept, and an in-place write (BatchNorm's
    ``num_batches_tracked += 1``) makes torch forget them, so a later ``.item()`` never reads stale ones."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = {}
    for way in ("ours", "torch's"):
        t = torch.tensor([8.0, 16.0, 32.0])
        with mode:
            fake = (
                fake_from_metadata(mode, t, constant=t)
                if way == "ours"
                else mode.fake_tensor_converter.from_real_tensor(mode, t, make_constant=True)
            )
            assert fake.constant is t and _fields(fake) == _fields(mode.from_tensor(torch.zeros(3)))
            assert fake[1].item() == 16.0  # read from the kept values
            fake.add_(1)
        fakes[way] = fake
    assert fakes["ours"].constant is None and fakes["torch's"].constant is None


def test_what_the_metadata_does_not_describe_goes_to_torchs_converter() -> None:
    base = torch.randn(4, 6)
    with_grad = nn.Parameter(torch.randn(3))
    with_grad.grad = torch.ones(3)
    with torch.inference_mode():
        inference = torch.ones(2)
    resized = torch.ones(4)
    resized.untyped_storage().resize_(0)
    declined = {
        "a view": base[:, 1:],
        "an offset": base.view(-1)[3:7],
        "a gradient held": with_grad,
        "a non-leaf": nn.Parameter(torch.ones(2)) * 2,
        "a conjugate": torch.randn(2, dtype=torch.complex64).conj(),
        "an inference tensor": inference,
        "a buffer marker": nn.Buffer(torch.ones(2)),
        "a storage resized to nothing": resized,
        "a sparse tensor": torch.eye(3).to_sparse(),
        "a subclass": FakeTensorMode().from_tensor(torch.ones(2)),
    }
    assert [name for name, t in declined.items() if plain_dense(t)] == []


@pytest.mark.parametrize(
    "device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"))]
)
def test_a_dry_run_counts_the_same_with_the_converter(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row, op record, byte and shape of a dry run, in eval and train mode (the backward reads the
    parameters' ``requires_grad``), is the same when every tensor goes through torch's converter."""
    import torchvision

    import graphprof
    from graphprof.run import fakes

    model = torchvision.models.resnet18().to(device)
    model.fc.weight.requires_grad_(False)  # a frozen layer: its weight gets no gradient in train mode
    runs = {}
    for shortcut in (True, False):
        if not shortcut:
            monkeypatch.setattr(fakes, "plain_dense", lambda t: False)
        runs[shortcut] = {
            mode: graphprof.profile_model(model, input_shape=(2, 3, 64, 64), mode=mode).to_dict() for mode in ("eval", "train")
        }
    for mode in ("eval", "train"):
        a, b = runs[True][mode], runs[False][mode]
        for varying in ("timings_s", "timestamp", "host"):
            a.pop(varying), b.pop(varying)
        assert a["layers"] and a == b, mode


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_parameter_becomes_the_fake_the_converter_gives() -> None:
    """On a GPU the fake keeps the device with its index, as the converter normalises it (``cuda:0``)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    for t in (nn.Linear(4, 3).cuda().weight, torch.ones(2, 2, device="cuda", dtype=torch.bfloat16)):
        with mode:
            ours, theirs = fake_from_metadata(mode, t), mode.from_tensor(t)
            assert _fields(ours) == _fields(theirs) and ours.device == t.device
            assert _fields(ours @ ours.T) == _fields(theirs @ theirs.T)
