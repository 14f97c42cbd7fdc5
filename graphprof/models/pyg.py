"""Graph neural networks and graph transformers on PyTorch Geometric: ``pyg:gps``, ``pyg:graph_transformer``,
``pyg:gin``, ``pyg:gat``, ``pyg:gcn``.

Spec syntax (options as for ``hf:`` specs, after a ``?``)::

    pyg:gps                                           the defaults below, on a 1,000-node graph of degree 5
    pyg:gps?hidden_dim=256&num_layers=6&num_heads=8&ffn_dim=512&pe_dim=16
    pyg:gin?num_nodes=5000&avg_degree=10              model options and graph options mix freely

Every model is ``encoder -> num_layers x layer -> head`` over node features, built with random weights:

* ``encoder``: ``Linear(in_dim, hidden_dim)``, plus ``pe_encoder``: ``Linear(pe_dim, hidden_dim)`` added to
  it when ``pe_dim > 0`` (a precomputed positional encoding, such as Laplacian eigenvectors or RWSE, is
  an input; computing it is not part of the forward);
* a layer of ``gps``: PyG's ``GPSConv`` (GraphGPS): a local ``GINConv`` (``conv``) beside global
  multi-head attention over all N nodes (``attn``, ``nn.MultiheadAttention``), then the FFN ``mlp``
  (``hidden_dim -> ffn_dim -> hidden_dim``), batch norms; ``graph_transformer``: ``TransformerConv``
  (``attn``, attention along the edges only, ``num_heads`` heads of ``hidden_dim / num_heads``) with a
  residual and LayerNorm, then the FFN ``ffn`` (GELU) with a residual and LayerNorm; ``gin``: ``GINConv``
  over a two-layer MLP; ``gat``: ``GATConv`` with ``num_heads`` heads of ``hidden_dim / num_heads``;
  ``gcn``: ``GCNConv``; the three MPNNs as ``conv`` followed by an activation;
* ``head``: ``Linear(hidden_dim, out_dim)``, per node.

The forward is ``model(x, edge_index, batch=None, pe=None)``, or ``model(data)`` with a PyG ``Data``/
``Batch`` (its ``x``, ``edge_index``, ``batch`` and ``pe``). The example input is
:func:`graphprof.models.graphs.random_graph` with ``num_nodes``, ``avg_degree`` (or ``num_edges``),
``in_dim`` features and ``seed``. PyG is imported when a model is built, never before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from graphprof.base.limits import require_fits
from graphprof.errors import InvalidInputError, ModelNotFoundError
from graphprof.models.base import ModelInfo, ResolvedModel
from graphprof.models.family import Family, Source
from graphprof.models.graphs import DEFAULT_DEGREE, DEFAULT_NODES, graph_args, random_graph
from graphprof.models.hf import parse_options
from graphprof.models.pyg_import import import_pyg

__all__ = [
    "FAMILY",
    "SOURCE",
    "PREFIX",
    "ARCHITECTURES",
    "GraphModelConfig",
    "GraphOptions",
    "GraphModel",
    "build_graph_model",
    "list_pyg",
    "resolve_pyg",
    "split_options",
]

PREFIX = "pyg:"

#: What each architecture is, for ``--list`` and errors.
ARCHITECTURES: Mapping[str, str] = MappingProxyType(
    {
        "gps": "GPSConv layers: GINConv message passing + global multi-head attention + FFN (GraphGPS)",
        "graph_transformer": "TransformerConv layers (attention along edges) + FFN",
        "gin": "GINConv layers (two-layer MLP)",
        "gat": "GATConv layers (multi-head)",
        "gcn": "GCNConv layers",
    }
)


@dataclass(frozen=True)
class GraphModelConfig:
    """The seed's hyperparameters (``ffn_dim=0`` means ``2 x hidden_dim``, GPSConv's own width)."""

    hidden_dim: int = 64
    num_layers: int = 4
    num_heads: int = 4
    ffn_dim: int = 0
    in_dim: int = 16
    out_dim: int = 1
    pe_dim: int = 0
    dropout: float = 0.0

    @property
    def ffn_width(self) -> int:
        return self.ffn_dim or 2 * self.hidden_dim


@dataclass(frozen=True)
class GraphOptions:
    """The example graph of a spec: ``num_nodes`` nodes, ``avg_degree`` (or exactly ``num_edges``) edges per node."""

    num_nodes: int = DEFAULT_NODES
    avg_degree: float | None = None
    num_edges: int | None = None
    seed: int = 0


def split_options(options: Mapping[str, Any], spec: str) -> tuple[GraphModelConfig, GraphOptions]:
    """A spec's ``?`` options into the model's and the graph's; an unknown name is an :class:`InvalidInputError`."""
    model_names = {f.name for f in fields(GraphModelConfig)}
    graph_names = {f.name for f in fields(GraphOptions)}
    unknown = sorted(set(options) - model_names - graph_names)
    if unknown:
        known = ", ".join(sorted(model_names | graph_names))
        raise InvalidInputError(f"{spec}: unknown option {', '.join(unknown)} (known: {known})")
    config = replace(GraphModelConfig(), **{k: v for k, v in options.items() if k in model_names})
    graph = replace(GraphOptions(), **{k: v for k, v in options.items() if k in graph_names})
    for name in ("hidden_dim", "num_layers", "num_heads", "in_dim", "out_dim", "pe_dim", "ffn_dim"):
        value = getattr(config, name)
        low = 0 if name in ("pe_dim", "ffn_dim") else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidInputError(f"{spec}: {name} must be {'a non-negative' if low == 0 else 'a positive'} integer, got {value!r}")
    dropout = config.dropout
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:  # NaN fails too
        raise InvalidInputError(f"{spec}: dropout must be a number from 0 to below 1, got {dropout!r}")
    return config, graph


