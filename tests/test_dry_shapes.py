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


def _meta(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, layout: str = "contiguous", regime: str = "meta") -> torch.Tensor:
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
        assert dry_outputs(aten._native_batch_norm_legit.no_stats, (x, w, b, False, 0.1, 1e-5), {}) is None  # torch raises
        assert _check(aten._native_batch_norm_legit_no_training.default, (x, w, b, rm, rv, 0.1, 1e-5))
    w, b, rm, rv = _bn_args(x, True, regime)
    assert _check(aten._native_batch_norm_legit_functional.default, (x, w, b, rm, rv, True, 0.1, 1e-5))


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "normalized"), [((4, 7, 32), [32]), ((4, 7, 32), [7, 32]), ((32,), [32]), ((2, 3, 4, 8), [8])])
def test_layer_norm_equals_torch(regime: str, dtype: torch.dtype, shape: tuple[int, ...], normalized: list[int]) -> None:
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
    assert dry_outputs(aten.native_batch_norm.default, (torch.empty(3, device="meta"), None, None, None, None, True, 0.1, 1e-5), {}) is None


def test_under_a_fake_mode_the_outputs_are_fake_tensors_on_the_fake_device() -> None:
    x, w = _empty((2, 16, 5, 7), regime="fake"), _empty(16, regime="fake")
    with _FAKE:
        got = dry_outputs(aten._native_batch_norm_legit_no_training.default, (x, w, w, w, w, 0.1, 1e-5), {})
    assert got is not None and all(isinstance(t, FakeTensor) for t in got)
    assert {t.device.type for t in got} == {"cpu"} and got[1].shape == (0,)  # the CPU kernel saves nothing in eval


def test_every_rule_is_an_op_the_table_names() -> None:
    # 7 normalisations, convolution, add, 7 in-place activations, empty
    assert aten.native_batch_norm.default in DRY_SHAPE_OPS and len(DRY_SHAPE_OPS) == 17


