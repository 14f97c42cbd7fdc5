"""The values a dry run's shapes depend on: index arithmetic computed for real, everything else shapes only.

A graph model's forward often turns its inputs' *indices* into shapes: ``to_dense_batch`` counts the nodes
of each graph in a batch vector, a boolean mask over edges selects some of them (``x[mask]`` is an
``aten.nonzero``). On FakeTensors such an op has a data-dependent output and the dry run cannot go on;
running the whole model for real instead costs its whole arithmetic and memory.

:class:`IndexValues` keeps, beside each fake integer or boolean tensor that came from the real input, its
real value, and computes each integer or boolean op on known values for real too (index arithmetic is
small: an ``edge_index`` is two integers per edge). When an op's output shape depends on values, and every
tensor it reads is known, it runs for real and its output becomes a fake tensor of the true shape; the
floating-point work (features, weights, activations) stays a dry run. :attr:`IndexValues.real_ops` names
the ops whose shapes came from real values, for the report.

Values stay true under writes: an op that writes into a tensor (``mask[idx] = True`` is an in-place
``index_put_``, and ``masked_fill_``, ``copy_``, ``fill_`` and every ``out=`` op) is computed on the real
values too when every tensor it reads is known, so the write reaches them (and every view of them, which
shares the real storage); otherwise the written tensor and every tensor sharing its storage lose their
values, and an op whose shape then depends on them cannot be computed here: the run falls back to a real
one rather than guess. A data-dependent op that gives an empty tensor is counted in
:attr:`IndexValues.empty_ops`, which the report states loudly (the layers after it count no work).

>>> # pyg:gps at 10,000 nodes: nonzero over a node mask ran for real, the rest of the forward stayed shapes
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils.weak import WeakIdKeyDictionary

from graphprof.formulas.registry import op_name

__all__ = ["IndexValues", "is_index"]

#: The most elements of one index tensor kept with its real value (int64: 64 MiB).
MAX_INDEX_ELEMENTS = 1 << 23


def is_index(t: Any) -> bool:
    """An integer or boolean tensor small enough to keep its value: what shapes are computed from."""
    return isinstance(t, torch.Tensor) and not t.is_floating_point() and not t.is_complex() and t.numel() <= MAX_INDEX_ELEMENTS


class IndexValues:
    """Real values of the index tensors of one dry run, keyed by their fake tensors (see the module docstring)."""

    def __init__(self) -> None:
        self.known: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.real_ops: Counter[str] = Counter()
        #: data-dependent ops whose real output was empty (``x[mask]`` selecting nothing), with counts
        self.empty_ops: Counter[str] = Counter()

    @classmethod
    def of_inputs(cls, real: Any, fake: Any) -> IndexValues:
        """The values of a run's inputs: ``fake`` (the run's converted inputs) leaf by leaf beside ``real``."""
        values = cls()
        for r, f in zip(tree_flatten(real)[0], tree_flatten(fake)[0], strict=True):
            values.seed(f, r)
        return values

    def seed(self, fake: Any, real: Any) -> None:
        """The run's input ``fake`` stands for the real ``real``: kept when it is an index tensor on a real device.
        The value is a copy, so that a write the run computes on it never reaches the caller's tensor."""
        if is_index(real) and not real.is_meta and isinstance(fake, torch.Tensor) and fake is not real:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                self.known[fake] = real.clone()

    def value(self, t: torch.Tensor) -> torch.Tensor | None:
        """The real value of index tensor ``t``: kept for a fake, the tensor itself for a real one (a constant
        such as the ``True`` of ``mask[idx] = True``, lifted into the run), a fake constant's own; ``None`` when
        unknown, and for floating-point tensors, whose values stay unread."""
        from torch._subclasses.fake_tensor import FakeTensor

        known = self.known.get(t)
        if known is not None:
            return cast(torch.Tensor, known)
        if not isinstance(t, FakeTensor):
            return t if is_index(t) and not t.is_meta else None
        constant = getattr(t, "constant", None)  # FakeTensorMode drops it when the tensor is written
        return constant if is_index(constant) else None

    def _real_args(self, args: Any) -> Any | None:
        """``args`` with every tensor replaced by its real value, or ``None`` when one is not known."""
        leaves, spec = tree_flatten(args)
        real = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                value = self.value(leaf)
                if value is None:
                    return None
                real.append(value)
            else:
                real.append(leaf)
        return tree_unflatten(real, spec)

    def follow(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """After an op ran on fakes: where it reads only known index tensors (or none: a factory such as
        ``torch.ones(1, n, dtype=torch.bool)``) and writes index tensors, compute it for real too, so that later
        shapes can be read off its values. A write it cannot compute forgets the written values."""
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        written = _written(func, args, kwargs)
        computable = bool(outs) and all(is_index(t) for t in outs) and not _seeded(func)
        real_args = self._real_args((args, kwargs)) if computable else None
        if real_args is None:
            if written and self.known:
                self._forget(written)
            return
        real_out = _run_real(func, *real_args)
        for fake, real in zip(tree_flatten(out)[0], tree_flatten(real_out)[0], strict=False):
            if isinstance(fake, torch.Tensor) and isinstance(real, torch.Tensor):
                self.known[fake] = real

    def _forget(self, written: list[torch.Tensor]) -> None:
        """Drop the values of every kept tensor that shares a storage with one of ``written``."""
        storages = {StorageWeakRef(t.untyped_storage()) for t in written}
        for t in [t for t in list(self.known.keys()) if StorageWeakRef(t.untyped_storage()) in storages]:
            del self.known[t]

    def _shape_args(self, args: Any) -> Any | None:
        """``args`` for computing an output's *shape*: known index tensors by their real values, floating-point
        ones (whose values no shape depends on when an index tensor selects from them: ``x[mask]``,
        ``masked_select``) by zeros of their shape; ``None`` when an index tensor is unknown or none is known."""
        leaves, spec = tree_flatten(args)
        real, known = [], False
        for leaf in leaves:
            if not isinstance(leaf, torch.Tensor):
                real.append(leaf)
                continue
            value = self.value(leaf)
            if value is not None:
                real.append(value)
                known = known or leaf in self.known
            elif leaf.is_floating_point() and leaf.numel() <= MAX_INDEX_ELEMENTS:
                real.append(torch.zeros(leaf.shape, dtype=leaf.dtype))
            else:
                return None
        return tree_unflatten(real, spec) if known else None

    def run_for_real(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], error: BaseException) -> Any:
        """An op whose output shape depends on values: run on the real index values (floating-point inputs as
        zeros of their shape, see :meth:`_shape_args`); its outputs become fakes of their true shape, and
        index outputs keep their values. When a needed value is unknown, ``error`` is raised again."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            real_args = self._shape_args((args, kwargs))
        fake_mode = _fake_mode_of(args)
        if real_args is None or fake_mode is None or _seeded(func):
            raise error
        real_out = _run_real(func, *real_args)
        self.real_ops[op_name(func)] += 1
        if any(isinstance(t, torch.Tensor) and t.numel() == 0 for t in tree_flatten(real_out)[0]):
            self.empty_ops[op_name(func)] += 1
        exact = self._real_args((args, kwargs)) is not None  # no input stood in as zeros: the outputs' values are real

        def to_fake(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            fake = fake_mode.from_tensor(t)
            if exact and is_index(t):
                self.known[fake] = t
            return fake

        return tree_map(to_fake, real_out)


def _written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors ``func`` writes into (its schema's mutable arguments: ``self`` of an in-place op, ``out=``)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return []
    written = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]
        written += [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
    return written


def _seeded(func: Any) -> bool:
    """An op that draws from the random generator: never run for real (the caller's RNG stays as found)."""
    return torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())


def _run_real(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func`` on real tensors, outside the fake mode (and outside every other dispatch mode)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.no_grad():
        return func(*args, **kwargs)


def _fake_mode_of(args: Any) -> Any:
    from torch._subclasses.fake_tensor import FakeTensor

    for leaf in tree_flatten(args)[0]:
        if isinstance(leaf, FakeTensor):
            return leaf.fake_mode
    return None
