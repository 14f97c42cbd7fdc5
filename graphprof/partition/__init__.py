"""Split a model across devices from its costed module graph, and run the split to check it.

>>> import graphprof.partition as gp
>>> plan = gp.partition("hf:llama-3-8b", "orin-agx:2,rtx4090:1", dtype="float16")   # on the meta device
>>> plan.split_points                                                                # doctest: +SKIP

See :mod:`graphprof.partition.planner` (the passes), :mod:`~graphprof.partition.solver` (the exact
program), :mod:`~graphprof.partition.run` (``torch.distributed.pipelining`` on local processes).
"""

from __future__ import annotations

from graphprof.partition.costs import CostTable, Unit
from graphprof.partition.devices import Device, Links, parse_devices, parse_links
from graphprof.partition.plan import Baseline, Plan, Stage
from graphprof.partition.planner import partition, plan_prepared
from graphprof.partition.solver import Infeasible, Problem, Solution, solve

__all__ = [
    "Baseline",
    "CostTable",
    "Device",
    "Infeasible",
    "Links",
    "Plan",
    "Problem",
    "Solution",
    "Stage",
    "Unit",
    "parse_devices",
    "parse_links",
    "partition",
    "plan_prepared",
    "solve",
]
