"""Scaling sweeps (:func:`graphprof.sweep`): one model profiled along one axis (batch, resolution, sequence length, depth, a factory keyword).

A sweep is built on :func:`graphprof.prepare`: the model is resolved, warmed up and captured once, and
each point is one :meth:`PreparedModel.profile` (a dry run on the same capture). Only the ``layers``
axis and a factory keyword (``set``) change the model itself, so they prepare once per point.

Each point becomes a :class:`SweepRow` (params, MACs, FLOPs, bytes moved, peak activation memory, the
roofline time estimate for a hardware preset, and measured time and memory when measured). A
:class:`Sweep` fits the growth of any metric on log-log axes (:meth:`Sweep.fit`), the linear and
quadratic terms in the axis exactly (:meth:`Sweep.fit_quadratic`, for sequence length), and finds the
knee where a measured sweep stops being launch-bound (:meth:`Sweep.knee`).

>>> import graphprof
>>> s = graphprof.sweep("resnet18", "batch", [1, 2, 4])
>>> [r.macs // 1_000_000 for r in s.rows], round(s.fit("macs").exponent, 3)
([1814, 3628, 7256], 1.0)

The library never prints: progress is reported to an ``on_point`` callback.

The package, one job per file: :mod:`~graphprof.scaling.axis` (what varies, the values, the checks made
before any work), :mod:`~graphprof.scaling.factory` (a user factory's keywords),
:mod:`~graphprof.scaling.fit` (growth fits, the knee), :mod:`~graphprof.scaling.result` (rows and the
sweep) and :mod:`~graphprof.scaling.loop` (the sweep itself). Seed 004's ``ScalingExperiment`` is at the
edge, :mod:`graphprof.compat.scaling`.
"""

from __future__ import annotations

from graphprof.scaling.axis import check_sweep, parse_values
from graphprof.scaling.fit import GrowthFit, Knee, QuadraticFit, find_knee
from graphprof.scaling.loop import sweep
from graphprof.scaling.result import METRICS, Sweep, SweepRow

__all__ = ["METRICS", "SweepRow", "GrowthFit", "QuadraticFit", "Knee", "Sweep", "sweep", "check_sweep", "parse_values", "find_knee"]
