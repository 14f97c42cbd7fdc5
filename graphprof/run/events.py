"""The run loop's events: what an :class:`Observer` is told while a model runs.

Every pass that needs to see the model run (the op recorder that costs, the live-memory tracker, a
timer, an edge builder) is an :class:`Observer`. The loop (:func:`graphprof.run.loop.run_model`) knows
nothing about what observers do with the events, and an observer knows nothing about the others: every
observer sees the same events in the same order, and an :class:`OpEvent` is frozen, so the order of the
observers does not matter. The events:

* :meth:`Observer.started`: the run's tensors are ready (:class:`RunContext`: inputs, parameters and
  buffers as this run sees them, the layers known up front);
* :meth:`Observer.layer_entered` / :meth:`Observer.layer_left`: a layer (a graph node, or a module in
  the eager capture) starts and ends, with its output; where the layer is a module (the eager capture,
  a training step), :meth:`Observer.layer_inputs` follows each entry with what it was called with;
* :meth:`Observer.op`: an aten call ran (:class:`OpEvent`: the call, its outputs, the layer it
  belongs to, and for each input tensor the op or graph input that produced it). In backward, the
  layer is the forward layer whose autograd node runs: the loop attributes it before any observer
  sees the event;
* :meth:`Observer.saved`: in train mode, autograd saves a tensor for the backward (through
  ``torch.autograd.graph.saved_tensors_hooks``), with the layer running when it does;
* :meth:`Observer.phase_started`: ``"forward"``, then ``"backward"`` in train mode, then ``"optimizer"``
  in a training step (:func:`graphprof.run.step.run_step`);
* :meth:`Observer.finished`: the model's outputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Phase

__all__ = ["Layer", "Producer", "OpEvent", "RunContext", "RunOutcome", "Observer"]


@dataclass(eq=False)
class Layer:
    """What ops are attributed to: a graph node, or a module in the eager capture.

    ``name`` is readable and unique in the run, ``node`` the graph node's own name, ``module`` the
    dotted path of the innermost ``nn.Module`` it belongs to (``None`` at top level), ``params`` the
    parameters it uses directly.
    """

    name: str
    node: str
    module: str | None
    type: str
    params: list[torch.Tensor] = field(default_factory=list)


@dataclass(frozen=True)
class Producer:
    """Where a tensor came from: ``kind`` is ``"input"`` (``index``: position among the flat inputs),
    ``"state"`` (``name``: a parameter or buffer) or ``"op"`` (``index``: the :class:`OpEvent` index)."""

    kind: str
    index: int = -1
    name: str = ""


@dataclass(frozen=True, eq=False)
class OpEvent:
    """One aten call. ``args``/``kwargs``/``out`` hold the run's tensors (fake on a dry run).

    ``producers`` has one entry per tensor among ``(args, kwargs)`` in pytree order (``None`` for a
    tensor made outside the run, such as a constant); it is empty unless an observer asked for it.
    ``layer`` is the layer running; in backward it is the forward layer whose autograd node runs
    (attributed by the loop before any observer sees the event), else ``None``. The event is frozen:
    every observer sees the same one.
    """

    index: int
    func: torch._ops.OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any
    phase: Phase
    layer: Layer | None
    producers: tuple[Producer | None, ...] = ()


@dataclass
class RunContext:
    """What observers may read when the run starts and while it runs."""

    model: nn.Module
    #: the captured graph that runs, or ``None`` when the model itself runs (the eager capture)
    graph_module: torch.fx.GraphModule | None
    fake: bool
    train: bool
    inputs: tuple[tuple[Any, ...], dict[str, Any]]
    state: dict[str, torch.Tensor]
    layers: dict[str, Layer]
    #: a training step's optimizer, its state already made (:func:`graphprof.run.step.run_step`), else ``None``
    optimizer: torch.optim.Optimizer | None = None
    #: a context in which the ops an observer itself causes (reading what autograd saved, say) are not
    #: events: every observer sees the run's own ops only
    unobserved: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


@dataclass
class RunOutcome:
    """The run's outputs (fake on a dry run) and its layers in execution order."""

    outputs: Any
    layers: list[Layer]
    input_bytes: int
    output_bytes: int
    #: ops whose outputs' shapes were computed from the input's real values (:mod:`graphprof.run.values`), with counts
    real_ops: tuple[tuple[str, int], ...] = ()
    #: of those, the ops whose real output was empty (every layer after them counts no work), with counts
    empty_ops: tuple[tuple[str, int], ...] = ()
    #: a dry run dispatched straight to the meta device's kernels (model and inputs all on meta), not on FakeTensors
    on_meta: bool = False


class Observer:
    """Base class: every event is a no-op. Override what you need.

    Set ``wants_ops`` to receive :meth:`op` events, ``wants_saved`` to receive :meth:`saved` events (train
    mode) and ``wants_producers`` to have :attr:`OpEvent.producers` filled.
    """

    wants_ops: bool = False
    wants_saved: bool = False
    wants_producers: bool = False

    def started(self, ctx: RunContext) -> None:
        """The run's tensors are ready; nothing has run yet."""

    def phase_started(self, phase: Phase) -> None:
        """``"forward"`` at the start; ``"backward"`` when the backward pass starts (train mode)."""

    def layer_entered(self, layer: Layer) -> None:
        """``layer`` starts (in the eager capture, layers nest as modules do)."""

    def layer_inputs(self, layer: Layer, inputs: Any) -> None:
        """``layer``, a module just entered, was called with ``inputs`` (its positional arguments)."""

    def layer_left(self, layer: Layer, output: Any) -> None:
        """``layer`` returned ``output``."""

    def op(self, event: OpEvent) -> None:
        """An aten call ran (only with ``wants_ops``)."""

    def saved(self, layer: Layer | None, tensor: torch.Tensor) -> None:
        """Autograd saved ``tensor`` for the backward while ``layer`` ran (train mode, only with ``wants_saved``).
        The tensor is the run's own (fake on a dry run); an observer must not keep it beyond the run."""

    def finished(self, outputs: Any) -> None:
        """The forward (and, in train mode, the backward) pass is over."""
