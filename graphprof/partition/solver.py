"""The exact planner: contiguous stages over units, one device each, by dynamic programming.

A plan cuts units ``0 .. L-1`` into stages ``[s_0, s_1), [s_1, s_2), ...`` and gives each stage its own
device (some devices may stay idle). A stage's time, for one micro-batch, is what it receives plus what
it computes::

    stage(i, j, k | previous kind p) = link_p->k(cut_bytes[i]) + sum(seconds[k][i:j])    (no link for i = 0)
    link(bytes)                      = latency + bytes / bandwidth

and a stage fits its device when ``weights + KV cache of [i, j) + max activation in [i, j) +
cut_bytes[i] + cut_bytes[j] <= memory``. A weight several units share (tied: an LM head reusing the input
embedding) is counted in the first of them; a stage that uses it and does not hold that first unit keeps a
copy of its own (as ``torch.distributed.pipelining`` builds its stages), so its weights include that copy
(:func:`holds_copy`). Objectives:

* ``latency``: one request through every stage, the sum of stage times (EdgeShard's first program);
* ``throughput``: pipelined micro-batches, whose rate is set by the slowest stage: minimise the maximum
  stage time (EdgeShard's second program, PipeDream's), then, among plans with that bottleneck, the sum
  (a second exact pass with every stage capped at the bottleneck).

**Why the program is exact and small.** Devices of one kind are interchangeable (their figures and links
are per kind), so a state is ``(units placed i, devices used per kind, kind of the last stage)`` rather
than a set of devices: the best value of a state is the best over its predecessors extended by one
stage, for a sum and for a maximum alike (both are monotone in each stage's time). The state count is
``L x prod(count_k + 1) x K``; each state tries ``K x L`` next stages.

>>> p = Problem(seconds=((1.0, 1.0, 1.0, 1.0),), weight_bytes=(1, 1, 1, 1), activation_bytes=(0, 0, 0, 0),
...             cut_bytes=(0, 0, 0, 0, 0), memory=(2,), count=(2,), bandwidth=((1.0,),), latency=((0.0,),))
>>> solve(p, "throughput").stages                     # two devices of 2 bytes: two units each
((0, 2, 0), (2, 4, 0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from graphprof.base.choices import Objective
from graphprof.errors import InvalidInputError

__all__ = ["MAX_WORK", "problem_work", "holds_copy", "Problem", "Solution", "solve", "evaluate", "Infeasible"]

_EPS = 1e-12
#: The most stage choices one solve may weigh (a few seconds of pure Python); beyond, refused up front.
MAX_WORK = 10**8


def holds_copy(units: Sequence[int], i: int, j: int) -> bool:
    """Whether stage ``[i, j)`` keeps its own copy of a weight shared by ``units`` (ascending; counted in
    the first): it uses the weight and an earlier stage holds the first of them.

    >>> holds_copy((0, 5), 3, 6), holds_copy((0, 5), 0, 6), holds_copy((0, 5), 1, 5)
    (True, False, False)
    """
    return units[0] < i and any(i <= u < j for u in units)


@dataclass(frozen=True)
class Problem:
    """Everything the program needs, as plain numbers (kinds are indices into ``count``/``memory``).

    ``weight_bytes`` includes the KV cache; ``bandwidth`` is bytes/s and ``latency`` seconds, per kind pair;
    ``shared`` holds each weight several units share, as ``(its units ascending, its bytes)``.
    """

    seconds: tuple[tuple[float, ...], ...]
    weight_bytes: tuple[int, ...]
    activation_bytes: tuple[int, ...]
    cut_bytes: tuple[int, ...]
    memory: tuple[int, ...]
    count: tuple[int, ...]
    bandwidth: tuple[tuple[float, ...], ...]
    latency: tuple[tuple[float, ...], ...]
    shared: tuple[tuple[tuple[int, ...], int], ...] = ()

    @property
    def units(self) -> int:
        return len(self.weight_bytes)

    def link_seconds(self, src: int, dst: int, cut: int) -> float:
        """Time to move the activations at ``cut`` from kind ``src`` to kind ``dst`` (none before the first stage)."""
        if src < 0 or cut == 0:
            return 0.0
        return self.latency[src][dst] + self.cut_bytes[cut] / self.bandwidth[src][dst]

    def copy_bytes(self, i: int, j: int) -> int:
        """Bytes of the shared weights stage ``[i, j)`` keeps a copy of (:func:`holds_copy`)."""
        return sum(size for units, size in self.shared if holds_copy(units, i, j))

    def stage_memory(self, i: int, j: int) -> int:
        weights = sum(self.weight_bytes[i:j]) + self.copy_bytes(i, j)
        return weights + max(self.activation_bytes[i:j]) + self.cut_bytes[i] + self.cut_bytes[j]

    def stage_seconds(self, i: int, j: int, kind: int, previous: int) -> float:
        return self.link_seconds(previous, kind, i) + sum(self.seconds[kind][i:j])


@dataclass(frozen=True)
class Solution:
    """``stages`` as ``(start, end, kind)``; ``latency`` the sum of stage times, ``bottleneck`` the largest."""

    stages: tuple[tuple[int, int, int], ...]
    latency: float
    bottleneck: float


class Infeasible(InvalidInputError):
    """No plan fits the devices' memory; the message names the unit and the device kind that fails."""


