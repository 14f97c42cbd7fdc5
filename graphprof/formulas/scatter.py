"""Message passing beyond gathers and scatters: segment reductions and sparse x dense products.

A graph layer moves features along E edges: it gathers the source rows (``index_select``/``gather``,
:mod:`graphprof.formulas.movement`: bytes only), transforms them, and reduces them into the target rows
(``scatter_add``/``scatter_reduce``/``index_add``, also in ``movement``: one add per source element), or
does both at once as a sparse adjacency times the features. The two families here:

* ``segment_reduce(data, reduce, lengths=...)``: one add (or multiply, compare) per element of ``data``,
  plus a divide per output element for ``mean``;
* ``_sparse_addmm(self, sparse, dense)`` / ``_sparse_mm(sparse, dense)``: each stored element of the
  (m, k) sparse matrix meets one row of the (k, n) dense one, so ``nnz x n`` MACs (``torch.sparse.mm``
  arrives as ``_sparse_addmm``; ``mm``/``addmm`` with a CSR left factor count the same way, in
  :mod:`graphprof.formulas.matmul`). A dense product would be ``m x k x n``: for an adjacency of N nodes
  and E edges, ``E x F`` instead of ``N^2 x F``. Bytes: the stored values and their indices
  (:attr:`TensorMeta.addressed_nbytes`), the dense factor and the output.
* ``_sparse_mm_reduce_impl(csr, dense, reduce)`` (``torch.sparse.mm(csr, x, reduce)``, PyG's ``spmm``
  for ``mean``/``max`` aggregation on a CSR adjacency): the same ``nnz x n`` products, reduced into the
  output rows: ``sum`` and ``mean`` accumulate (``nnz x n`` MACs; ``mean`` then divides each output
  element once), ``amax``/``amin`` compare (``nnz x n`` multiplies and as many compares, no MACs).
"""

from __future__ import annotations

from typing import Any

import torch

from graphprof.formulas.common import contraction, first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

aten = torch.ops.aten

_SEGMENT_RATES = {"sum": "sum", "prod": "prod", "max": "amax", "min": "amax", "mean": "mean"}


@register(aten.segment_reduce)
def segment_reduce_cost(data: TensorMeta, reduce: str, *args: Any, out: Any, **_: Any) -> Cost:
    # one add (multiply, compare) per element of data; mean adds a divide per output element
    name = _SEGMENT_RATES.get(str(reduce), "sum")
    return Cost(flops=flops_of(name, n_input=data.numel, n_output=first(out).numel))


def _sparse_product(sparse: TensorMeta, dense: TensorMeta) -> int:
    """MACs of sparse (m, k) x dense (k, n): each stored element meets one row of ``n``."""
    stored = sparse.nnz if sparse.nnz is not None else sparse.numel  # a dense left factor: m x k
    return stored * dense.shape[-1]


@register(aten._sparse_addmm)
def sparse_addmm_cost(
    self: TensorMeta, mat1: TensorMeta, mat2: TensorMeta, *, beta: Any = 1, alpha: Any = 1, out: TensorMeta, **_: Any
) -> Cost:
    # beta * self + alpha * (mat1 @ mat2): the product, then an add per output element (and the scalings)
    extra = (0 if beta == 0 else out.numel) + (out.numel if beta not in (0, 1) else 0) + (out.numel if alpha != 1 else 0)
    return contraction(_sparse_product(mat1, mat2), extra)


@register(aten._sparse_mm)
def sparse_mm_cost(sparse: TensorMeta, dense: TensorMeta, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    # captured above dispatch (a graph of torch.sparse.mm); at dispatch it is _sparse_addmm with beta 0
    return contraction(_sparse_product(sparse, dense))


@register(aten._sparse_mm_reduce_impl)
def sparse_mm_reduce_cost(sparse: TensorMeta, dense: TensorMeta, reduce: str, *args: Any, out: Any, **_: Any) -> Cost:
    # each stored element times a row of n, reduced into its output row; mean: one divide per output element
    products = _sparse_product(sparse, dense)
    if str(reduce) in ("amax", "amin"):
        return Cost(flops=2 * products)  # a multiply and a compare per product
    return contraction(products, first(out).numel if str(reduce) == "mean" else 0)
