"""A ``torch.compile``d module is profiled as the module it wraps.

``torch.compile(model)`` returns an ``OptimizedModule`` that holds the user's module as ``_orig_mod`` and
runs it through Dynamo and Inductor. Tracing the wrapper would trace the compiler (or compile it), and
counters that hook it count some ops three times; the cost graphprof states is that of the model's own
graph, which compilation does not change (it fuses kernels: fewer bytes move between them, the MACs are
the same). So the wrapped module is profiled instead, with a note that says so; the compiled wrapper and
its caches are not touched.
"""

from __future__ import annotations

import sys

from torch import nn

__all__ = ["unwrap_compiled"]


def unwrap_compiled(module: nn.Module) -> tuple[nn.Module, str | None]:
    """``(the module torch.compile wraps, a note)``, or ``(module, None)`` for a module that is not compiled."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:  # torch.compile imports it: nothing can have been compiled yet
        return module, None
    inner = module
    while isinstance(inner, eval_frame.OptimizedModule):
        inner = inner._orig_mod
    if inner is module:
        return module, None
    return inner, (
        f"a torch.compile'd module: profiled as the {type(inner).__name__} it wraps (_orig_mod); the MACs are the "
        "model's, while compiled kernels fuse ops and so move fewer bytes than the rows show"
    )
