"""The one place that imports PyTorch Geometric; its absence is a :class:`MissingDependencyError`."""

from __future__ import annotations

from types import ModuleType

from graphprof.errors import MissingDependencyError

__all__ = ["import_pyg", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'graphprof[pyg]' (torch_geometric)"


def import_pyg() -> ModuleType:
    """``torch_geometric``, imported on first use."""
    try:
        import torch_geometric
        import torch_geometric.nn
    except ImportError as exc:
        raise MissingDependencyError(f"graph models need PyTorch Geometric: {INSTALL_HINT} ({exc})") from exc
    module: ModuleType = torch_geometric
    return module
