"""Small helpers shared by the formula modules, and the factories for families of ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.rates import COMPLEX_FLOPS, FlopRate, rate

__all__ = ["contraction", "first", "flops_of", "elementwise", "per_input_and_output", "io_bytes", "by_name"]


def contraction(macs: int, other_flops: int = 0) -> Cost:
    """A contraction of ``macs`` multiply-accumulates (2 FLOPs each) plus ``other_flops`` (bias, scale...)."""
    return Cost(macs=macs, flops=2 * macs + other_flops)


def first(out: Any) -> TensorMeta:
    """The first tensor of an op's output (ops like max_pool2d_with_indices return several)."""
    while isinstance(out, (tuple, list)):
        out = out[0]
    return cast(TensorMeta, out)


def flops_of(name: str, n_input: int = 0, n_output: int = 0) -> int:
    """FLOPs of ``n_input`` input elements and ``n_output`` output elements at the table's rate."""
    r = rate(name)
    return r.per_input * n_input + r.per_output * n_output


def io_bytes(reads: list[TensorMeta | None], writes: list[TensorMeta | None]) -> tuple[int, int]:
    """Bytes of explicitly chosen tensors, for formulas that override the generic byte rule.

    Reads count the storage each tensor addresses (a broadcast dimension once), writes the dense size.
    """
    return (sum(t.addressed_nbytes for t in reads if t is not None), sum(t.nbytes for t in writes if t is not None))


def elementwise(name: str) -> Callable[..., Cost]:
    """Factory: a formula costing ``rate(name).per_output`` FLOPs per element of the first output (per complex
    element of a complex output, :data:`~graphprof.formulas.rates.COMPLEX_FLOPS` for the arithmetic ops)."""
    per_output = rate(name).per_output
    per_complex = COMPLEX_FLOPS.get(name, per_output)

    def formula(*args: Any, out: Any, **kwargs: Any) -> Cost:
        result = first(out)
        return Cost(flops=(per_complex if result.dtype.is_complex else per_output) * result.numel)

    formula.__name__ = formula.__qualname__ = f"elementwise[{name}]"
    return formula


def per_input_and_output(name: str) -> Callable[..., Cost]:
    """Factory: ``per_input`` FLOPs per element of the first argument plus ``per_output`` per output element.

    Reductions (sum, mean, var...) and row-wise normalisations (softmax) are of this family.
    """
    r: FlopRate = rate(name)

    def formula(self: TensorMeta, *args: Any, out: Any, **kwargs: Any) -> Cost:
        return Cost(flops=r.per_input * self.numel + r.per_output * first(out).numel)

    formula.__name__ = formula.__qualname__ = f"per_input_and_output[{name}]"
    return formula


def by_name(packet: Any, body: Callable[..., Cost]) -> Callable[..., Cost]:
    """Factory: the formula of ``packet`` that hands ``body`` the op's arguments by their schema names.

    Kernels that take the same arguments at other positions (``_cudnn_rnn`` and ``miopen_rnn``,
    ``convolution_backward`` and its ``_overrideable`` twin) share one ``body`` that names only the
    arguments it reads (and ``**_`` for the rest) instead of each copying the aten argument list. The
    names are those of the packet's ``default`` overload (an ``.out`` overload adds keyword-only ones
    only); an argument the call leaves out takes the body's default. An argument named ``out`` (the
    attention backward kernels' forward output) is handed over as ``out_``: ``out`` is the op's result.

    Example: ``by_name(aten.mm, lambda self, mat2, *, out, **_: contraction(...))`` called as
    ``formula(a, b, out=c)`` runs ``body(self=a, mat2=b, out=c)``.
    """
    names = [a.name + "_" * (a.name == "out") for a in packet.default._schema.arguments if not a.kwarg_only]

    def formula(*args: Any, out: Any, **kwargs: Any) -> Cost:
        # strict=False: a call may leave trailing defaulted arguments out
        return body(**dict(zip(names, args, strict=False)), **kwargs, out=out)

    formula.__name__ = formula.__qualname__ = f"{body.__name__}[{packet.__name__}]"
    return formula
