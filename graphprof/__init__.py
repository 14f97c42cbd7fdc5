"""graphprof: what a PyTorch model costs, per layer and per aten op, before and while it runs.

One call for each job::

    import graphprof
    p = graphprof.profile_model("resnet18")            # the dry run: a Profile
    p.total_params, p.total_macs, p.total_flops, p.capture_method, p.to_dict()

    pm = graphprof.prepare("yolov8n")                  # resolve, warm up, capture: once
    [pm.profile(batch_size=b) for b in (1, 2, 4, 8)]   # each a dry run on the same capture

    graphprof.measure_model("resnet18")                # a real run: a Measurement
    graphprof.sweep("resnet18", "batch", [1, 2, 4])    # a Sweep with growth fits
    graphprof.compare_models(["resnet18", "resnet50"]) # one row per model
    graphprof.graph_model("resnet18")                  # the module and operator graphs
    graphprof.partition_model("resnet50", "cpu:2")     # a Plan across devices
    graphprof.profile_generation("hf:llama")           # prefill and decode with the KV cache
    graphprof.calibrate_device("cpu")                  # the local preset for predicted times
    graphprof.crosscheck_model("resnet50")             # against fvcore, like for like

The seeds' APIs live at the edge, in :mod:`graphprof.compat` (seed 004's as ``graphprof.seed004``);
nothing here imports them.

The names in ``__all__`` are imported on first use, so ``import graphprof.errors`` (what the command
line needs to answer ``--help`` and ``--version``) does not import torch; a type checker reads them
from the imports under ``TYPE_CHECKING``, so a user's ``mypy --strict`` sees each with its real type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphprof.base import display as _display
from graphprof.base.moved import asked_by_import, moved_error
from graphprof.version import __version__


def _render_html(result: object) -> str:
    """A result's HTML page, for ``_repr_html_`` (:mod:`graphprof.base.display`); the renderer is imported on use."""
    from graphprof.render.html import render_html

    return render_html(result)


_display.set_renderer(_render_html)

__all__ = [
    "__version__",
    # jobs: one obvious call for each
    "profile_model",
    "prepare",
    "PreparedModel",
    "compare_models",
    "ModelOutcome",
    "measure_model",
    "Measurement",
    "sweep",
    "Sweep",
    "graph_model",
    "Graph",
    "Profiler",
    "partition_model",
    "Plan",
    "profile_generation",
    "GenerationProfile",
    "calibrate_device",
    "crosscheck_model",
    "CrossCheck",
    "list_models",
    "plan_memory",
    "plan_ranks",
    "MemoryPlan",
    # the profile and its rows
    "Profile",
    "LayerRow",
    "ModuleRow",
    "OpRecord",
    "UnsupportedOp",
    "InputSpec",
    # devices and the roofline
    "Hardware",
    "get_hardware",
    "list_hardware",
    "Roofline",
    "Bound",
    "classify",
    # extending graphprof
    "Cost",
    "TensorMeta",
    "register_formula",
    "Observer",
    "GraphprofError",
    # traces
    "capture_model",
    "parse_model_trace",
]

