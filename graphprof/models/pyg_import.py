"""The one place that imports PyTorch Geometric; its absence is a :class:`MissingDependencyError`."""

from __future__ import annotations

import warnings
from types import ModuleType

from graphprof.errors import MissingDependencyError

__all__ = ["import_pyg", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'graphprof[pyg]' (torch_geometric)"

#: The start of the warning torch gives when PyG, on import, compiles helpers with ``torch.jit.script``
#: (torch >= 2.9): PyG's to fix, not the user's, so it is silenced while PyG is imported, and only then.
JIT_SCRIPT_DEPRECATION = r"`torch\.jit\.script` is deprecated"


def import_pyg() -> ModuleType:
    """``torch_geometric``, imported on first use."""
    try:
        with warnings.catch_warnings():  # the user's own filters are back as they were once imported
            warnings.filterwarnings("ignore", message=JIT_SCRIPT_DEPRECATION, category=FutureWarning)
            import torch_geometric
            import torch_geometric.nn
    except ImportError as exc:
        raise MissingDependencyError(f"graph models need PyTorch Geometric: {INSTALL_HINT} ({exc})") from exc
    module: ModuleType = torch_geometric
    return module
