"""graphprof: what a PyTorch model costs, per layer and per aten op, before and while it runs.

Public API::

    import graphprof
    p = graphprof.profile_model("resnet18")
    p.total_params, p.total_macs, p.total_flops, p.capture_method, p.to_dict()
"""

from __future__ import annotations

__version__ = "0.1.0"

from graphprof.api import Mode, parse_dtype, parse_shape, profile_model  # noqa: E402
from graphprof.capture import Capture  # noqa: E402
from graphprof.errors import GraphprofError  # noqa: E402
from graphprof.formulas import Cost, TensorMeta, register_formula  # noqa: E402
from graphprof.hardware import Hardware, custom_hardware, get_hardware, list_hardware, resolve_hardware  # noqa: E402
from graphprof.result import LayerRow, ModuleRow, OpRecord, Profile, UnsupportedOp  # noqa: E402
from graphprof.roofline import DEFAULT_THRESHOLD, Bound, Roofline, classify  # noqa: E402

__all__ = [
    "__version__",
    "profile_model",
    "Profile",
    "LayerRow",
    "ModuleRow",
    "OpRecord",
    "UnsupportedOp",
    "Cost",
    "TensorMeta",
    "register_formula",
    "Mode",
    "Capture",
    "Hardware",
    "get_hardware",
    "list_hardware",
    "resolve_hardware",
    "custom_hardware",
    "Roofline",
    "Bound",
    "classify",
    "DEFAULT_THRESHOLD",
    "GraphprofError",
    "parse_dtype",
    "parse_shape",
]