if TYPE_CHECKING:  # what a type checker (a user's mypy --strict, an IDE) sees: every name with its type
    from graphprof.base.inputs import InputSpec as InputSpec
    from graphprof.calibrate import calibrate as calibrate_device
    from graphprof.cost.bounds import Bound as Bound
    from graphprof.cost.bounds import Roofline as Roofline
    from graphprof.cost.result import LayerRow as LayerRow
    from graphprof.cost.result import ModuleRow as ModuleRow
    from graphprof.cost.result import OpRecord as OpRecord
    from graphprof.cost.result import Profile as Profile
    from graphprof.cost.result import UnsupportedOp as UnsupportedOp
    from graphprof.cost.roofline import classify as classify
    from graphprof.crosscheck import CrossCheck as CrossCheck
    from graphprof.crosscheck import crosscheck_model as crosscheck_model
    from graphprof.devices.hardware import Hardware as Hardware
    from graphprof.devices.hardware import get_hardware as get_hardware
    from graphprof.devices.hardware import list_hardware as list_hardware
    from graphprof.errors import GraphprofError as GraphprofError
    from graphprof.formulas import Cost as Cost
    from graphprof.formulas import TensorMeta as TensorMeta
    from graphprof.formulas import register_formula as register_formula
    from graphprof.generate import GenerationProfile as GenerationProfile
    from graphprof.generate import profile_generation as profile_generation
    from graphprof.graph import Graph as Graph
    from graphprof.measure import Measurement as Measurement
    from graphprof.measure import capture_model as capture_model
    from graphprof.measure import parse_model_trace as parse_model_trace
    from graphprof.models import list_models as list_models
    from graphprof.partition import Plan as Plan
    from graphprof.partition import partition as partition_model
    from graphprof.prepared import PreparedModel as PreparedModel
    from graphprof.prepared import graph_model as graph_model
    from graphprof.prepared import measure_model as measure_model
    from graphprof.prepared import prepare as prepare
    from graphprof.profile import ModelOutcome as ModelOutcome
    from graphprof.profile import compare_models as compare_models
    from graphprof.profile import profile_model as profile_model
    from graphprof.profiler import Profiler as Profiler
    from graphprof.run.events import Observer as Observer
    from graphprof.scaling import Sweep as Sweep
    from graphprof.scaling import sweep as sweep
    from graphprof.training import MemoryPlan as MemoryPlan
    from graphprof.training import plan_memory as plan_memory
    from graphprof.training import plan_ranks as plan_ranks
else:  # what runs: each name imported from its module on first use (PEP 562)
    import importlib
    import sys

    #: public name -> the module that defines it, and the name there where it differs (the imports above,
    #: as data): ``partition`` and ``calibrate`` are subpackages, so their functions are exported by the job's name
    _EXPORTS: dict[str, str] = {
        "profile_model": "graphprof.profile",
        "prepare": "graphprof.prepared",
        "PreparedModel": "graphprof.prepared",
        "compare_models": "graphprof.profile",
        "ModelOutcome": "graphprof.profile",
        "measure_model": "graphprof.prepared",
        "Measurement": "graphprof.measure",
        "sweep": "graphprof.scaling",
        "Sweep": "graphprof.scaling",
        "graph_model": "graphprof.prepared",
        "Graph": "graphprof.graph",
        "Profiler": "graphprof.profiler",
        "partition_model": "graphprof.partition:partition",
        "Plan": "graphprof.partition",
        "profile_generation": "graphprof.generate",
        "GenerationProfile": "graphprof.generate",
        "calibrate_device": "graphprof.calibrate:calibrate",
        "crosscheck_model": "graphprof.crosscheck",
        "CrossCheck": "graphprof.crosscheck",
        "Profile": "graphprof.cost.result",
        "LayerRow": "graphprof.cost.result",
        "ModuleRow": "graphprof.cost.result",
        "OpRecord": "graphprof.cost.result",
        "UnsupportedOp": "graphprof.cost.result",
        "InputSpec": "graphprof.base.inputs",
        "Hardware": "graphprof.devices.hardware",
        "get_hardware": "graphprof.devices.hardware",
        "list_hardware": "graphprof.devices.hardware",
        "Roofline": "graphprof.cost.bounds",
        "Bound": "graphprof.cost.bounds",
        "classify": "graphprof.cost.roofline",
        "Cost": "graphprof.formulas",
        "TensorMeta": "graphprof.formulas",
        "register_formula": "graphprof.formulas",
        "Observer": "graphprof.run.events",
        "GraphprofError": "graphprof.errors",
        "capture_model": "graphprof.measure",
        "parse_model_trace": "graphprof.measure",
        "list_models": "graphprof.models",
        "plan_memory": "graphprof.training",
        "plan_ranks": "graphprof.training",
        "MemoryPlan": "graphprof.training",
    }

    def __getattr__(name: str) -> object:
        where = _EXPORTS.get(name)
        if where is None:
            # a name an older README used: one line naming where it is now (an ImportError to an import,
            # an AttributeError to hasattr/getattr)
            moved = moved_error(name, importing=asked_by_import(sys._getframe(1)))
            if moved is not None:
                raise moved
            raise AttributeError(f"module 'graphprof' has no attribute {name!r}")
        module, _, defined = where.partition(":")
        value = getattr(importlib.import_module(module), defined or name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(__all__)