def _fake_check(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> bool:
    """Under the fake mode, the rule's output equals torch's fake kernel's, field by field (``False``: declined)."""
    kwargs = kwargs or {}
    with _FAKE:
        got = dry_outputs(func, args, kwargs)
        if got is None:
            return False
        want = func(*args, **kwargs)
        got_t, want_t = ((got,) if isinstance(got, torch.Tensor) else got, (want,) if isinstance(want, torch.Tensor) else want)
        assert _fields(got_t) == _fields(want_t), func
        assert all(isinstance(t, FakeTensor) and t.fake_mode is _FAKE for t in got_t)
    return True


CONVS = [  # (input, weight, bias, stride, padding, dilation, groups)
    ((2, 3, 17, 19), (8, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),
    ((2, 3, 224, 224), (64, 3, 7, 7), False, [2, 2], [3, 3], [1, 1], 1),
    ((4, 16, 9, 9), (16, 1, 3, 3), True, [2, 2], [0, 0], [1, 1], 16),  # depthwise
    ((4, 16, 9, 9), (32, 4, 3, 3), False, [1, 2], [2, 1], [2, 1], 4),  # grouped, dilated, uneven
    ((1, 8, 5, 5), (4, 8, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),  # pointwise
    ((2, 4, 5, 6, 7), (8, 4, 3, 3, 3), True, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1),  # 3-d
    ((2, 4, 6, 6, 6), (8, 2, 3, 1, 3), False, [2, 1, 1], [0, 1, 1], [1, 1, 2], 2),
]


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16))
@pytest.mark.parametrize("layout", ("contiguous", "channels_last", "weight_channels_last"))
@pytest.mark.parametrize("case", CONVS)
def test_convolutions_equal_torch(dtype: torch.dtype, layout: str, case: tuple[Any, ...]) -> None:
    """Shape by the formula, memory format as the CPU backend picks it (channels-last in, channels-last
    out; a channels-last weight alone too, for the mkldnn backend): each the same as torch's fake kernel."""
    xs, ws, bias, stride, padding, dilation, groups = case
    x = _meta(xs, dtype, "channels_last" if layout == "channels_last" else "contiguous", "fake")
    w = _meta(ws, dtype, "channels_last" if layout == "weight_channels_last" else "contiguous", "fake")
    b = _empty(ws[0], dtype, "fake") if bias else None
    assert _fake_check(aten.convolution.default, (x, w, b, stride, padding, dilation, False, [0] * (len(xs) - 2), groups))


def test_convolutions_torch_rejects_or_the_rule_does_not_know_go_to_torch() -> None:
    x, w = _empty((2, 3, 9, 9), regime="fake"), _empty((8, 3, 3, 3), regime="fake")
    conv = aten.convolution.default
    rest = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with _FAKE:
        assert dry_outputs(conv, (x, _empty((8, 4, 3, 3), regime="fake"), None, *rest), {}) is None  # channels
        assert dry_outputs(conv, (x, w, _empty(7, regime="fake"), *rest), {}) is None  # bias size
        assert dry_outputs(conv, (x, _empty((8, 3, 11, 11), regime="fake"), None, *rest), {}) is None  # kernel > input
        assert dry_outputs(conv, (x, w.to(torch.float64), None, *rest), {}) is None  # mixed dtypes
        assert dry_outputs(conv, (x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1), {}) is None  # transposed
        assert dry_outputs(conv, (x[0], w, None, *rest), {}) is None  # unbatched
        assert (
            dry_outputs(conv, (_empty((2, 3, 9), regime="fake"), _empty((8, 3, 3), regime="fake"), None, [1], [0], [1], False, [0], 1), {})
            is None
        )  # 1-d
    assert dry_outputs(conv, (_empty((2, 3, 9, 9)), _empty((8, 3, 3, 3)), None, *rest), {}) is None  # meta: torch's meta kernel


@pytest.mark.parametrize("layout", ("contiguous", "channels_last"))
def test_a_residual_add_equals_torch_and_anything_else_goes_to_torch(layout: str) -> None:
    x = _meta((2, 8, 5, 5), layout=layout, regime="fake")
    y = _meta((2, 8, 5, 5), layout=layout, regime="fake")
    assert _fake_check(aten.add.Tensor, (x, y))
    with _FAKE:
        assert dry_outputs(aten.add.Tensor, (x, _empty((8, 5, 5), regime="fake")), {}) is None  # broadcast
        assert dry_outputs(aten.add.Tensor, (x, _meta((2, 8, 5, 5), torch.float64, layout, "fake")), {}) is None  # promotion
        assert dry_outputs(aten.add.Tensor, (x, y), {"alpha": 2}) is None
        assert dry_outputs(aten.add.Tensor, (x, y, 2), {}) is None
        other = _meta((2, 8, 5, 5), layout="channels_last" if layout == "contiguous" else "contiguous", regime="fake")
        assert dry_outputs(aten.add.Tensor, (x, other), {}) is None  # two layouts: TensorIterator decides


@pytest.mark.parametrize("name", ["relu_", "silu_", "hardswish_", "hardsigmoid_", "sigmoid_", "tanh_", "hardtanh_"])
def test_an_in_place_activation_returns_its_input(name: str) -> None:
    func = getattr(aten, name).default
    x = _meta((2, 8, 5, 5), layout="channels_last", regime="fake")
    with _FAKE:
        assert dry_outputs(func, (x,), {}) is x
        assert func(x) is x  # what torch's fake kernel returns too
    assert dry_outputs(func, (_empty((2, 3)),), {}) is None  # meta: torch's


def test_empty_under_a_fake_mode_equals_torch() -> None:
    for size, kwargs in [([0], {"dtype": torch.float32, "device": torch.device("cpu")}), ([2, 3, 4, 5], {"memory_format": torch.channels_last}),
                         ((3,), {"dtype": torch.int64})]:  # fmt: skip
        assert _fake_check(aten.empty.memory_format, (size,), kwargs)
    with _FAKE:
        assert dry_outputs(aten.empty.memory_format, ([2],), {"pin_memory": True}) is None
        assert dry_outputs(aten.empty.memory_format, ([2],), {"device": torch.device("meta")}) is None
    assert dry_outputs(aten.empty.memory_format, ([2],), {}) is None  # no fake mode: torch's


@pytest.mark.parametrize("train", [False, True])
def test_a_dry_run_counts_the_same_with_and_without_the_rules(train: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """resnet18 (batch norm; on FakeTensors and on meta), a ViT (layer norm) and a group-norm net: every row's counts, bytes and shapes
    are identical when each call runs torch's own meta path instead."""
    import graphprof
    from graphprof.run import dispatch

    with torch.device("meta"):  # all on meta: torch's meta kernels, no FakeTensors
        on_meta = torchvision.models.resnet18()
    models = {
        "resnet18": (torchvision.models.resnet18(), (2, 3, 64, 64)),
        "resnet18 on meta": (on_meta, (2, 3, 64, 64)),
        "vit": (torchvision.models.VisionTransformer(32, 16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64), (1, 3, 32, 32)),
        "gn": (torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(4, 8), torch.nn.ReLU()), (2, 3, 16, 16)),
        # depthwise and grouped convolutions, in-place hardswish_ and relu_
        "mobilenet_v3_small": (torchvision.models.mobilenet_v3_small(), (2, 3, 64, 64)),
    }
    mode = "train" if train else "eval"
    with_rules = {k: graphprof.profile_model(m, input_shape=s, mode=mode) for k, (m, s) in models.items()}
    monkeypatch.setattr(dispatch, "DRY_SHAPE_OPS", frozenset())
    without = {k: graphprof.profile_model(m, input_shape=s, mode=mode) for k, (m, s) in models.items()}
    for name in models:
        a, b = with_rules[name].to_dict(), without[name].to_dict()
        for varying in ("timings_s", "timestamp", "host"):  # the clock, and the host's load
            a.pop(varying), b.pop(varying)
        assert a["layers"] and a == b, name  # every row, op record, byte and shape
        assert with_rules[name].total_macs > 0


def test_a_fake_constant_goes_to_torch() -> None:
    """A small tensor a dry run keeps the values of (``FakeTensor.constant``): torch's fake mode forgets the
    values after an in-place write, so a later ``.item()`` cannot read stale ones; no rule answers for it."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    const = mode.fake_tensor_converter.from_real_tensor(mode, torch.tensor([-1.0, 2.0]), make_constant=True)
    with mode:
        assert dry_outputs(aten.relu_.default, (const,), {}) is None
        assert dry_outputs(aten.add.Tensor, (const, const), {}) is None  # all constant: torch computes
        assert const.constant is not None
        aten.relu_.default(const)
    assert const.constant is None  # what returning the input unchanged would have kept: [-1.0, 2.0]


def test_a_batch_norm_reading_constant_statistics_is_answered_and_one_writing_them_is_not() -> None:
    """Running statistics of 64 channels or fewer are kept as constants on a dry run. Reading them (eval) is
    answered by the rule; ``_native_batch_norm_legit`` in training writes them (``Tensor(a!)``), and torch
    then forgets their values, so that call goes to torch."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def const() -> torch.Tensor:
        return mode.fake_tensor_converter.from_real_tensor(mode, torch.zeros(8), make_constant=True)

    rm, rv = const(), const()  # from real zeros, made outside the mode
    with mode:
        x, w = torch.empty(2, 8, 5, 5), torch.empty(8)
        assert dry_outputs(aten.native_batch_norm.default, (x, w, w, rm, rv, False, 0.1, 1e-5), {}) is not None
        assert dry_outputs(aten._native_batch_norm_legit_no_training.default, (x, w, w, rm, rv, 0.1, 1e-5), {}) is not None
        assert dry_outputs(aten._native_batch_norm_legit.default, (x, w, w, rm, rv, True, 0.1, 1e-5), {}) is None
        aten._native_batch_norm_legit.default(x, w, w, rm, rv, True, 0.1, 1e-5)
    assert rm.constant is None and rv.constant is None
