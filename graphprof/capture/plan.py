"""The order in which a session tries the capture methods, and what became of each.

A capture is only as good as its first run: a graph that captures but cannot be run (a traced constant
the code mutates, say) must give way to the next method. :class:`CapturePlan` owns that order and the
attempts; the session hands it a ``run`` function (one run of a captured graph with the session's
observers) and gets back the first graph that ran, with that run's result.

The default order (``--capture auto``, :data:`~graphprof.capture.methods.METHODS`) is walked in two
rounds where symbolic tracing fails:

1. FX, then the **eager trial**: the eager capture, tried *before* Dynamo and kept a dry run. When every
   op that costs anything ran inside a leaf module, Dynamo's graph would hold the same ops under the same
   layers, and its export (a second or more) would add nothing; the trial is the answer.
2. Dynamo, then eager for real: taken when the trial needs real values (a data-dependent shape: Dynamo's
   graph, run for real, frees its values as it goes) or when arithmetic ran outside leaf modules
   (Dynamo's graph gives it layers of its own). A family whose layers always compute in containers
   (:attr:`graphprof.models.family.Family.no_eager_trial`: PyG's message passing) starts here.

A forced order (``--capture dynamo``, ``methods=[...]``) is walked once, each method given way to the next
when its graph does not run.

>>> import torch, torchvision
>>> m = torchvision.models.resnet18().eval()
>>> plan = CapturePlan.for_model(m, "classification", METHODS)
>>> captured, _ = plan.capture(m, (torch.randn(1, 3, 224, 224),), {}, lambda graph, real_ok: None, lambda _: True)
>>> captured.method, plan.attempts
(<Method.FX: 'fx.symbolic_trace'>, [])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from torch import nn

from graphprof.base.choices import Method
from graphprof.capture.methods import METHODS, NOT_TRIED, CapturedGraph, capture_graph, dynamo_skip_reason, family_of
from graphprof.errors import CaptureError, DataDependentError, ShapePropagationError, one_line

__all__ = ["CapturePlan", "Attempt", "DYNAMO_ADDS_NOTHING"]

T = TypeVar("T")

#: ``(method, what became of it)``: an error, or ``"not tried: <why>"``.
Attempt = tuple[str, str]

#: Why ``auto`` took the eager capture without trying Dynamo.
DYNAMO_ADDS_NOTHING = "the eager capture puts every op that costs anything in a leaf module, so Dynamo's graph would add nothing"


@dataclass
class _Ran(Generic[T]):
    graph: CapturedGraph
    result: T


@dataclass
class CapturePlan:
    """The methods still to try (in order), whether the next eager capture is the trial, and the attempts.

    Build it with :meth:`for_model`; :meth:`capture` walks it once.
    """

    methods: tuple[Method, ...]
    trial: bool
    attempts: list[Attempt] = field(default_factory=list)
    #: a Dynamo export specialised to these inputs' sizes (see :attr:`CapturedGraph.static_shapes`)
    static_shapes: bool = False
    #: ``("capture" | "propagate", seconds)`` of each step, in order
    timings: list[tuple[str, float]] = field(default_factory=list)

    @classmethod
    def for_model(cls, model: nn.Module, family: str, methods: tuple[Method, ...], *, static_shapes: bool = False) -> CapturePlan:
        """The plan for ``model`` of ``family`` with ``methods`` (the default order, or a forced one);
        ``static_shapes`` for a Dynamo export specialised to the inputs' sizes."""
        from graphprof.models.registry import family_traits

        owner = family_of(model, family)
        skipped = dynamo_skip_reason(owner, methods)
        attempts: list[Attempt] = [(Method.DYNAMO.value, f"{NOT_TRIED}: {skipped}")] if skipped else []
        left = tuple(m for m in methods if not (skipped and m is Method.DYNAMO))
        trial = left == METHODS and family_traits(owner).no_eager_trial is None
        return cls(left, trial=trial, attempts=attempts, static_shapes=static_shapes)

    def capture(
        self,
        model: nn.Module,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run: Callable[[CapturedGraph, bool], T],
        leaves_only: Callable[[T], bool],
    ) -> tuple[CapturedGraph, T]:
        """The first captured graph that runs, and its run's result.

        ``run(graph, real_ok)`` runs a graph once (``real_ok=False``: the eager trial stays a dry run) and
        raises :class:`~graphprof.errors.ShapePropagationError` when it cannot; ``leaves_only(result)``
        says whether every costly op ran in a leaf module. Raises the last method's error when none runs,
        and a :class:`~graphprof.errors.DataDependentError` outside the trial at once.
        """
        for methods in self._rounds():
            captured = capture_graph(model, args, kwargs, methods=methods, static_shapes=self.static_shapes)
            self.timings.append(("capture", captured.seconds))
            ran = self._try(captured, run, leaves_only)
            if ran is not None:
                return ran.graph, ran.result
        raise CaptureError("no capture method is left to try")  # pragma: no cover  (each round removes one)

    def _rounds(self) -> Iterator[tuple[Method, ...]]:
        """The methods of each call to :func:`capture_graph`: while the trial is on, all but Dynamo."""
        while self.methods:
            yield tuple(m for m in self.methods if m is not Method.DYNAMO) if self.trial else self.methods

    def _try(self, captured: CapturedGraph, run: Callable[[CapturedGraph, bool], T], leaves_only: Callable[[T], bool]) -> _Ran[T] | None:
        """Run one captured graph; its result, or ``None`` after moving the plan on to the next round."""
        trial = self.trial and captured.method is Method.EAGER
        start = time.perf_counter()
        try:
            result = run(captured, not trial)
        except ShapePropagationError as exc:
            self._failed(captured, exc, trial)
            return None
        if trial and not leaves_only(result):
            self._end_trial(captured)  # arithmetic outside leaf modules: Dynamo's graph gives it layers
            return None
        self.timings.append(("propagate", time.perf_counter() - start))
        attempts = [*self.attempts, *captured.attempts]
        if trial and Method.DYNAMO in self.methods:
            attempts.append((Method.DYNAMO.value, f"{NOT_TRIED}: {DYNAMO_ADDS_NOTHING}"))
        captured.attempts = sorted(attempts, key=_order)
        return _Ran(captured, result)

    def _failed(self, captured: CapturedGraph, exc: ShapePropagationError, trial: bool) -> None:
        """A captured graph that did not run: the trial gives way to Dynamo on data-dependent shapes; any
        other method to the next one, with the reason kept. Raises when nothing is left to try."""
        if trial and isinstance(exc, DataDependentError):
            self._end_trial(captured)
            return
        later = self.methods[self.methods.index(captured.method) + 1 :]
        if isinstance(exc, DataDependentError) or not later:
            raise exc
        self.attempts += [*captured.attempts, (captured.method.value, f"captured, but shape propagation failed: {one_line(exc)}")]
        self.methods, self.trial = later, False

    def _end_trial(self, captured: CapturedGraph) -> None:
        """Back to the default order without the trial: Dynamo next (FX has already failed), then eager."""
        self.attempts += [a for a in captured.attempts if a[0] != Method.EAGER]
        self.methods = tuple(m for m in self.methods if m is not Method.FX)
        self.trial = False


def _order(attempt: Attempt) -> int:
    """Attempts in the order of :data:`METHODS` (an unknown name last)."""
    names = [m.value for m in METHODS]
    return names.index(attempt[0]) if attempt[0] in names else len(names)
