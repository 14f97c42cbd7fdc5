"""The run's copy of each tensor: a FakeTensor on a dry run (no arithmetic, no memory), cast to the run's
dtype if asked; small constants keep their values, so a forward that reads them still runs."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import nn

from graphprof.base.logs import FAKE_TENSOR_LOGGER, quiet_loggers
from graphprof.errors import DataDependentError
from graphprof.run.shapes import new_fake

__all__ = ["fake_mode", "faking", "Converter", "all_meta", "plain_dense", "fake_from_metadata", "small_tensor_attributes", "nbytes"]


def fake_mode() -> Any:
    """The one maker of a run's ``FakeTensorMode`` (real tensors allowed in, as constants): the dry run's
    (:class:`Converter`) and a training step's (:func:`graphprof.run.step.run_step`)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


@contextlib.contextmanager
def faking(mode: Any) -> Iterator[None]:
    """Enter ``mode`` (from :func:`fake_mode`) for a block, with torch's FakeTensor logger quiet: it logs a
    meta kernel's failure with the whole traceback before raising, and graphprof names that failure in one
    line of its own (the library never prints). The logger's level is put back after the block."""
    with quiet_loggers(FAKE_TENSOR_LOGGER, level=logging.CRITICAL), mode:
        yield


#: Real buffers up to this many elements keep their values on a dry run (see :func:`run_model`).
_CONSTANT_ELEMENTS = 64


def _small_constant(t: torch.Tensor) -> bool:
    return (
        not isinstance(t, nn.Parameter) and not t.is_meta and t.numel() <= _CONSTANT_ELEMENTS and not t.requires_grad
        and type(t) is torch.Tensor
    )  # fmt: skip


def small_tensor_attributes(root: nn.Module) -> dict[str, torch.Tensor]:
    """Small tensors kept as plain module attributes (not buffers), such as YOLO's ``Detect.stride``: a
    dry run swaps them for constants too, so a forward that reads their values still runs."""
    found: dict[str, torch.Tensor] = {}
    for path, module in root.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_") and _small_constant(value):
                found[f"{path}.{attr}" if path else attr] = value
    return found


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


#: Leaves of a call's inputs that hold no tensor a pytree cannot see (a cache object may: it is not plain).
_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device)


def all_meta(values: list[Any]) -> bool:
    """Every value is a tensor on the meta device or a plain constant, and one at least is a tensor: an
    object the pytree does not open (a transformers cache, say) keeps the FakeTensor path."""
    tensors = [t for t in values if isinstance(t, torch.Tensor)]
    plain = all(isinstance(v, (torch.Tensor, *_PLAIN)) for v in values)
    return plain and bool(tensors) and all(t.is_meta for t in tensors)


class Converter:
    """The run's copy of each tensor: a FakeTensor on a dry run, cast to ``dtype`` if given; each
    tensor converted once (a parameter shared by two modules stays one tensor). Call it inside the
    fake mode."""

    def __init__(self, named: dict[str, torch.Tensor], fake: bool, dtype: torch.dtype | None, train: bool) -> None:
        self.fake_mode = fake_mode() if fake else None
        self.home = next((t.device for t in named.values() if not t.is_meta), None)
        self.dtype = dtype
        self.train = train
        self.memo: dict[int, Any] = {}

    def __call__(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in self.memo:
            self.memo[id(t)] = self._convert(t)
        return self.memo[id(t)]

    def _convert(self, t: torch.Tensor) -> torch.Tensor:
        fake_mode = self.fake_mode
        if fake_mode is not None and t.layout != torch.strided:
            # FakeTensors of sparse layouts cannot be made from real ones (no storage to describe)
            raise DataDependentError(f"a {str(t.layout).removeprefix('torch.')} tensor of shape {tuple(t.shape)} cannot be a FakeTensor")
        if fake_mode is not None and t.is_meta and self.home is not None:
            # a meta input to a model with real weights stands for a tensor on the model's device
            out = torch.empty(t.shape, dtype=t.dtype, device=self.home)
        elif fake_mode is not None:
            out = self._fake(fake_mode, t)
        else:
            out = t
        if self.dtype is not None and out.is_floating_point() and out.dtype != self.dtype:
            with torch.no_grad():
                out = out.to(self.dtype)
            if isinstance(t, nn.Parameter):
                out.requires_grad_(t.requires_grad and self.train)
        return out

    @staticmethod
    def _fake(fake_mode: Any, t: torch.Tensor) -> torch.Tensor:
        """``t`` as a FakeTensor. Small real tensors (YOLO's strides) keep their values as constants, so a
        forward that reads them (``.item()``, ``torch.full(..., stride)``) still runs on a dry run; each is
        a copy, so the run never writes to the user's tensor. Any failure of the conversion asks
        for a real run, naming the tensor."""
        try:
            if _small_constant(t):
                from torch._subclasses.fake_tensor import unset_fake_temporarily

                # a copy, made outside the fake mode: an in-place op of the run on the constant (BatchNorm's
                # num_batches_tracked += 1) must not reach the user's tensor, and a view cannot be a constant
                with unset_fake_temporarily():
                    own = t.clone()
                if plain_dense(own):
                    return fake_from_metadata(fake_mode, own, constant=own)
                return cast(torch.Tensor, fake_mode.fake_tensor_converter.from_real_tensor(fake_mode, own, make_constant=True))
            if plain_dense(t):
                return fake_from_metadata(fake_mode, t)
            return cast(torch.Tensor, fake_mode.from_tensor(t))
        except Exception as exc:
            raise DataDependentError(
                f"a {t.dtype} tensor of shape {tuple(t.shape)} cannot be a FakeTensor ({type(exc).__name__}: {exc})"
            ) from exc


def plain_dense(t: torch.Tensor) -> bool:
    """Whether ``t`` is fully described by its metadata: a plain tensor or parameter that owns its storage from
    offset 0 (not resized to nothing), a leaf with no gradient held, dense, no conjugate or negative bit, neither
    quantized nor an inference tensor nor an ``nn.Buffer``. Anything else (a view, a subclass, a tensor with
    ``.grad``) goes through torch's full converter, which follows storages, grads and those flags."""
    return bool(
        type(t) in (torch.Tensor, nn.Parameter) and t.layout == torch.strided and t.is_leaf and t.grad is None
        and not t._is_view() and t.storage_offset() == 0 and not t.is_quantized and not t.is_conj() and not t.is_neg()
        and not t.is_inference() and not getattr(t, "_is_buffer", False)
        and (t.numel() == 0 or t.untyped_storage().nbytes() > 0)
    )  # fmt: skip


def fake_from_metadata(fake_mode: Any, t: torch.Tensor, constant: torch.Tensor | None = None) -> torch.Tensor:
    """``t`` as a FakeTensor built straight from its sizes, strides, dtype, device and ``requires_grad``: the
    same tensor ``fake_mode.from_tensor`` gives for a :func:`plain_dense` one (a parameter stays one to
    ``isinstance``; ``constant`` keeps a small tensor's values, as ``from_real_tensor(make_constant=True)``
    does), without torch's general converter, which describes and memoises every storage (a fifth of a cold
    resnet50 dry run). ``tests/test_fake_params.py`` holds the two against each other."""
    fake = new_fake(fake_mode, t.device, t.size(), t.dtype, stride=t.stride(), requires_grad=t.requires_grad, constant=constant)
    if isinstance(t, nn.Parameter):
        fake._is_param = True
    return fake
