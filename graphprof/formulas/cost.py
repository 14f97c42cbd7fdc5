"""The records every cost formula reads and writes.

:class:`TensorMeta` is what a formula sees in place of a tensor: its shape and dtype, nothing else, so
each formula reads as plain arithmetic on shapes. :class:`Cost` is what a formula returns: a frozen,
addable record of MACs, FLOPs and bytes (the conventions are stated once, in
:mod:`graphprof.formulas`).

Example::

    >>> Cost(macs=10, flops=25, bytes_read=64, bytes_written=16) + Cost(flops=5)
    Cost(macs=10, flops=30, bytes_read=64, bytes_written=16)
    >>> sum([Cost(flops=1), Cost(flops=2)]).flops
    3
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["Cost", "ZERO", "TensorMeta"]


@dataclass(frozen=True, slots=True)
class Cost:
    """MACs, FLOPs and bytes of one op, or of any sum of ops.

    ``macs`` counts multiply-accumulates of contractions only; ``flops`` is ``2 * macs`` plus every
    other arithmetic operation; ``bytes_read`` / ``bytes_written`` are the logical sizes
    (shape x itemsize) of the distinct tensors an op writes and reads, a broadcast (stride-0)
    dimension of an input counting once.
    """

    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(
            self.macs + other.macs, self.flops + other.flops, self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written
        )

    def __radd__(self, other: object) -> Cost:
        # ``sum(costs)`` starts from the integer 0; accept it and nothing else.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte moved, or ``None`` when the op moves no bytes."""
        moved = self.bytes_moved
        if moved == 0:
            return None
        return self.flops / moved


ZERO = Cost()
"""The cost of an op that computes nothing and moves nothing (a view, a size query)."""


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """A tensor reduced to what cost formulas need: its shape, dtype and (when known) strides.

    ``stride`` tells a broadcast from a copy: ``x.expand(197, 768, 768)`` of a 768 x 768 weight has
    stride 0 along its first dimension, so a kernel reading it addresses 768 x 768 elements, not
    197 x 768 x 768 (see :attr:`addressed_nbytes`). ``None`` means unknown (treated as dense).

        >>> w = TensorMeta((197, 768, 768), torch.bfloat16, (0, 768, 1))
        >>> w.nbytes, w.addressed_nbytes   # 197 * 768 * 768 * 2, 768 * 768 * 2
        (232390656, 1179648)
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...] | None = None
    #: stored elements of a sparse tensor (COO, CSR, CSC...); ``None`` for a dense one
    nnz: int | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Logical size in bytes (shape x itemsize), whatever the strides."""
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def addressed_nbytes(self) -> int:
        """Bytes a kernel reading this tensor addresses: a stride-0 (broadcast) dimension counts once.

        This is what the generic byte rule charges for an input; outputs are dense and use :attr:`nbytes`.
        """
        if self.nnz is not None:  # the stored values and two int64 indices each (COO; CSR's row pointers are fewer)
            return self.nnz * (self.dtype.itemsize + 16)
        if self.stride is None or len(self.stride) != len(self.shape) or 0 in self.shape:
            return self.nbytes
        return math.prod(size for size, step in zip(self.shape, self.stride, strict=True) if step != 0) * self.dtype.itemsize