def evaluate(problem: Problem, stages: Sequence[tuple[int, int, int]]) -> Solution:
    """The latency and bottleneck of given stages (memory is not checked: baselines are evaluated as given)."""
    times, previous = [], -1
    for i, j, k in stages:
        times.append(problem.stage_seconds(i, j, k, previous))
        previous = k
    return Solution(tuple(stages), sum(times), max(times))


_State = tuple[tuple[int, ...], int]  # (devices used per kind, last kind)


def _program(problem: Problem, objective: Objective, cap: float) -> dict[int, dict[_State, tuple[float, int, _State]]]:
    """Best value of every reachable state, with its predecessor (``i`` -> state -> (value, prev i, prev state))."""
    n, kinds = problem.units, len(problem.count)
    start: _State = ((0,) * kinds, -1)
    best: dict[int, dict[_State, tuple[float, int, _State]]] = {i: {} for i in range(n + 1)}
    best[0][start] = (0.0, -1, start)
    for i in range(n):
        for state, (value, _, _) in best[i].items():
            used, last = state
            for k in range(kinds):
                if used[k] >= problem.count[k]:
                    continue
                link = problem.link_seconds(last, k, i)
                nxt: _State = (used[:k] + (used[k] + 1,) + used[k + 1 :], k)
                compute, weights, act = 0.0, 0, 0
                for j in range(i + 1, n + 1):
                    compute += problem.seconds[k][j - 1]
                    weights += problem.weight_bytes[j - 1]
                    act = max(act, problem.activation_bytes[j - 1])
                    held = weights + act + problem.cut_bytes[i] + (problem.copy_bytes(i, j) if problem.shared else 0)
                    if held > problem.memory[k] or link + compute > cap:
                        break  # both only grow with j
                    if held + problem.cut_bytes[j] > problem.memory[k]:
                        continue
                    stage = link + compute
                    total = value + stage if objective is Objective.LATENCY else max(value, stage)
                    seen = best[j].get(nxt)
                    if seen is None or total < seen[0] - _EPS:
                        best[j][nxt] = (total, i, state)
    return best


def _walk(best: dict[int, dict[_State, tuple[float, int, _State]]], n: int) -> tuple[tuple[int, int, int], ...] | None:
    if not best[n]:
        return None
    state = min(best[n], key=lambda s: best[n][s][0])
    stages, j = [], n
    while j > 0:
        _, i, prev = best[j][state]
        stages.append((i, j, state[1]))
        j, state = i, prev
    return tuple(reversed(stages))


def _check(problem: Problem) -> None:
    if problem.units == 0:
        raise InvalidInputError("the model has no units to place")
    if not problem.count or sum(problem.count) == 0:
        raise InvalidInputError("no devices to place the model on")
    work = problem_work(problem)
    if work > MAX_WORK:
        raise InvalidInputError(
            f"the exact planner would weigh about {work:.1e} stage choices ({problem.units} units, "
            f"{len(problem.count)} device kinds of {', '.join(map(str, problem.count))}), more than {MAX_WORK:.0e}: "
            "name fewer device kinds or fewer devices of each"
        )


def problem_work(problem: Problem) -> int:
    """Stage choices the program weighs at most: ``L x prod(min(count_k, L) + 1) x K`` states, ``K x L`` each."""
    n, kinds = problem.units, len(problem.count)
    states = n * kinds * math.prod(min(c, n) + 1 for c in problem.count)
    return states * kinds * n


def solve(
    problem: Problem, objective: Objective | str = Objective.LATENCY, *, names: Sequence[str] = (), kinds: Sequence[str] = ()
) -> Solution:
    """The exact optimum (see the module docstring); :class:`Infeasible` when nothing fits.

    ``names`` (unit names) and ``kinds`` (kind names) only make the error message readable.
    """
    objective = Objective.parse(objective)
    _check(problem)
    n = problem.units
    best = _program(problem, objective, float("inf"))
    stages = _walk(best, n)
    if stages is None:
        raise Infeasible(_why(problem, best, names, kinds))
    if objective is Objective.THROUGHPUT:  # second pass: the least latency among plans with this bottleneck
        bottleneck = evaluate(problem, stages).bottleneck
        capped = _walk(_program(problem, Objective.LATENCY, bottleneck * (1 + 1e-9) + _EPS), n)
        stages = capped if capped is not None else stages
    return evaluate(problem, stages)


def _why(problem: Problem, best: dict[int, dict[_State, tuple[float, int, _State]]], names: Sequence[str], kinds: Sequence[str]) -> str:
    """One line: the first unit no device can hold, or the first unit the devices left cannot hold."""

    def unit(u: int) -> str:
        return names[u] if u < len(names) else f"unit {u}"

    def kind(k: int) -> str:
        return kinds[k] if k < len(kinds) else f"kind {k}"

    biggest = max(range(len(problem.memory)), key=lambda k: problem.memory[k])
    for u in range(problem.units):
        alone = problem.stage_memory(u, u + 1)
        if alone > problem.memory[biggest]:
            return (
                f"no plan fits: no device can hold layer {unit(u)} ({alone / 1e9:.2f} GB with its activations); "
                f"the largest, {kind(biggest)}, has {problem.memory[biggest] / 1e9:.2f} GB"
            )
    reached = max(i for i in best if best[i])
    total = sum(problem.weight_bytes) / 1e9
    room = sum(m * c for m, c in zip(problem.memory, problem.count, strict=True)) / 1e9
    return (
        f"no plan fits: after {unit(reached - 1) if reached else 'nothing'}, no device left can hold layer "
        f"{unit(reached)} (the model needs {total:.2f} GB of weights and caches, the devices have {room:.2f} GB in all)"
    )
