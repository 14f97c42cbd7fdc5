"""The dry run's fallbacks as one ordered ladder, each rung reported the same way.

A profile is made by trying the cheapest way first and stepping down only where it cannot serve. There
are five rungs, in the order a profile meets them:

* ``build``: the model is built on the meta device (no weights); else on the CPU, with real weights;
* ``capture``: a graph by FX, else by Dynamo's export, else the model runs eagerly with modules as layers;
* ``tensors``: the dry run dispatches straight to the meta device's kernels; else on FakeTensors;
* ``values``: every op on FakeTensors; else the few ops whose output shapes depend on the input's index
  values run on those real values (:mod:`graphprof.run.values`);
* ``execution``: a dry run (nothing computed); else the model runs for real on the given input.

Each rung is one :class:`Fallback`: what it settled on, and each option passed over before it with the
reason. A rung that did not step down has nothing passed over. The profile keeps the list
(:attr:`graphprof.cost.result.Profile.fallbacks`, the JSON's ``fallbacks``), and the report shows the
options passed over, all in one form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphprof.base.choices import Choice

__all__ = ["Rung", "Fallback"]


class Rung(Choice):
    """A rung of the dry run's ladder, in order."""

    BUILD = "build"
    CAPTURE = "capture"
    TENSORS = "tensors"
    VALUES = "values"
    EXECUTION = "execution"


@dataclass(frozen=True)
class Fallback:
    """One rung: ``used`` is what it settled on; ``passed_over`` the options tried (or skipped) before it,
    each with why it could not serve, in order."""

    rung: Rung
    used: str
    passed_over: tuple[tuple[str, str], ...] = ()

    @property
    def stepped_down(self) -> bool:
        return bool(self.passed_over)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rung": self.rung.value,
            "used": self.used,
            "passed_over": [{"option": option, "reason": reason} for option, reason in self.passed_over],
        }
