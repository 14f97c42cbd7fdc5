"""One registry of cost formulas, keyed by aten op packet, and the lookup the counting pass calls.

Every op is in exactly one of three classes (:class:`OpStatus`):

* **counted**: a formula is registered for its packet (``aten.mm``, not ``aten.mm.default``);
* **zero-cost**: its packet is in :data:`ZERO_COST_OPS`, a documented set of ops that compute nothing and
  move no data (views, metadata queries, uninitialised allocations, assertions, profiler markers);
* **unsupported**: neither. :func:`op_cost` returns ``None`` for it, so the caller reports it by name.
  Nothing is silently zero.

A formula is called as ``formula(*args, out=out, **kwargs)`` with the op's own arguments (named as in its
aten schema) and its output, every tensor replaced by a :class:`TensorMeta`. It returns a
:class:`Cost`. If the returned cost sets neither byte field, :func:`op_cost` fills in the generic rule:
bytes read = the distinct input tensors (the storage each addresses: a
broadcast, stride-0 dimension counts once), bytes written = the output tensors. A formula that sets either
byte field owns both (an embedding reads only the rows it gathers, not the whole table).

Example::

    >>> import torch
    >>> aten = torch.ops.aten
    >>> a = torch.empty(4, 6, device="meta")
    >>> b = torch.empty(6, 5, device="meta")
    >>> op_cost(aten.mm.default, (a, b), {}, aten.mm.default(a, b))   # 4 * 6 * 5 = 120 MACs
    Cost(macs=120, flops=240, bytes_read=216, bytes_written=80)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, cast

import torch
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket

from graphprof.base.choices import OpStatus
from graphprof.errors import FormulaRegistryError
from graphprof.formulas.cost import ZERO, Cost, TensorMeta

__all__ = [
    "Formula",
    "register",
    "register_formula",
    "FORMULAS",
    "ZERO_COST_OPS",
    "VIEW_OP_NAMES",
    "op_status",
    "op_cost",
    "op_name",
    "tensor_meta",
    "to_meta",
    "summarise_call",
    "register_summary",
]

Formula = Callable[..., Cost]

aten = torch.ops.aten

# --------------------------------------------------------------------------------------------------
# Zero-cost ops. Each name is looked up in the installed torch; a name this torch lacks is skipped, so
# the set follows torch versions (tests check that every name resolves in the pinned torch).

VIEW_OP_NAMES: Final[tuple[str, ...]] = (
    # Views and aliases: the output shares the input's storage; no element is read or written.
    "view", "_unsafe_view", "_reshape_alias", "view_as", "as_strided", "as_strided_", "alias",
    "t", "t_", "transpose", "transpose_", "permute", "movedim", "moveaxis", "swapaxes", "swapdims",
    "adjoint", "expand", "expand_as", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "unflatten",
    "select", "slice", "narrow", "diagonal", "unfold", "split", "split_with_sizes", "unsafe_split",
    "unsafe_split_with_sizes", "chunk", "unsafe_chunk", "tensor_split", "unbind",
    "view_as_real", "view_as_complex", "real", "imag", "_conj", "_neg_view",
    "detach", "detach_", "lift_fresh",
)  # fmt: skip

_METADATA_OP_NAMES: Final[tuple[str, ...]] = (
    # Queries answered from the tensor's metadata, or a single scalar read back to Python.
    "size", "sym_size", "stride", "sym_stride", "numel", "sym_numel", "dim", "storage_offset",
    "sym_storage_offset", "is_contiguous", "sym_is_contiguous", "is_strides_like_format",
    "is_non_overlapping_and_dense", "is_same_size", "is_complex", "is_floating_point",
    "is_nonzero", "_local_scalar_dense", "_has_compatible_shallow_copy_type",
)  # fmt: skip

_ALLOCATION_OP_NAMES: Final[tuple[str, ...]] = (
    # Allocation without initialisation: memory is reserved, nothing is computed or written.
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "resize_", "resize_as_",
)  # fmt: skip

_RUNTIME_OP_NAMES: Final[tuple[str, ...]] = (
    # Runtime assertions and stream bookkeeping: they guard or order work, they do none.
    "_assert_async", "_assert_scalar", "_assert_tensor_metadata", "_functional_assert_async",
    "_functional_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size",
    "_functional_sym_constrain_range", "_functional_sym_constrain_range_for_size", "record_stream",
)  # fmt: skip


def _packets(namespace: Any, names: tuple[str, ...]) -> list[OpOverloadPacket]:
    return [p for p in (getattr(namespace, n, None) for n in names) if isinstance(p, OpOverloadPacket)]


ZERO_COST_OPS: Final[frozenset[OpOverloadPacket]] = frozenset(
    _packets(aten, VIEW_OP_NAMES + _METADATA_OP_NAMES + _ALLOCATION_OP_NAMES + _RUNTIME_OP_NAMES)
    # prim.device / prim.layout / prim.dtype: metadata queries issued by Python-level code.
    + _packets(torch.ops.prim, ("device", "layout", "dtype"))
    # record_function markers (torch.profiler, Hugging Face models) reach dispatch as these ops.
    + _packets(torch.ops.profiler, ("_record_function_enter", "_record_function_enter_new", "_record_function_exit"))
)
"""Ops known to compute nothing and move no data: views and aliases, metadata queries, uninitialised
allocations (``empty*``), runtime assertions and profiler markers. Factories that *initialise* memory
(``zeros``, ``full``, ``arange``, ``*_like`` fills) are not here: they are counted, with 0 FLOPs and the
bytes they write."""

# --------------------------------------------------------------------------------------------------
# Registry

#: A registry key: an aten op's packet, or a higher-order operator (``flex_attention``), which has no
#: overloads and is its own key.
OpKey = OpOverloadPacket | HigherOrderOperator

_FORMULAS: dict[OpKey, Formula] = {}
FORMULAS: Final[Mapping[OpKey, Formula]] = MappingProxyType(_FORMULAS)
"""Read-only view of the registry: packet (or higher-order operator) -> formula."""

Summary = Callable[[tuple[Any, ...], dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]]
_SUMMARIES: dict[OpKey, Summary] = {}

# Formulas for ops outside aten that exist only once their library is loaded: the module is imported the
# first time an op of that namespace is looked up, so graphprof never imports the library itself.
_EXTENSION_FORMULAS: Final[Mapping[str, str]] = MappingProxyType({"torchvision": "graphprof.formulas.torchvision_ops"})

_ZERO_COST: Final = object()
_UNSUPPORTED: Final = object()
# OpOverload -> formula, _ZERO_COST or _UNSUPPORTED; op_cost runs once per aten call, so resolve once.
_resolved: dict[Any, Any] = {}


def _check_key(packet: object) -> OpKey:
    if not isinstance(packet, (OpOverloadPacket, HigherOrderOperator)):
        hint = " (register the packet, e.g. aten.mm, not aten.mm.default)" if isinstance(packet, OpOverload) else ""
        raise FormulaRegistryError(f"cost formulas are keyed by OpOverloadPacket; got {packet!r} of type {type(packet).__name__}{hint}")
    if packet in _FORMULAS:
        raise FormulaRegistryError(f"{packet} already has a cost formula ({_FORMULAS[packet].__qualname__}); register each op once")
    if packet in ZERO_COST_OPS:
        raise FormulaRegistryError(f"{packet} is a zero-cost op; it cannot also have a cost formula")
    return packet


def register(*packets: OpKey) -> Callable[[Formula], Formula]:
    """Register the decorated function as the cost formula of each packet (or higher-order operator).

    Raises :class:`~graphprof.errors.FormulaRegistryError` for a key that is not an
    ``OpOverloadPacket``, for an op registered twice, and for a zero-cost op.

    Example::

        @register(aten.mm)
        def mm_cost(self, mat2, *, out):
            m, k = self.shape
            return contraction(m * k * mat2.shape[1])
    """
    if not packets:
        raise FormulaRegistryError("register() needs at least one op packet")
    keys = [_check_key(p) for p in packets]
    if len(set(keys)) != len(keys):
        raise FormulaRegistryError(f"register() was given the same op twice: {keys}")

    def decorate(formula: Formula) -> Formula:
        for key in keys:
            _check_key(key)
            _FORMULAS[key] = formula
        _resolved.clear()
        return formula

    return decorate


def register_summary(key: HigherOrderOperator, summary: Summary) -> None:
    """Give the higher-order operator ``key`` a summary of its arguments, applied by
    :func:`summarise_call` while their values can still be read (before tensors become shapes).

    A formula is a function of shapes; a few operators carry structure in tensor *values*
    (``flex_attention``'s block mask: which key blocks each query block visits). The summary turns
    such an argument into a plain record of integers that the formula then reads. One per operator.
    """
    if key in _SUMMARIES:
        raise FormulaRegistryError(f"{key} already has an argument summary; register each operator once")
    _SUMMARIES[key] = summary


def summarise_call(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` with the values a formula needs summarised (see :func:`register_summary`);
    unchanged for every op without a summary (all aten ops)."""
    summary = _SUMMARIES.get(func) if isinstance(func, HigherOrderOperator) else None
    return (args, kwargs) if summary is None else summary(args, kwargs)


def _packet_for_user(op: Any) -> OpOverloadPacket:
    """The packet of what a user may hand :func:`register_formula`: a packet, an overload, a
    ``torch.library.custom_op`` object or an ``"ns::name"`` string."""
    if isinstance(op, OpOverloadPacket):
        return op
    if isinstance(op, OpOverload):
        return cast(OpOverloadPacket, op.overloadpacket)
    overload = getattr(op, "_opoverload", None)  # torch.library.custom_op returns a CustomOpDef
    if isinstance(overload, OpOverload):
        return cast(OpOverloadPacket, overload.overloadpacket)
    if isinstance(op, str) and "::" in op:
        namespace, _, name = op.partition("::")
        packet = getattr(getattr(torch.ops, namespace), name.partition(".")[0], None)
        if isinstance(packet, OpOverloadPacket):
            return packet
    raise FormulaRegistryError(f"register_formula() needs an op (torch.ops.ns.name, a custom_op or 'ns::name'); got {op!r}")


def register_formula(op: Any, formula: Formula) -> None:
    """Give ``op`` (an op of your own, say a ``torch.library.custom_op``) a cost formula.

    The public counterpart of torch's ``register_flop_formula``. ``formula`` is called as
    ``formula(*args, out=out, **kwargs)`` with the op's own arguments, each tensor replaced by a
    :class:`~graphprof.formulas.TensorMeta` (``.shape``, ``.dtype``, ``.numel``), and must return a
    :class:`~graphprof.formulas.Cost`. Leave its byte fields at 0 to get the generic rule (the inputs'
    sizes read, the outputs' written). An op with no formula is reported as unsupported, by name;
    registering an op twice, or an op graphprof already counts, raises
    :class:`~graphprof.errors.FormulaRegistryError`.

    Example::

        @torch.library.custom_op("mylib::scaled_mm", mutates_args=())
        def scaled_mm(a: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor: ...

        graphprof.register_formula(
            scaled_mm,
            lambda a, b, s, *, out: Cost(macs=a.numel * b.shape[1], flops=2 * a.numel * b.shape[1] + out.numel),
        )
    """
    if not callable(formula):
        raise FormulaRegistryError(f"the formula for {op!r} must be callable, got {type(formula).__name__}")
    packet = _packet_for_user(op)
    _check_key(packet)

    def checked(*args: Any, out: Any, **kwargs: Any) -> Cost:
        cost = formula(*args, out=out, **kwargs)
        if not isinstance(cost, Cost):
            raise FormulaRegistryError(f"the formula registered for {packet} returned {type(cost).__name__}, not a graphprof Cost")
        return cost

    checked.__name__ = checked.__qualname__ = getattr(formula, "__qualname__", "user_formula")
    _FORMULAS[packet] = checked
    _resolved.clear()


# --------------------------------------------------------------------------------------------------
# Lookup


def _packet_of(func: Any) -> Any:
    return func.overloadpacket if isinstance(func, OpOverload) else func


def _load_extension(packet: Any) -> None:
    namespace = getattr(packet, "_qualified_op_name", "").partition("::")[0]
    module = _EXTENSION_FORMULAS.get(namespace)
    if module is not None:
        importlib.import_module(module)


def _resolve(func: Any) -> Any:
    packet = _packet_of(func)
    if packet not in _FORMULAS and packet not in ZERO_COST_OPS:
        _load_extension(packet)
    if packet in _FORMULAS:
        handler: object = _FORMULAS[packet]
    elif packet in ZERO_COST_OPS:
        handler = _ZERO_COST
    else:
        handler = _UNSUPPORTED
    _resolved[func] = handler
    return handler


def op_name(func: OpOverload | OpKey) -> str:
    """How graphprof names an op: ``aten.convolution.default`` (or its packet) -> ``aten.convolution``; a
    higher-order operator by its own name (``higher_order.flex_attention``)."""
    if isinstance(func, HigherOrderOperator):
        return f"higher_order.{func.name()}"
    return str(_packet_of(func)._qualified_op_name).replace("::", ".")


def op_status(func: OpOverload | OpKey) -> OpStatus:
    """Whether ``func`` is counted, zero-cost or unsupported."""
    handler = _resolved.get(func) or _resolve(func)
    if handler is _ZERO_COST:
        return OpStatus.ZERO_COST
    if handler is _UNSUPPORTED:
        return OpStatus.UNSUPPORTED
    return OpStatus.COUNTED


_NESTED = (torch.Tensor, TensorMeta, list, tuple)
_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def _strides(t: torch.Tensor) -> tuple[int, ...] | None:
    """A strided tensor's strides; ``None`` for layouts without them (sparse, nested)."""
    if t.layout != torch.strided or t.is_nested:
        return None
    return tuple(int(s) for s in t.stride())


def tensor_meta(t: torch.Tensor) -> TensorMeta:
    """One tensor's shape, dtype, strides and, for a sparse layout, stored elements (``nnz``)."""
    nnz = int(t._nnz()) if t.layout in _SPARSE_LAYOUTS else None
    return TensorMeta(tuple(int(s) for s in t.shape), t.dtype, _strides(t), nnz)


def to_meta(value: Any, memo: dict[int, TensorMeta]) -> Any:
    """Tensors -> :class:`TensorMeta`; one tensor passed twice stays one object (so it is read once)."""
    if isinstance(value, torch.Tensor):
        meta = memo.get(id(value))
        if meta is None:
            meta = memo[id(value)] = tensor_meta(value)
        return meta
    if isinstance(value, list):
        return [to_meta(v, memo) for v in value]
    if isinstance(value, tuple):  # plain tuple also for torch.return_types structs
        return tuple(to_meta(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: to_meta(v, memo) for k, v in value.items()}
    return value


def _to_meta(value: Any, seen: set[int], total: list[int], read: bool = True) -> Any:
    """Replace tensors by TensorMeta (recursing into lists and tuples); add each distinct tensor's bytes.

    An input (``read``) adds the bytes it addresses (a broadcast dimension once), an output its dense size.
    A TensorMeta argument (from a pass that already dropped the tensor, like graphprof.run.propagate) is
    kept as is; one object passed twice counts once, as for tensors.
    """
    if isinstance(value, (torch.Tensor, TensorMeta)):
        meta = value if isinstance(value, TensorMeta) else tensor_meta(value)
        key = id(value)
        if key not in seen:
            seen.add(key)
            total[0] += meta.addressed_nbytes if read else meta.nbytes
        return meta
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, _NESTED):
                converted = [_to_meta(v, seen, total, read) for v in value]
                return converted if isinstance(value, list) else tuple(converted)
        return value  # sizes, strides, scalars: nothing to convert
    return value


def op_cost(func: OpOverload | HigherOrderOperator, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Cost | None:
    """The cost of one aten call, as seen in ``__torch_dispatch__``.

    ``args``/``kwargs``/``out`` may hold real, meta or fake tensors (or their :class:`TensorMeta`),
    lists of them, scalars and ``None``. Returns the formula's :class:`Cost` (bytes filled in by the
    generic rule unless the formula set them), :data:`ZERO` for a zero-cost op, and ``None`` for an
    unsupported op.
    """
    formula = _resolved.get(func) or _resolve(func)
    if formula is _ZERO_COST:
        return ZERO
    if formula is _UNSUPPORTED:
        return None
    args, kwargs = summarise_call(func, args, kwargs)
    if "out" in kwargs:
        # An ``.out`` overload: the out= tensor is the result, not an input.
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    seen: set[int] = set()
    read = [0]
    meta_args = _to_meta(args, seen, read)
    meta_kwargs = {k: _to_meta(v, seen, read) for k, v in kwargs.items()}
    written = [0]
    meta_out = _to_meta(out, set(), written, read=False)
    try:
        cost: Cost = formula(*meta_args, out=meta_out, **meta_kwargs)
    except Exception as exc:
        if hasattr(exc, "add_note"):  # Python 3.11+: name the op without changing the exception's type
            exc.add_note(f"graphprof: raised by the cost formula {formula.__qualname__} of {func}")
        raise
    if cost.bytes_read == 0 and cost.bytes_written == 0:
        return Cost(cost.macs, cost.flops, read[0], written[0])
    return cost