def model_bytes(config: GraphModelConfig) -> int:
    """A lower bound on the model's float32 weights: one ``hidden_dim x hidden_dim`` matrix per layer, the
    encoders and the head (the graph's own bytes are :func:`graphprof.models.graphs.graph_bytes`)."""
    d = config.hidden_dim
    return 4 * (config.num_layers * d * d + (config.in_dim + config.pe_dim + config.out_dim) * d)


class _MPNNLayer(nn.Module):
    """A message-passing conv then an activation: ``act(conv(x, edge_index))``."""

    def __init__(self, conv: nn.Module, act: nn.Module) -> None:
        super().__init__()
        self.conv = conv
        self.act = act

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        return self.act(self.conv(x, edge_index))  # type: ignore[no-any-return]


class _TransformerLayer(nn.Module):
    """``TransformerConv`` attention along the edges and an FFN, each with a residual and a LayerNorm."""

    def __init__(self, pyg: Any, config: GraphModelConfig) -> None:
        super().__init__()
        d, heads = config.hidden_dim, config.num_heads
        self.attn = pyg.nn.TransformerConv(d, d // heads, heads=heads, concat=True, dropout=config.dropout)
        self.norm1 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, config.ffn_width), nn.GELU(), nn.Linear(config.ffn_width, d))
        self.norm2 = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm1(x + self.attn(x, edge_index))
        return self.norm2(x + self.ffn(x))  # type: ignore[no-any-return]


class _GPSLayer(nn.Module):
    """PyG's ``GPSConv`` with a ``GINConv`` local MPNN; its FFN rebuilt at ``ffn_dim`` when that is not 2 x hidden."""

    def __init__(self, pyg: Any, config: GraphModelConfig) -> None:
        super().__init__()
        d = config.hidden_dim
        local = pyg.nn.GINConv(nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d)))
        self.gps = pyg.nn.GPSConv(d, local, heads=config.num_heads, dropout=config.dropout)
        if config.ffn_width != 2 * d:  # GPSConv's FFN is Linear(d, 2d), ReLU, Dropout, Linear(2d, d), Dropout
            width = config.ffn_width
            self.gps.mlp = nn.Sequential(
                nn.Linear(d, width), nn.ReLU(), nn.Dropout(config.dropout), nn.Linear(width, d), nn.Dropout(config.dropout)
            )

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        return self.gps(x, edge_index, batch)  # type: ignore[no-any-return]


