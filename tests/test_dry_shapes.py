"""graphprof.run.shapes: each normalisation's dry-run outputs equal torch's own, field by field.

The references are the op run on meta tensors with no mode (torch's registered meta path, its Python
decomposition) and the same op on FakeTensors on the CPU (the CPU kernels' semantics); in each regime the
rule must give the same shape, stride, dtype and device, or decline (``None``)."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
import torch
import torchvision
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from graphprof.run.shapes import DRY_SHAPE_OPS, dry_outputs

aten = torch.ops.aten

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


_FAKE = FakeTensorMode()


def _empty(shape: Any, dtype: torch.dtype = torch.float32, regime: str = "meta") -> torch.Tensor:
    """An empty tensor on the meta device, or a FakeTensor on the CPU."""
    if regime == "meta":
        return torch.empty(shape, device="meta", dtype=dtype)
    return _FAKE.from_tensor(torch.empty(shape, dtype=dtype))


def _meta(
    shape: tuple[int, ...], dtype: torch.dtype = torch.float32, layout: str = "contiguous", regime: str = "meta"
) -> torch.Tensor:
    x = _empty(shape, dtype, regime)
    if layout == "channels_last":
        return x.to(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    if layout == "transposed":
        return x.transpose(-1, -2)
    return x


def _fields(out: Any) -> list[tuple[Any, ...]]:
    return [(tuple(t.shape), t.stride(), t.dtype, t.device.type) for t in out]


def _check(func: Any, args: tuple[Any, ...]) -> bool:
    """The rule equals torch's own result; ``False`` when the rule declined (torch answers then)."""
    with _FAKE if isinstance(args[0], FakeTensor) else contextlib.nullcontext():
        got = dry_outputs(func, args, {})
        if got is None:
            return False
        assert _fields(got) == _fields(func(*args)), func
    return True


def _bn_args(x: torch.Tensor, affine: bool, regime: str) -> tuple[torch.Tensor | None, ...]:
    c = x.shape[1]
    w = _empty(c, regime=regime) if affine else None
    return w, w, _empty(c, regime=regime), _empty(c, regime=regime)


REGIMES = ("meta", "fake")


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "layout"), [((8, 16), "contiguous"), ((4, 16, 9), "contiguous"), ((2, 16, 5, 7), "contiguous"),
                                               ((2, 16, 5, 7), "channels_last"), ((2, 16, 3, 5, 7), "channels_last"), ((2, 16, 3, 5, 7), "contiguous")])  # fmt: skip
