"""The one result type every renderer consumes: :class:`Profile` and its rows.

Everything here is a frozen dataclass holding plain integers, strings and tuples. The library returns
exact integers (MACs, FLOPs, bytes); renderers scale and format them and never change a ``Profile``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from graphprof.base.choices import Execution, Lowering, Method, Mode, OpStatus, Phase
from graphprof.base.display import NotebookDisplay
from graphprof.base.inputs import InputSpec
from graphprof.base.ladder import Fallback
from graphprof.cost.bounds import Roofline
from graphprof.cost.tokens import TOKEN_INPUTS, TokenFlops, token_flops
from graphprof.formulas import Cost
from graphprof.schemas import SCHEMA_VERSIONS

__all__ = ["SCHEMA_VERSION", "OpRecord", "LayerRow", "ModuleRow", "UnsupportedOp", "Profile", "cost_dict"]

#: Version of the dictionary layout produced by :meth:`Profile.to_dict` (and so of the JSON file).
#: 2.2 (additive): ``timestamp`` and ``host`` in every file, a dry run's too; ``host.threads`` and
#: ``host.loadavg``; ``runtime.forward_cv`` and ``runtime.noisy``; each layer's ``intensity_band``.
SCHEMA_VERSION = SCHEMA_VERSIONS["profile"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class OpRecord:
    """One aten call seen while the graph ran.

    ``status`` is ``"counted"``, ``"zero_cost"`` or ``"unsupported"``; an unsupported op's cost is zero
    *and* it is listed by name in :attr:`Profile.unsupported`, so nothing is silently zero.
    """

    op: str
    status: OpStatus
    phase: Phase
    cost: Cost
    input_shapes: tuple[Shape, ...] = ()
    output_shapes: tuple[Shape, ...] = ()
    #: share of ``cost.flops`` the kernel really executes (below 1 for causal attention, which skips
    #: masked tiles); used by the predicted time and :attr:`Profile.executed_flops`, never by the counts
    work_fraction: float = 1.0
    #: share of ``cost.flops`` that is useful work (the unmasked scores of causal attention, else 1):
    #: :attr:`Profile.useful_flops`
    useful_fraction: float = 1.0
    #: the calls a fused CPU kernel makes inside itself, each costed by its own formula (:mod:`graphprof.cost.parts`):
    #: what the predictor prices it by; empty for every other call
    parts: tuple[OpRecord, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        inner = {"parts": [p.to_dict() for p in self.parts]} if self.parts else {}
        return {
            "op": self.op,
            "status": self.status,
            "phase": self.phase,
            **cost_dict(self.cost),
            "work_fraction": self.work_fraction,
            "useful_fraction": self.useful_fraction,
            "input_shapes": [list(s) for s in self.input_shapes],
            "output_shapes": [list(s) for s in self.output_shapes],
            **inner,
        }


@dataclass(frozen=True)
class LayerRow:
    """One node of the captured graph (a leaf module call, a function call or a method call).

    ``name`` is the readable (abbreviated) name, ``node`` the graph node's own name and ``module`` the
    dotted path of the innermost ``nn.Module`` the node belongs to (``None`` at top level).
    ``params`` counts the parameters this node is the first to use, so rows sum to the model's count of
    parameters reached by the graph.
    """

    name: str
    node: str
    module: str | None
    type: str
    params: int
    output_shapes: tuple[Shape, ...]
    forward: Cost
    backward: Cost
    ops: tuple[OpRecord, ...] = field(default=(), repr=False)
    #: bytes this node saves for backward (train mode; 0 in eval): the activation memory a training
    #: step holds for it until its backward (:mod:`graphprof.run.observers.saved`)
    saved_bytes: int = 0

    @cached_property
    def cost(self) -> Cost:
        """Forward plus backward cost of this node (computed once: renderers ask for it often)."""
        return self.forward + self.backward

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "module": self.module,
            "type": self.type,
            "params": self.params,
            "output_shapes": [list(s) for s in self.output_shapes],
            **cost_dict(self.cost),
            "forward": cost_dict(self.forward),
            "backward": cost_dict(self.backward),
            "saved_bytes": self.saved_bytes,
            "ops": [op.to_dict() for op in self.ops],
        }


@dataclass(frozen=True)
class ModuleRow:
    """One module of the model's tree with the summed cost of every graph node inside it.

    ``path`` is ``""`` for the model itself. ``params`` is the module's own recursive parameter count
    (``sum(p.numel() for p in module.parameters())``).
    """

    path: str
    type: str
    depth: int
    params: int
    forward: Cost
    backward: Cost
    nodes: int

    @cached_property
    def cost(self) -> Cost:
        return self.forward + self.backward

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "type": self.type,
            "depth": self.depth,
            "params": self.params,
            "nodes": self.nodes,
            **cost_dict(self.cost),
        }


@dataclass(frozen=True)
class UnsupportedOp:
    """An aten op with no cost formula, with how often it ran and where."""

    op: str
    count: int
    layers: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "count": self.count, "layers": list(self.layers)}


@dataclass(frozen=True)
class Profile(NotebookDisplay):
    """What a model costs: the result of :func:`graphprof.profile_model`.

    Totals are exact sums of the rows: ``total_flops == sum(row.cost.flops for row in layers)``.
    """

    model_name: str
    family: str
    mode: Mode
    dtype: str
    inputs: tuple[InputSpec, ...]
    capture_method: Method
    capture_attempts: tuple[tuple[str, str], ...]
    capture_reused: bool
    execution: Execution
    execution_note: str
    layers: tuple[LayerRow, ...]
    modules: tuple[ModuleRow, ...]
    total_params: int
    trainable_params: int
    param_bytes: int
    buffer_bytes: int
    graph_params: int
    input_bytes: int
    output_bytes: int
    peak_activation_bytes: int
    num_subgraphs: int
    unsupported: tuple[UnsupportedOp, ...]
    notes: tuple[str, ...]
    versions: tuple[tuple[str, str], ...]
    timings: tuple[tuple[str, float], ...] = ()
    #: how ops were lowered for costing: ``"cpu"`` (the decomposition the profiling machine runs) or
    #: ``"cuda"`` (fused attention kernels, as a GPU runs them; see :mod:`graphprof.run.lowering`)
    lowering: Lowering = Lowering.CPU
    #: the layer running when the activation peak was reached (``None`` for an empty run)
    peak_activation_layer: str | None = None
    #: the dry run's ladder, rung by rung (:mod:`graphprof.base.ladder`): where the model was built, how it
    #: was captured, on which tensors it ran, which ops ran on real values, dry or real; each with the
    #: options passed over and why
    fallbacks: tuple[Fallback, ...] = ()
    #: Every layer classified (:func:`graphprof.cost.roofline.classify`): against the fixed threshold as
    #: :func:`graphprof.profile_model` returns it, against a device after
    #: :func:`graphprof.cost.roofline.with_roofline`. Renderers read it; none classifies again.
    roofline: Roofline | None = field(default=None, compare=False, repr=False)
    #: A real run beside the estimate (``graphprof.measure.Measurement``), when one was taken.
    measurement: Any = None
    #: fvcore's (or FlopCounterMode's) count of the same model and input beside graphprof's
    #: (``graphprof.crosscheck.CrossCheck``), when asked for (``--fvcore``).
    crosscheck: Any = None
    #: When the profile was made (UTC, ISO 8601 to the second) and on what machine
    #: (``graphprof.measure.Host``): in every JSON file, so that a dry run's figures say where they came from.
    created: str = field(default_factory=lambda: _utc_now(), compare=False)
    host: Any = field(default_factory=lambda: _this_host(), compare=False, repr=False)
    #: An eval forward's allocation order from the dry run (:class:`graphprof.run.observers.allocations.Step`, op by
    #: op), what the CPU's heap replay prices page faults by (:func:`graphprof.devices.heapreplay.forward_touch`);
    #: not in the JSON: a profile read back prices them by the calibration's share law.
    allocations: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    # ---- totals (sums of the rows, computed once: renderers ask for them often) ---------------
    @cached_property
    def forward(self) -> Cost:
        return sum((row.forward for row in self.layers), Cost())

    @cached_property
    def backward(self) -> Cost:
        return sum((row.backward for row in self.layers), Cost())

    @cached_property
    def total(self) -> Cost:
        return self.forward + self.backward

    @property
    def total_macs(self) -> int:
        return self.total.macs

    @property
    def total_flops(self) -> int:
        return self.total.flops

    @property
    def saved_activation_bytes(self) -> int:
        """Bytes saved for backward over all layers (train mode; 0 in eval): the activation part of a
        training step's peak."""
        return sum(row.saved_bytes for row in self.layers)

    @cached_property
    def executed_flops(self) -> int:
        """FLOPs the kernels execute: :attr:`total_flops` less the tiles a causal attention kernel skips
        (``op.work_fraction``). Equal to :attr:`total_flops` where no attention is causal."""
        return round(sum(op.cost.flops * op.work_fraction for row in self.layers for op in row.ops))

    @cached_property
    def useful_flops(self) -> int:
        """FLOPs of useful work: :attr:`total_flops` less the masked scores of causal attention
        (``op.useful_fraction``: the unmasked half of the square, plus the diagonal)."""
        return round(sum(op.cost.flops * op.useful_fraction for row in self.layers for op in row.ops))

    @cached_property
    def per_token(self) -> TokenFlops | None:
        """Model FLOPs per token beside the executed and counted ones (:mod:`graphprof.cost.tokens`), for a
        model that takes tokens; ``None`` otherwise."""
        if not any(spec.name in TOKEN_INPUTS for spec in self.inputs):
            return None
        return token_flops(self)

    @property
    def total_bytes(self) -> int:
        """Bytes read plus bytes written by every op (the ``memory`` of seed 002)."""
        return self.total.bytes_moved

    @property
    def arithmetic_intensity(self) -> float | None:
        return self.total.arithmetic_intensity

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The shape of every input tensor, in call order."""
        return tuple(i.shape for i in self.inputs)

    def iter_ops(self) -> Iterator[tuple[LayerRow, OpRecord]]:
        for row in self.layers:
            for op in row.ops:
                yield row, op

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary; ``schema_version`` names its layout."""
        return {
            "kind": "profile",
            "schema_version": SCHEMA_VERSION,
            "model": self.model_name,
            "family": self.family,
            "mode": self.mode,
            "dtype": self.dtype,
            "inputs": [i.to_dict() for i in self.inputs],
            "input_shapes": [list(s) for s in self.input_shapes],
            "capture_method": self.capture_method,
            "capture_reused": self.capture_reused,
            "capture_attempts": [{"method": m, "error": e} for m, e in self.capture_attempts],
            "execution": self.execution,
            "execution_note": self.execution_note,
            "fallbacks": [f.to_dict() for f in self.fallbacks],
            "lowering": self.lowering,
            "total_params": self.total_params,
            "trainable_params": self.trainable_params,
            "graph_params": self.graph_params,
            "param_bytes": self.param_bytes,
            "buffer_bytes": self.buffer_bytes,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "peak_activation_bytes": self.peak_activation_bytes,
            "peak_activation_layer": self.peak_activation_layer,
            "saved_activation_bytes": self.saved_activation_bytes,
            "num_subgraphs": self.num_subgraphs,
            "total_macs": self.total_macs,
            "total_flops": self.total_flops,
            "executed_flops": self.executed_flops,
            "useful_flops": self.useful_flops,
            "total_memory": self.total_bytes,
            "total_bytes_read": self.total.bytes_read,
            "total_bytes_written": self.total.bytes_written,
            "arithmetic_intensity": self.arithmetic_intensity,
            "forward": cost_dict(self.forward),
            "backward": cost_dict(self.backward),
            "unsupported_ops": [u.to_dict() for u in self.unsupported],
            "notes": list(self.notes),
            "versions": dict(self.versions),
            "timings_s": dict(self.timings),
            "layers": [row.to_dict() for row in self.layers],
            "modules": [m.to_dict() for m in self.modules],
            **({"per_token": self.per_token.to_dict()} if self.per_token is not None else {}),
            **self._measured_dict(),
            **({"crosscheck": self.crosscheck.to_dict()} if self.crosscheck is not None else {}),
        }

    def estimated_memory(self) -> dict[str, int]:
        """graphprof's own estimate beside a measured peak, in bytes: parameters, buffers and peak activations;
        in a measured training step also gradients (one per trainable parameter) and the optimizer's state
        (:data:`graphprof.base.choices.OPTIMIZER_STATE_TENSORS` per trainable parameter)."""
        estimated = {
            "param_bytes": self.param_bytes,
            "buffer_bytes": self.buffer_bytes,
            "peak_activation_bytes": self.peak_activation_bytes,
        }
        optimizer = self.measurement.optimizer if self.measurement is not None else None
        if optimizer is not None and self.total_params:
            from graphprof.base.choices import OPTIMIZER_STATE_TENSORS

            trainable = self.param_bytes * self.trainable_params // self.total_params  # at the profile's dtype
            estimated["gradient_bytes"] = trainable
            estimated["optimizer_state_bytes"] = trainable * OPTIMIZER_STATE_TENSORS[optimizer]
        return estimated

    def _measured_dict(self) -> dict[str, Any]:
        """``timestamp`` and ``host`` (the measurement's when there is one, else the profile's own), then
        ``runtime`` and ``memory`` (``measured`` beside ``estimated``) with a measurement."""
        if self.measurement is None:
            return {"timestamp": self.created, "host": None if self.host is None else self.host.to_dict()}
        m = self.measurement.to_dict()
        estimated = self.estimated_memory()
        return {
            "timestamp": m["timestamp"],
            "host": m["host"],
            "runtime": {
                **m["runtime"],
                "device": m["device"],
                "dtype": m["dtype"],
                "mode": m["mode"],
                "inputs": m["inputs"],
                "traces": m["traces"],
                "notes": m["notes"],
            },
            "memory": {"measured": m["memory"], "estimated": estimated},
        }


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _this_host() -> Any:
    """This machine (``graphprof.devices.local.Host``, CPU fields), read when a profile is made."""
    from graphprof.devices.local import detect_host

    return detect_host("cpu")


def cost_dict(cost: Cost, *, bytes_key: str = "memory") -> dict[str, Any]:
    """A cost's counts for JSON: MACs, FLOPs, bytes read and written, bytes moved (under ``bytes_key``:
    ``memory`` in a profile, as the seeds name it) and arithmetic intensity."""
    return {
        "macs": cost.macs,
        "flops": cost.flops,
        "bytes_read": cost.bytes_read,
        "bytes_written": cost.bytes_written,
        bytes_key: cost.bytes_moved,
        "arithmetic_intensity": cost.arithmetic_intensity,
    }
