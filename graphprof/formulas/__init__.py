"""Cost formulas: MACs, FLOPs and bytes of every aten op, from shapes and dtypes alone.

Conventions
-----------
**MACs** count the multiply-accumulates of contractions only: convolutions (1d / 2d / 3d, transposed,
grouped, depthwise, any stride / padding / dilation; padded positions count, as dense kernels compute
them), matrix products (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot``: what ``nn.Linear``,
``torch.matmul`` and ``torch.einsum`` reach at dispatch), and attention: both products ``Q K^T`` and
``softmax(.) V`` of every scaled-dot-product kernel, and of ``aten._native_multi_head_attention`` (the fused
inference path of ``nn.MultiheadAttention``: its in-projection, both products and out-projection).
Grouped- and multi-query attention count per *query* head. Causal attention counts the full products (as
``torch.utils.flop_counter`` does; flash kernels skip about half, so this is their upper bound), and so
does ``flex_attention`` (a higher-order operator, keyed in the same registry); the *executed* and *useful*
shares of those FLOPs (the tiles or blocks a kernel visits, the scores the mask keeps) are reported beside
them under their own names (:mod:`graphprof.formulas.fractions`). A bias is not a MAC.

**FLOPs** are ``2 x MACs`` plus all other arithmetic: bias adds (1 per output element), normalisations,
activations, softmax, pooling, interpolation, element-wise ops and reductions, each at a documented
per-element rate in one table, :data:`PER_ELEMENT_FLOPS` (its module docstring states the conventions:
add / mul / compare = 1, a transcendental = 1, activations by their defining formula).

**Bytes**: ``bytes_read`` is the size (shape x dtype itemsize) of the distinct input tensors, activations
and weights alike, counting the storage each addresses: a broadcast (stride-0, ``expand``) dimension counts
once; ``bytes_written`` the size of the output tensors. Views and metadata ops move nothing.
A formula overrides this where it is wrong: a gather (embedding, index_select, index) reads only the rows
it gathers, an in-place scatter writes only what it touches, ``copy_`` and fills do not read what they
overwrite.

**Every op is in exactly one class** (:class:`OpStatus`): *counted* (a formula; data-movement ops such as
``cat``, ``clone``, ``copy_``, ``index_select``, ``embedding``, ``constant_pad_nd``, nearest upsampling
and initialising factories are counted with 0 FLOPs and their bytes), *zero-cost*
(:data:`ZERO_COST_OPS`: views, aliases, metadata queries, uninitialised ``empty*`` allocations,
assertions, profiler markers) or *unsupported* (no formula: :func:`op_cost` returns ``None`` and the op
is reported by name, never counted as zero).

Example::

    >>> import torch
    >>> from graphprof.formulas import op_cost
    >>> x = torch.empty(1, 3, 8, 8, device="meta")
    >>> w = torch.empty(4, 3, 3, 3, device="meta")
    >>> f = torch.ops.aten.convolution.default
    >>> args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    >>> op_cost(f, args, {}, f(*args)).macs   # 1 * 4 * 8 * 8 outputs x 3 * 3 * 3 = 6912
    6912
"""

from __future__ import annotations

# The formula modules register themselves on import; the order only matters for shared helpers.
from graphprof.formulas import (  # noqa: F401
    attention,
    backward,
    conv,
    flex,
    matmul,
    movement,
    norm,
    pointwise,
    pooling,
    quantized,
    recurrent,
    reduction,
    resample,
    scatter,
)
from graphprof.formulas.cost import ZERO, Cost, TensorMeta
from graphprof.formulas.rates import PER_ELEMENT_FLOPS, FlopRate
from graphprof.formulas.registry import FORMULAS, ZERO_COST_OPS, op_cost, op_status, register, register_formula

__all__ = [
    "Cost",
    "ZERO",
    "TensorMeta",
    "register",
    "register_formula",
    "FORMULAS",
    "ZERO_COST_OPS",
    "op_status",
    "op_cost",
    "PER_ELEMENT_FLOPS",
    "FlopRate",
]
