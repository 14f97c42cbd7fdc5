"""Seed 004's ``ScalingExperiment`` over graphprof's sweeps: several sweeps of one model factory.

At the edge (:mod:`graphprof.compat`): the core's sweep is :func:`graphprof.sweep`, which returns a
:class:`~graphprof.scaling.result.Sweep` and prints nothing. This class keeps several sweeps by name and,
as the seed's does, prints them in ``print_summary()`` (with Rich, through the sweep renderer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import SweepAxis
from graphprof.devices.hardware import Hardware
from graphprof.scaling.axis import FACTORY_LAYERS_KEY
from graphprof.scaling.loop import sweep
from graphprof.scaling.result import Sweep

__all__ = ["ScalingExperiment", "print_sweep"]


class ScalingExperiment:
    """The seed framework's scaling experiment over ``model_factory(**kwargs)``, on graphprof's sweeps.

    ``run(name, values)`` sweeps ``name``: an axis (``batch``, ``resolution``, ``seq-len``) or a keyword
    of the factory; ``run_layer_scaling(values)`` sweeps ``num_layers``; ``print_summary()`` hands every
    sweep run so far to ``printer`` (:func:`print_sweep`, a Rich table per sweep, unless another is
    given). ``device`` is where ``measure=True`` runs.

    >>> exp = ScalingExperiment(make_model, "cpu", input_shape=(1, 16))   # doctest: +SKIP
    >>> exp.run("hidden_dim", [64, 128]); exp.run_layer_scaling([2, 4]); exp.print_summary()  # doctest: +SKIP
    """

    def __init__(
        self,
        model_factory: Callable[..., nn.Module],
        device: str | torch.device | None = None,
        *,
        input_shape: Sequence[int] | str | None = None,
        example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
        example_kwargs: dict[str, Any] | None = None,
        hardware: Hardware | str | None = None,
        measure: bool = False,
        printer: Callable[[Sweep], None] | None = None,
    ) -> None:
        self.model_factory = model_factory
        self.printer = printer
        self.device = None if device is None else str(device)
        self.options: dict[str, Any] = {
            "input_shape": input_shape, "example_inputs": example_inputs, "example_kwargs": example_kwargs,
            "hardware": hardware, "measure": measure, "device": self.device,
        }  # fmt: skip
        self.results: dict[str, Sweep] = {}

    def run(self, name: str, values: Sequence[float]) -> Sweep:
        """Sweep ``name`` (an axis, or a factory keyword) over ``values``; kept under ``results[name]``."""
        axis_names = {a.value for a in (SweepAxis.BATCH, SweepAxis.RESOLUTION, SweepAxis.SEQ_LEN)}
        normalised = name.replace("_", "-")
        if normalised in axis_names:
            result = sweep(self.model_factory, normalised, values, **self.options)
        else:
            result = sweep(self.model_factory, SweepAxis.SET, values, key=name, **self.options)
        self.results[name] = result
        return result

    def run_layer_scaling(self, values: Sequence[int] = (2, 4, 6, 8, 12, 16)) -> Sweep:
        """Sweep the factory's ``num_layers`` (the seed's default depths)."""
        return self.run(FACTORY_LAYERS_KEY, values)

    def print_summary(self) -> None:
        """Hand each sweep run so far to the printer (by default its table and growth fits, with Rich)."""
        for result in self.results.values():
            (self.printer or print_sweep)(result)


def print_sweep(result: Sweep) -> None:
    """Print one sweep's table and growth fits to standard output with Rich."""
    from rich.console import Console

    from graphprof.render.sweep import render_sweep

    Console().print(render_sweep(result))
