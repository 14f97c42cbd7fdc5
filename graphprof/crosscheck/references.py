"""Run a reference counter on a model: fvcore's ``FlopCountAnalysis`` or torch's ``FlopCounterMode``.

Each runner returns a :class:`ReferenceCounts`: the reference's own per-op figures, exactly as it reports
them, and apart from them its :class:`~graphprof.crosscheck.result.Adjustment` s, measured on the shapes
it recorded itself: the ops it saw but could not count (see
:data:`graphprof.crosscheck.conventions.LEFT_OUT`), and the ops it counts only approximately.

* fvcore traces the model with ``torch.jit`` (real arithmetic), the way its documentation shows:
  ``FlopCountAnalysis(model, inputs)`` on the model in eval mode, gradients enabled. A probe is added
  only for a TorchScript op fvcore has no handle for; fvcore's ``aten::einsum`` and ``aten::matmul``
  handles are wrapped, still returning their own figure, to also measure how far that figure is from
  the exact count (fvcore parses the cost estimate of numpy's ``einsum_path`` report, printed to 4 significant digits;
  fvcore's matmul multiplies out the first operand only, so a broadcast second operand is undercounted).
  fvcore's own figures are thus those of a plain ``FlopCountAnalysis``; the measurements are set apart
  by a key prefix.
* torch runs the model once under ``FlopCounterMode`` in eval mode without gradients (as graphprof's
  eval count does); a probe is added only for an op the installed torch neither counts nor decomposes.

fvcore is imported here and only here; its absence is a :class:`~graphprof.errors.MissingDependencyError`.
The model is left as it was found (:func:`graphprof.capture.methods.preserved_state`); the reference's own
warnings and log lines are silenced.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_leaves, tree_unflatten

from graphprof.base.logs import quiet_loggers
from graphprof.capture.methods import preserved_state
from graphprof.crosscheck.conventions import FVCORE, FVCORE_LEFT_OUT, LEFT_OUT, MATMUL, TORCH, TORCH_LEFT_OUT
from graphprof.crosscheck.result import Adjustment, OpCount
from graphprof.errors import MissingDependencyError, ReferenceFailedError, one_line
from graphprof.formulas.registry import op_name

__all__ = ["ReferenceCounts", "count_with_fvcore", "count_with_torch", "REFERENCES"]

_PROBE_PREFIX = "graphprof-adjustment:"
FVCORE_HINT = "pip install 'graphprof[validate]' (fvcore)"


@dataclass(frozen=True)
class ReferenceCounts:
    """What a reference counted: ``counted`` in its own keys, its ``adjustments`` per op and group,
    ``unsupported`` (other ops it reported without a count: element-wise ops for fvcore), and its version."""

    reference: str
    version: str
    counted: tuple[OpCount, ...]
    adjustments: tuple[Adjustment, ...] = ()
    unsupported: tuple[OpCount, ...] = ()

    @property
    def total(self) -> int:
        """The reference's own total (what it prints)."""
        return sum(c.count for c in self.counted)


