"""Data movement: copies, casts, concatenation, padding, gathers, scatters, embedding, factories, RNG fills.

These ops compute (almost) nothing, so they cost 0 FLOPs, but they are *counted*: their bytes are real
memory traffic. Where the generic byte rule (all inputs read, all outputs written) is wrong, the formula
says what moves:

* a gather (embedding, index_select, gather, index) reads only the rows it gathers, plus the indices;
* an in-place scatter (index_put_, scatter_, index_add_) reads its values and indices and writes only the
  elements it touches (reading them first when it accumulates);
* ``copy_`` and fills read their source, never the old contents of the tensor they overwrite;
* factories and ``*_like`` / ``new_*`` read nothing.

An accumulating scatter adds 1 FLOP per value it adds.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._ops import OpOverloadPacket

from graphprof.formulas.common import elementwise, first, flops_of, io_bytes
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import VIEW_OP_NAMES, Formula, register

aten = torch.ops.aten

__all__ = ["indexed_elements"]

_MASK_DTYPES = (torch.bool, torch.uint8)


# Copies at the table's "copy" rate (0 FLOPs); bytes by the generic rule: inputs read, outputs written.
register(
    aten.clone, aten._to_copy, aten.lift_fresh_copy, aten.cat, aten.stack, aten.roll, aten.flip, aten.repeat,
    aten.pixel_shuffle, aten.pixel_unshuffle, aten.channel_shuffle, aten.native_channel_shuffle, aten.im2col,
    aten.select_scatter, aten.slice_scatter, aten.as_strided_scatter, aten.diagonal_scatter,
    aten.index_copy, aten.index_fill, aten.masked_scatter, aten.masked_select,
)(elementwise("copy"))  # fmt: skip
register(
    aten.constant_pad_nd, aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d,
    aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d,
)(elementwise("pad"))  # fmt: skip

# Functionalised graphs replace views by copying twins (view_copy, permute_copy...): real copies.
_VIEW_COPIES = [
    p for p in (getattr(aten, f"{name}_copy", None) for name in VIEW_OP_NAMES if name != "lift_fresh") if isinstance(p, OpOverloadPacket)
]
register(*_VIEW_COPIES)(elementwise("copy"))


@register(aten.col2im)
def col2im_cost(self: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    # folding columns back into the image adds overlapping elements
    return Cost(flops=flops_of("col2im", n_input=self.numel))


# ---- gathers: read the gathered elements and the indices -------------------------------------------


def _gather_bytes(result: TensorMeta, indices: list[TensorMeta | None]) -> Cost:
    read, written = io_bytes([result, *indices], [result])
    return Cost(flops=flops_of("gather", n_output=result.numel), bytes_read=read, bytes_written=written)


@register(aten.embedding)
def embedding_cost(weight: TensorMeta, indices: TensorMeta, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    # reads the gathered rows, not the table: numel(out) elements of the weight, plus the indices
    return _gather_bytes(out, [indices])


@register(aten.index_select, aten.gather)
def index_select_cost(self: TensorMeta, dim: int, index: TensorMeta, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    return _gather_bytes(out, [index])


@register(aten.index, aten._unsafe_index)
def index_cost(self: TensorMeta, indices: list[TensorMeta | None], *, out: TensorMeta, **_: Any) -> Cost:
    return _gather_bytes(out, list(indices))


@register(aten.take)
def take_cost(self: TensorMeta, index: TensorMeta, *, out: TensorMeta, **_: Any) -> Cost:
    return _gather_bytes(out, [index])


@register(aten._embedding_bag, aten._embedding_bag_forward_only, aten.embedding_bag)
def embedding_bag_cost(
    weight: TensorMeta,
    indices: TensorMeta,
    offsets: TensorMeta,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: TensorMeta | None = None,
    *args: Any,
    out: Any,
    **_: Any,
) -> Cost:
    # mode 0 sum, 1 mean, 2 max: one add (or compare) per gathered element, a divide per output for mean;
    # per-sample weights multiply each gathered element once more
    result = first(out)
    gathered = indices.numel * weight.shape[-1]
    flops = flops_of("embedding_bag", n_input=gathered, n_output=result.numel if mode == 1 else 0)
    flops += gathered if per_sample_weights is not None else 0
    rows_read = gathered * weight.itemsize
    read, written = io_bytes([indices, offsets, per_sample_weights], list(out))
    return Cost(flops=flops, bytes_read=rows_read + read, bytes_written=written)


# ---- scatters --------------------------------------------------------------------------------------


def indexed_elements(self: TensorMeta, indices: list[TensorMeta | None]) -> int:
    """Elements of ``self[indices]``: the broadcast index positions times the dimensions left whole.

    A boolean mask covers as many dimensions as it has. How many of its elements are set depends on its
    values; alongside integer indices it must broadcast with them, alone it is counted at its size (an
    upper bound).
    """
    dim, whole = 0, 1
    index_shapes: list[tuple[int, ...]] = []
    mask_elements = 1
    for index in indices:
        if index is None:
            whole *= self.shape[dim]
            dim += 1
        elif index.dtype in _MASK_DTYPES:
            mask_elements *= index.numel
            dim += index.ndim
        else:
            index_shapes.append(index.shape)
            dim += 1
    positions = math.prod(torch.broadcast_shapes(*index_shapes)) if index_shapes else mask_elements
    return positions * whole * math.prod(self.shape[dim:])


def _scatter_in_place(self: TensorMeta, touched: int, sources: list[TensorMeta | None], accumulate: bool) -> Cost:
    """Writes ``touched`` elements of ``self``; reads the sources, and the touched elements to accumulate."""
    touched_bytes = touched * self.itemsize
    read, _ = io_bytes(sources, [])
    if accumulate:
        return Cost(flops=flops_of("add", n_output=touched), bytes_read=read + touched_bytes, bytes_written=touched_bytes)
    return Cost(bytes_read=read, bytes_written=touched_bytes)


def _index_put(in_place: bool) -> Formula:  # a formula factory
    def formula(
        self: TensorMeta, indices: list[TensorMeta | None], values: TensorMeta, accumulate: bool = False, *args: Any, out: Any, **_: Any
    ) -> Cost:
        if in_place:
            touched = indexed_elements(self, list(indices))
            return _scatter_in_place(self, touched, [*indices, values], accumulate)
        # functional: a copy of self, then the scatter; the generic byte rule holds
        adds = indexed_elements(self, list(indices)) if accumulate else 0
        return Cost(flops=flops_of("add", n_output=adds))

    formula.__name__ = formula.__qualname__ = f"index_put[in_place={in_place}]"
    return formula


register(aten.index_put_, aten._index_put_impl_)(_index_put(in_place=True))
register(aten.index_put, aten._unsafe_index_put)(_index_put(in_place=False))


def _tensor_or_none(value: Any) -> TensorMeta | None:
    return value if isinstance(value, TensorMeta) else None


@register(aten.scatter_)
def scatter_inplace_cost(self: TensorMeta, dim: int, index: TensorMeta, src: Any, *, reduce: str | None = None, out: Any, **_: Any) -> Cost:
    # src is a tensor or a scalar value; reduce="add" / "multiply" accumulates
    return _scatter_in_place(self, index.numel, [index, _tensor_or_none(src)], accumulate=reduce is not None)


@register(aten.scatter_add_, aten.scatter_reduce_)
def scatter_add_inplace_cost(self: TensorMeta, dim: int, index: TensorMeta, src: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return _scatter_in_place(self, index.numel, [index, src], accumulate=True)


def _index_source(accumulate: bool) -> Formula:  # a formula factory
    def formula(self: TensorMeta, dim: int, index: TensorMeta, source: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
        # source's slices land on the indexed slices of self: added (index_add_) or copied (index_copy_)
        return _scatter_in_place(self, source.numel, [index, source], accumulate=accumulate)

    formula.__name__ = formula.__qualname__ = f"index_source[accumulate={accumulate}]"
    return formula


register(aten.index_add_)(_index_source(accumulate=True))
register(aten.index_copy_)(_index_source(accumulate=False))


@register(aten.index_fill_)
def index_fill_inplace_cost(self: TensorMeta, dim: int, index: TensorMeta, value: Any, *args: Any, out: Any, **_: Any) -> Cost:
    # fills index.numel slices of self along dim
    slice_numel = self.numel // self.shape[dim] if self.ndim else 1
    return _scatter_in_place(self, index.numel * slice_numel, [index, _tensor_or_none(value)], accumulate=False)


@register(aten.scatter)
def scatter_cost(self: TensorMeta, dim: int, index: TensorMeta, src: Any, *, reduce: str | None = None, out: Any, **_: Any) -> Cost:
    # functional: a copy of self, then the scatter (generic bytes); reduce= accumulates
    return Cost(flops=flops_of("add", n_output=index.numel) if reduce is not None else 0)


@register(aten.scatter_add, aten.scatter_reduce)
def scatter_add_cost(self: TensorMeta, dim: int, index: TensorMeta, src: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("add", n_output=index.numel))


@register(aten.index_add)
def index_add_cost(self: TensorMeta, dim: int, index: TensorMeta, source: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("add", n_output=source.numel))


# ---- overwrites, fills and factories: nothing old is read ---------------------------------------------


@register(aten.copy_)
def copy_inplace_cost(self: TensorMeta, src: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:
    return Cost(bytes_read=src.addressed_nbytes, bytes_written=self.nbytes)


@register(aten.fill_, aten.fill, aten.zero_, aten.zero)
def fill_cost(self: TensorMeta, value: Any = None, *args: Any, out: Any, **_: Any) -> Cost:
    # fill_.Tensor reads its 0-d value tensor; the old contents of self are not read
    read = value.addressed_nbytes if isinstance(value, TensorMeta) else 0
    return Cost(bytes_read=read, bytes_written=first(out).nbytes)


@register(
    aten.zeros, aten.ones, aten.full, aten.arange, aten.linspace, aten.logspace, aten.scalar_tensor, aten.eye,
    aten.tril_indices, aten.triu_indices, aten.zeros_like, aten.ones_like, aten.full_like,
    aten.new_zeros, aten.new_ones, aten.new_full,
    aten.rand, aten.randn, aten.randint, aten.randperm, aten.rand_like, aten.randn_like, aten.randint_like,
    aten.uniform_, aten.normal_, aten.random_, aten.exponential_, aten.cauchy_, aten.log_normal_, aten.geometric_,
)  # fmt: skip
def factory_cost(*args: Any, out: Any, **kwargs: Any) -> Cost:
    # written, not computed from data: *_like / new_* read only their argument's metadata, RNG fills
    # (uniform_, normal_...) never read the tensor they overwrite
    result = first(out)
    return Cost(flops=flops_of("factory", n_output=result.numel), bytes_written=result.nbytes)