def _layer(arch: str, pyg: Any, config: GraphModelConfig) -> nn.Module:
    d, heads = config.hidden_dim, config.num_heads
    if arch == "gps":
        return _GPSLayer(pyg, config)
    if arch == "graph_transformer":
        return _TransformerLayer(pyg, config)
    if arch == "gin":
        return _MPNNLayer(pyg.nn.GINConv(nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))), nn.ReLU())
    if arch == "gat":
        return _MPNNLayer(pyg.nn.GATConv(d, d // heads, heads=heads, concat=True, dropout=config.dropout), nn.ELU())
    return _MPNNLayer(pyg.nn.GCNConv(d, d), nn.ReLU())


class GraphModel(nn.Module):
    """``encoder (+ pe_encoder) -> layers -> head`` over the nodes of a graph (see the module docstring)."""

    def __init__(self, arch: str, config: GraphModelConfig | None = None) -> None:
        super().__init__()
        config = config or GraphModelConfig()
        if arch not in ARCHITECTURES:
            raise ModelNotFoundError(f"unknown graph model {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
        if arch in ("gps", "graph_transformer", "gat") and config.hidden_dim % config.num_heads:
            raise InvalidInputError(f"{arch}: hidden_dim {config.hidden_dim} is not divisible by num_heads {config.num_heads}")
        pyg = import_pyg()
        self.arch = arch
        self.config = config
        self.encoder = nn.Linear(config.in_dim, config.hidden_dim)
        self.pe_encoder = nn.Linear(config.pe_dim, config.hidden_dim) if config.pe_dim else None
        self.layers = nn.ModuleList(_layer(arch, pyg, config) for _ in range(config.num_layers))
        self.head = nn.Linear(config.hidden_dim, config.out_dim)

    def forward(
        self, x: Any, edge_index: torch.Tensor | None = None, batch: torch.Tensor | None = None, pe: torch.Tensor | None = None
    ) -> torch.Tensor:
        if edge_index is None:  # a PyG Data/Batch
            (x, edge_index), kwargs = graph_args(x)
            batch, pe = kwargs.get("batch", batch), kwargs.get("pe", pe)
        h = self.encoder(x)
        if self.pe_encoder is not None:
            if pe is None:
                raise ValueError(f"this model has pe_dim={self.config.pe_dim}: pass pe (N x {self.config.pe_dim})")
            h = h + self.pe_encoder(pe)
        for layer in self.layers:
            h = layer(h, edge_index, batch)
        return self.head(h)  # type: ignore[no-any-return]


def build_graph_model(arch: str = "gps", **options: Any) -> GraphModel:
    """``GraphModel(arch, GraphModelConfig(**options))``: a factory with the seed's keywords (``hidden_dim``,
    ``num_layers``, ``num_heads``, ``ffn_dim``, ``pe_dim``, ``in_dim``, ``out_dim``, ``dropout``)."""
    config, _ = split_options(options, f"{PREFIX}{arch}")
    return GraphModel(arch, config)


def list_pyg() -> list[ModelInfo]:
    """The ``pyg:`` models, without importing PyG."""
    return [ModelInfo(f"{PREFIX}{name}", "pyg", f"graph {DEFAULT_NODES} nodes x degree {DEFAULT_DEGREE:g}") for name in ARCHITECTURES]


def resolve_pyg(spec: str, *, input_shape: Sequence[int] | None, batch_size: int | None, device: torch.device) -> ResolvedModel:
    """Build ``pyg:<arch>[?options]`` with random weights and a synthetic graph for it."""
    target, _, query = spec[len(PREFIX) :].partition("?")
    arch = target.strip().lower()
    if arch not in ARCHITECTURES:
        raise ModelNotFoundError(f"unknown graph model '{spec}'; choose one of {', '.join(PREFIX + a for a in ARCHITECTURES)}")
    if input_shape is not None or batch_size not in (None, 1):
        raise InvalidInputError(
            f"{spec} takes a graph: set its size with num_nodes/avg_degree (--nodes, --avg-degree), not an input shape or batch"
        )
    if device.type == "meta":
        raise InvalidInputError(
            f"{spec}: graph models need real edge indices; build on the CPU (the dry run still allocates no activations)"
        )
    config, graph_options = split_options(parse_options(query), spec)
    require_fits(model_bytes(config), f"{spec} (its weights)")
    model = GraphModel(arch, config).eval()
    graph = random_graph(
        graph_options.num_nodes, avg_degree=graph_options.avg_degree, num_edges=graph_options.num_edges,
        feature_dim=config.in_dim, pe_dim=config.pe_dim, seed=graph_options.seed,
    )  # fmt: skip
    args, kwargs = graph_args(graph)
    notes = (
        "built without weights (random init)",
        f"graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges (synthetic, seed {graph_options.seed}), {config.in_dim} features"
        + (f", PE dim {config.pe_dim}" if config.pe_dim else ""),
    )
    moved = tuple(a.to(device) for a in args), {k: v.to(device) for k, v in kwargs.items()}
    return ResolvedModel(name=spec, family="pyg", model=model.to(device), args=moved[0], kwargs=moved[1], notes=notes)


#: Graph models: the edge indices are data the forward reads, so they are never built on the meta device.
FAMILY = Family(
    "pyg",
    needs_real_values=True,
    graph_input=True,
    # gcn, gin, gat, graph_transformer and gps (torch_geometric 2.x): each fails the trial and is exported
    no_eager_trial="a MessagePassing layer aggregates in its own forward, around its child modules",
)


#: ``pyg:gps``, ``pyg:gin?num_nodes=5000``.
SOURCE = Source.prefixed(FAMILY, PREFIX, resolve_pyg, list_pyg)