class _Positional(nn.Module):
    """Call ``model(*args, **kwargs)`` from a flat tuple of tensors and return a flat tuple of tensors.

    ``torch.jit`` traces positional tensors in and tensors out; models taking keywords (``input_ids=``),
    lists of images, or returning dicts are adapted here, without touching the model itself.
    """

    def __init__(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.model = model
        leaves, self._spec = tree_flatten((args, kwargs))
        self._tensor_at = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        self._constants = leaves
        self.inputs = tuple(leaves[i] for i in self._tensor_at)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        leaves = list(self._constants)
        for i, tensor in zip(self._tensor_at, tensors, strict=True):
            leaves[i] = tensor
        args, kwargs = tree_unflatten(leaves, self._spec)
        out = self.model(*args, **kwargs)
        return tuple(t for t in tree_leaves(out) if isinstance(t, torch.Tensor))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the reference's warnings and log records (the library never prints)."""
    with quiet_loggers("fvcore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --------------------------------------------------------------------------------------------------
# fvcore


def _jit_shape(value: Any) -> tuple[int, ...] | None:
    # fvcore's own get_shape: the sizes of a complete tensor type, None for anything else
    try:
        if value.isCompleteTensor():
            return tuple(value.type().sizes())
    except RuntimeError:
        pass
    return None


def _key(reason: str, group: str, name: str, negative: bool = False) -> str:
    # fvcore sums handle results with Counter addition, which drops what is not positive: the sign of an
    # adjustment travels in its key
    return f"{_PROBE_PREFIX}{reason}:{group}:{name}:{'-' if negative else '+'}"


def _fvcore_probe(name: str, calls: Counter[str], unmeasured: Counter[str]) -> Callable[[list[Any], list[Any]], Counter[str]]:
    probe = LEFT_OUT[name]

    def handle(inputs: list[Any], outputs: list[Any]) -> Counter[str]:
        shapes = [_jit_shape(v) for v in inputs]
        out_shapes = [s for s in (_jit_shape(v) for v in outputs) if s is not None]
        try:
            counts = probe.counts(shapes, out_shapes, FVCORE)
        except (AssertionError, IndexError, TypeError):  # shapes the trace did not record: report it unmeasured
            unmeasured[f"aten::{name}"] += 1
            return Counter()
        calls[name] += 1
        return Counter({_key("left_out", group, name): value for group, value in counts.items()})

    return handle


def _exact_einsum(inputs: list[Any], outputs: list[Any]) -> int | None:
    # two operands: one multiply-accumulate per point of the iteration space (every distinct index);
    # more operands depend on the contraction path: no exact figure
    equation = str(inputs[0].toIValue()).replace(" ", "")
    operands = [_jit_shape(v) for v in inputs[1].node().inputs()]
    terms = equation.split("->")[0].split(",")
    if len(terms) != 2 or any(s is None for s in operands) or "." in equation:
        return None
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, operands, strict=True):
        assert shape is not None
        sizes.update(zip(term, shape, strict=True))
    total = 1
    for size in sizes.values():
        total *= size
    return total


def _exact_matmul(inputs: list[Any], outputs: list[Any]) -> int | None:
    # each output element is a dot product over the first operand's last dimension, broadcasting included
    first, out = _jit_shape(inputs[0]), _jit_shape(outputs[0])
    if first is None or out is None:
        return None
    total = first[-1]
    for size in out:
        total *= size
    return total


def _fvcore_measured(
    name: str,
    original: Callable[[list[Any], list[Any]], Any],
    exact: Callable[[list[Any], list[Any]], int | None],
    reason: str,
    calls: Counter[str],
) -> Callable[[list[Any], list[Any]], Counter[str]]:
    """fvcore's own handle, unchanged in what it returns, plus how far its figure is from the exact one."""

    def handle(inputs: list[Any], outputs: list[Any]) -> Counter[str]:
        value = original(inputs, outputs)
        counts = value if isinstance(value, Counter) else Counter({name: value})
        try:
            precise = exact(inputs, outputs)
        except (AssertionError, IndexError, TypeError, ValueError, RuntimeError):  # fvcore's figure stands alone
            precise = None
        own = sum(counts.values())
        if precise is not None and round(precise - own) != 0:
            calls[name] += 1
            counts[_key(reason, MATMUL, name, negative=precise < own)] = abs(precise - own)
        return counts

    return handle


def count_with_fvcore(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ReferenceCounts:
    """fvcore's ``FlopCountAnalysis`` of ``model(*args, **kwargs)``, by operator, with its adjustments."""
    try:
        with _quiet():  # importing fvcore scripts a function, which torch now warns about
            import fvcore
            from fvcore.nn import FlopCountAnalysis
    except ImportError as exc:
        raise MissingDependencyError(f"the fvcore cross-check needs fvcore: {FVCORE_HINT}") from exc

    wrapper = _Positional(model, args, kwargs)
    calls: Counter[str] = Counter()
    unmeasured: Counter[str] = Counter()
    with preserved_state(model), _quiet():
        model.eval()
        analysis = FlopCountAnalysis(wrapper, wrapper.inputs)
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings("none")
        # ``_op_handles`` is where set_op_handle keeps the handles; fvcore has no public getter
        handles = dict(getattr(analysis, "_op_handles", {}))
        probes = {f"aten::{n}": _fvcore_probe(n, calls, unmeasured) for n in FVCORE_LEFT_OUT if f"aten::{n}" not in handles}
        for name, exact, reason in (("einsum", _exact_einsum, "estimated"), ("matmul", _exact_matmul, "broadcast")):
            if f"aten::{name}" in handles:
                probes[f"aten::{name}"] = _fvcore_measured(name, handles[f"aten::{name}"], exact, reason, calls)
        analysis.set_op_handle(**probes)
        try:
            by_operator = analysis.by_operator()
            unsupported = analysis.unsupported_ops()
        except Exception as exc:
            raise ReferenceFailedError(f"fvcore could not trace the model: {type(exc).__name__}: {one_line(exc, 200)}") from exc

    counted: list[OpCount] = []
    measured: Counter[tuple[str, str, str]] = Counter()
    for key, value in by_operator.items():
        if key.startswith(_PROBE_PREFIX):
            reason, group, name, sign = key.removeprefix(_PROBE_PREFIX).split(":")
            measured[(reason, group, name)] += round(value) * (-1 if sign == "-" else 1)
        else:
            counted.append(OpCount(key, round(value)))
    adjustments = [Adjustment(f"aten::{name}", value, reason, group, calls[name]) for (reason, group, name), value in measured.items()]
    return ReferenceCounts(
        reference="fvcore",
        version=getattr(fvcore, "__version__", "?"),
        counted=tuple(counted),
        adjustments=tuple(adjustments),
        unsupported=tuple(OpCount(op, 0, n) for op, n in sorted((unsupported + unmeasured).items(), key=lambda kv: -kv[1])),
    )


# --------------------------------------------------------------------------------------------------
# torch's FlopCounterMode


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _torch_probe(name: str, calls: Counter[str], measured: Counter[tuple[str, str]]) -> Callable[..., int]:
    probe = LEFT_OUT[name]

    def formula(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        shapes = [_shape(a) for a in args]
        out_shapes = [s for s in (_shape(t) for t in tree_leaves(out_val)) if s is not None]
        try:
            counts = probe.counts(shapes, out_shapes, TORCH)
        except (AssertionError, IndexError, TypeError):  # an overload with other arguments: not measured
            return 0
        calls[name] += 1
        for group, value in counts.items():
            measured[(group, name)] += value
        return sum(counts.values())

    formula._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode passes tensors, not shapes
    return formula


def _torch_probes(calls: Counter[str], measured: Counter[tuple[str, str]]) -> dict[Any, Callable[..., int]]:
    from torch.utils.flop_counter import flop_registry

    probes: dict[Any, Callable[..., int]] = {}
    for name in TORCH_LEFT_OUT:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None or packet in flop_registry:
            continue
        # an op with a CompositeImplicit kernel is decomposed by FlopCounterMode and counted in its parts
        composite = any(
            getattr(packet, overload).has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)
            for overload in packet.overloads()
        )
        if not composite:
            probes[packet] = _torch_probe(name, calls, measured)
    return probes


def count_with_torch(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ReferenceCounts:
    """torch's ``FlopCounterMode`` over one eval forward of ``model(*args, **kwargs)``, plus the probed ops."""
    from torch.utils.flop_counter import FlopCounterMode

    calls: Counter[str] = Counter()
    measured: Counter[tuple[str, str]] = Counter()
    probes = _torch_probes(calls, measured)
    with preserved_state(model), _quiet():
        model.eval()
        counter = FlopCounterMode(display=False, custom_mapping=probes)
        try:
            with torch.no_grad(), counter:
                model(*args, **kwargs)
        except Exception as exc:
            raise ReferenceFailedError(f"the model failed under FlopCounterMode: {type(exc).__name__}: {one_line(exc, 200)}") from exc
    probed = {op_name(p) for p in probes}
    counted = [
        OpCount(str(packet), int(value))
        for packet, value in counter.get_flop_counts().get("Global", {}).items()
        if str(packet) not in probed
    ]
    adjustments = [Adjustment(f"aten.{name}", value, "left_out", group, calls[name]) for (group, name), value in measured.items()]
    return ReferenceCounts(reference="torch", version=torch.__version__, counted=tuple(counted), adjustments=tuple(adjustments))


REFERENCES: dict[str, Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], ReferenceCounts]] = {
    "fvcore": count_with_fvcore,
    "torch": count_with_torch,
}
