"""graphprof's count of a graph model, per component: attention, mpnn, ffn, norm, pe, io, other.

Each row of a :class:`~graphprof.cost.result.Profile` belongs to the innermost module that ran it; its
component is that of the *outermost* classified module on its path, so a GINConv's inner MLP counts as
message passing and a GPSConv (a container) passes its parts through. A module is classified by what it
is, not by its class name:

* ``attention``: ``nn.MultiheadAttention``, PyG's ``TransformerConv``, or a module named ``attn``;
* ``mpnn``: any other PyG ``MessagePassing`` (GIN, GCN, GAT...), or a module named ``conv``;
* ``ffn``: a module named ``mlp`` or ``ffn`` (GPSConv's and graphprof's feed-forward blocks);
* ``norm``: a normalisation layer (``nn.LayerNorm``, ``BatchNorm``, PyG's norms), or a name starting ``norm``;
* ``pe``: a module named ``pe_encoder`` (or containing ``pe``/``posenc`` as a word of its name);
* ``io``: ``encoder`` and ``head``; ``other``: everything else (residual adds, masks, reshapes).

The components of one profile sum to its total (the test checks it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from torch import nn

from graphprof.cost.result import Profile
from graphprof.formulas import Cost

__all__ = ["COMPONENTS", "ComponentCosts", "classify_modules", "component_costs"]

COMPONENTS = ("attention", "mpnn", "ffn", "norm", "pe", "io", "other")

_NORMS = (nn.LayerNorm, nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm)
_NAMED = MappingProxyType(
    {"attn": "attention", "attention": "attention", "conv": "mpnn", "mlp": "ffn", "ffn": "ffn", "pe_encoder": "pe",
     "posenc": "pe", "encoder": "io", "head": "io"}
)  # fmt: skip


@dataclass(frozen=True)
class ComponentCosts:
    """Forward :class:`Cost` per component (every key of :data:`COMPONENTS`), and their sum."""

    forward: Mapping[str, Cost]

    @property
    def total(self) -> Cost:
        return sum(self.forward.values(), Cost())

    def flops(self, component: str) -> int:
        return self.forward[component].flops

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {name: {"macs": c.macs, "flops": c.flops, "bytes": c.bytes_read + c.bytes_written} for name, c in self.forward.items()}


def _pyg_kind(module: nn.Module) -> str | None:
    """attention / mpnn for PyG's convs, by type (PyG is only looked at when the model uses it)."""
    import sys

    if "torch_geometric" not in sys.modules:
        return None
    from graphprof.models.pyg_import import import_pyg

    pyg = import_pyg()
    if isinstance(module, pyg.nn.TransformerConv):
        return "attention"
    if isinstance(module, pyg.nn.MessagePassing):
        return "mpnn"
    if module.__class__.__module__.startswith("torch_geometric.nn.norm"):
        return "norm"
    return None


def _kind(name: str, module: nn.Module) -> str | None:
    if isinstance(module, nn.MultiheadAttention):
        return "attention"
    found = _pyg_kind(module)
    if found is not None:
        return found
    if isinstance(module, _NORMS) or name.startswith("norm"):
        return "norm"
    return _NAMED.get(name)


def classify_modules(model: nn.Module) -> dict[str, str]:
    """``{module path: component}`` for the classified modules of ``model`` (the outermost on each path wins)."""
    found: dict[str, str] = {}
    for path, module in model.named_modules():
        if not path or any(path.startswith(prefix + ".") for prefix in found):
            continue
        kind = _kind(path.rsplit(".", 1)[-1], module)
        if kind is not None:
            found[path] = kind
    return found


def _component_of(path: str | None, classified: Mapping[str, str]) -> str:
    if not path:
        return "other"
    parts = path.split(".")
    for end in range(1, len(parts) + 1):
        kind = classified.get(".".join(parts[:end]))
        if kind is not None:
            return kind
    return "other"


def component_costs(profile: Profile, model: nn.Module, classified: Mapping[str, str] | None = None) -> ComponentCosts:
    """Sum the forward cost of ``profile``'s rows per component of ``model`` (the model it profiled)."""
    table = classify_modules(model) if classified is None else classified
    sums = {name: Cost() for name in COMPONENTS}
    for row in profile.layers:
        kind = _component_of(row.module, table)
        sums[kind] = sums[kind] + row.forward
    return ComponentCosts(MappingProxyType(sums))


def present(costs: Iterable[ComponentCosts]) -> list[str]:
    """The components with any FLOPs in at least one of ``costs``, in :data:`COMPONENTS` order."""
    seen = list(costs)
    return [name for name in COMPONENTS if any(c.flops(name) for c in seen)]