def test_batch_norms_equal_torch(regime: str, dtype: torch.dtype, shape: tuple[int, ...], layout: str) -> None:
    x = _meta(shape, dtype, layout, regime)
    for affine, training in itertools.product((True, False), (True, False)):
        w, b, rm, rv = _bn_args(x, affine, regime)
        assert _check(aten.native_batch_norm.default, (x, w, b, rm, rv, training, 0.1, 1e-5))
        assert _check(aten._native_batch_norm_legit.default, (x, w, b, rm, rv, training, 0.1, 1e-5))
        assert _check(aten._native_batch_norm_legit.no_stats, (x, w, b, True, 0.1, 1e-5))
        assert (
            dry_outputs(aten._native_batch_norm_legit.no_stats, (x, w, b, False, 0.1, 1e-5), {}) is None
        )  # torch raises
        assert _check(aten._native_batch_norm_legit_no_training.default, (x, w, b, rm, rv, 0.1, 1e-5))
    w, b, rm, rv = _bn_args(x, True, regime)
    assert _check(aten._native_batch_norm_legit_functional.default, (x, w, b, rm, rv, True, 0.1, 1e-5))


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "normalized"), [((4, 7, 32), [32]), ((4, 7, 32), [7, 32]), ((32,), [32]), ((2, 3, 4, 8), [8])]
)
def test_layer_norm_equals_torch(
    regime: str, dtype: torch.dtype, shape: tuple[int, ...], normalized: list[int]
) -> None:
    x = _meta(shape, dtype, regime=regime)
    w = _empty(normalized, dtype, regime)
    assert _check(aten.native_layer_norm.default, (x, normalized, w, w, 1e-5))
    assert _check(aten.native_layer_norm.default, (x, normalized, None, None, 1e-5))


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 64, 5, 5), (2, 32, 10), (2, 32, 3, 4, 5)])
def test_group_norm_equals_torch(regime: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    x = _meta(shape, dtype, regime=regime)
    n, c = shape[:2]
    hxw = x.numel() // (n * c)
    w = _empty(c, dtype, regime)
    for groups in (1, 8, c):
        assert _check(aten.native_group_norm.default, (x, w, w, n, c, hxw, groups, 1e-5))
        assert _check(aten.native_group_norm.default, (x, None, None, n, c, hxw, groups, 1e-5))


def test_layouts_it_does_not_know_are_left_to_torch() -> None:
    x = _meta((4, 7, 32), layout="transposed")
    assert dry_outputs(aten.native_layer_norm.default, (x, [7], None, None, 1e-5), {}) is None
    y = _meta((2, 16, 5, 7), layout="transposed")
    assert dry_outputs(aten.native_batch_norm.default, (y, None, None, None, None, True, 0.1, 1e-5), {}) is None
    assert dry_outputs(aten.native_group_norm.default, (y, None, None, 2, 16, 35, 4, 1e-5), {}) is None
    assert (
        dry_outputs(
            aten.native_batch_norm.default, (torch.empty(3, device="meta"), None, None, None, None, True, 0.1, 1e-5), {}
        )
        is None
    )


def test_under_a_fake_mode_the_outputs_are_fake_tensors_on_the_fake_device() -> None:
    x, w = _empty((2, 16, 5, 7), regime="fake"), _empty(16, regime="fake")
    with _FAKE:
        got = dry_outputs(aten._native_batch_norm_legit_no_training.default, (x, w, w, w, w, 0.1, 1e-5), {})
    assert got is not None and all(isinstance(t, FakeTensor) for t in got)
    assert {t.device.type for t in got} == {"cpu"} and got[1].shape == (0,)  # the CPU kernel saves nothing in eval


def test_every_rule_is_an_op_the_table_names() -> None:
    assert aten.native_batch_norm.default in DRY_SHAPE_OPS and len(DRY_SHAPE_OPS) == 7


@pytest.mark.parametrize("train", [False, True])
def test_a_dry_run_counts_the_same_with_and_without_the_rules(train: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """resnet18 (batch norm; on FakeTensors and on meta), a ViT (layer norm) and a group-norm net: every row's counts, bytes and shapes
    are identical when each call runs torch's own meta path instead."""
    import graphprof
    from graphprof.run import loop

    with torch.device("meta"):  # all on meta: torch's meta kernels, no FakeTensors
        on_meta = torchvision.models.resnet18()
    models = {
        "resnet18": (torchvision.models.resnet18(), (2, 3, 64, 64)),
        "resnet18 on meta": (on_meta, (2, 3, 64, 64)),
        "vit": (
            torchvision.models.VisionTransformer(32, 16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64),
            (1, 3, 32, 32),
        ),
        "gn": (
            torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(4, 8), torch.nn.ReLU()),
            (2, 3, 16, 16),
        ),
    }
    mode = "train" if train else "eval"
    with_rules = {k: graphprof.profile_model(m, input_shape=s, mode=mode) for k, (m, s) in models.items()}
    monkeypatch.setattr(loop, "DRY_SHAPE_OPS", frozenset())
    without = {k: graphprof.profile_model(m, input_shape=s, mode=mode) for k, (m, s) in models.items()}
    for name in models:
        a, b = with_rules[name].to_dict(), without[name].to_dict()
        for varying in ("timings_s", "timestamp", "host"):  # the clock, and the host's load
            a.pop(varying), b.pop(varying)
        assert a["layers"] and a == b, name  # every row, op record, byte and shape
        assert with_rules[name].total_macs > 0
