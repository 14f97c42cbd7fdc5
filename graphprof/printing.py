"""The seeds' APIs that are documented to print, bound to graphprof's Rich renderers.

The rest of the library never prints: it returns results, and renderers (:mod:`graphprof.render`) are
pure functions of them. A seed user's code expects a few calls to print (seed 004's
``ScalingExperiment.print_summary()``); this module is where that happens, above both the library and
the renderers, so neither imports the other.
"""

from __future__ import annotations

from typing import Any

from graphprof.render.sweep import render_sweep
from graphprof.scaling.experiment import ScalingExperiment as _ScalingExperiment
from graphprof.scaling.result import Sweep

__all__ = ["ScalingExperiment", "print_sweep"]


def print_sweep(result: Sweep) -> None:
    """Print one sweep's table and growth fits to standard output with Rich."""
    from rich.console import Console

    Console().print(render_sweep(result))


class ScalingExperiment(_ScalingExperiment):
    """Seed 004's scaling experiment (:class:`graphprof.scaling.experiment.ScalingExperiment`) whose
    ``print_summary()`` prints each sweep with Rich, as the seed's does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("printer", print_sweep)
        super().__init__(*args, **kwargs)
