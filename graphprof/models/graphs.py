"""Deterministic synthetic graphs: N nodes, an average degree (or E edges), node features, optional PE.

>>> g = random_graph(100, avg_degree=5, feature_dim=16, seed=42)
>>> g.num_nodes, g.num_edges, tuple(g.x.shape), tuple(g.edge_index.shape)
(100, 500, (100, 16), (2, 500))

Edges are directed columns of ``edge_index``, as PyG stores them (an undirected edge is two columns), so
``avg_degree = E / N``: the seed's example ``num_nodes=500, num_edges=2500`` is average degree 5. Each
edge's source is uniform over the nodes and its target uniform over the *other* nodes (no self-loops;
repeated edges may occur, as in an Erdos-Renyi multigraph). Everything is drawn from a private
``torch.Generator`` seeded with ``seed``: the same arguments give the same graph, and the global RNG
is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from graphprof.base.limits import require_fits
from graphprof.errors import InvalidInputError

__all__ = [
    "SyntheticGraph",
    "random_graph",
    "edge_count",
    "graph_args",
    "generate_graphs",
    "DEFAULT_NODES",
    "DEFAULT_DEGREE",
    "DEFAULT_FEATURES",
]

DEFAULT_NODES = 1000
DEFAULT_DEGREE = 5.0
DEFAULT_FEATURES = 16


@dataclass(frozen=True)
class SyntheticGraph:
    """One graph's tensors: ``x`` (N x F float32), ``edge_index`` (2 x E int64), ``pe`` (N x pe_dim or None)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    pe: torch.Tensor | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def to_data(self) -> Any:
        """This graph as a PyG ``Data`` (``pe`` set when present); needs torch_geometric."""
        from graphprof.models.pyg_import import import_pyg

        data = import_pyg().data.Data(x=self.x, edge_index=self.edge_index)
        if self.pe is not None:
            data.pe = self.pe
        return data


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    return value


def edge_count(num_nodes: int, avg_degree: float | None = None, num_edges: int | None = None) -> int:
    """E from exactly one of ``avg_degree`` (E = round(N x d)) and ``num_edges``; the default degree when neither.

    >>> edge_count(500, avg_degree=5), edge_count(500, num_edges=2500), edge_count(10)
    (2500, 2500, 50)
    """
    if avg_degree is not None and num_edges is not None:
        raise InvalidInputError("give an average degree or a number of edges, not both")
    if num_edges is not None:
        if isinstance(num_edges, bool) or not isinstance(num_edges, int) or num_edges < 0:
            raise InvalidInputError(f"number of edges must be a non-negative integer, got {num_edges!r}")
        return num_edges
    degree = DEFAULT_DEGREE if avg_degree is None else avg_degree
    if isinstance(degree, bool) or not isinstance(degree, (int, float)) or not math.isfinite(degree) or degree < 0:
        raise InvalidInputError(f"average degree must be a non-negative number, got {degree!r}")
    return round(num_nodes * degree)


def graph_bytes(num_nodes: int, num_edges: int, feature_dim: int, pe_dim: int = 0) -> int:
    """Bytes :func:`random_graph` allocates at its peak: the edges drawn twice and stacked (int64), features and PE (float32)."""
    return 4 * 2 * 8 * num_edges + 4 * num_nodes * (feature_dim + pe_dim)


def random_graph(
    num_nodes: int,
    *,
    avg_degree: float | None = None,
    num_edges: int | None = None,
    feature_dim: int = DEFAULT_FEATURES,
    pe_dim: int = 0,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> SyntheticGraph:
    """A random graph of ``num_nodes`` nodes (see the module docstring); features and PE are ``randn``.

    On the meta device nothing is drawn: the tensors have the shapes and no values (a dry run of a model
    whose ops do not depend on which nodes are linked).
    """
    n = _positive("number of nodes", num_nodes)
    e = edge_count(n, avg_degree, num_edges)
    _positive("feature dimension", feature_dim)
    if isinstance(pe_dim, bool) or not isinstance(pe_dim, int) or pe_dim < 0:
        raise InvalidInputError(f"PE dimension must be a non-negative integer, got {pe_dim!r}")
    target = torch.device(device)
    if target.type == "meta":
        pe = torch.empty(n, pe_dim, device=target) if pe_dim else None
        return SyntheticGraph(torch.empty(n, feature_dim, device=target), torch.empty(2, e, dtype=torch.long, device=target), pe)
    if n == 1 and e:
        raise InvalidInputError("a graph of one node has no edges without self-loops; use 0 edges or more nodes")
    require_fits(graph_bytes(n, e, feature_dim, pe_dim), f"a graph of {n:,} nodes and {e:,} edges")
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(0, n, (e,), generator=generator)
    target_node = (source + torch.randint(1, max(n, 2), (e,), generator=generator)) % n  # never the source
    x = torch.randn(n, feature_dim, generator=generator)
    pe = torch.randn(n, pe_dim, generator=generator) if pe_dim else None
    edge_index = torch.stack([source, target_node])
    return SyntheticGraph(x.to(target), edge_index.to(target), None if pe is None else pe.to(target))


def graph_args(graph: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``(args, kwargs)`` a graph model takes for ``graph``: a :class:`SyntheticGraph` or a PyG ``Data``/
    ``Batch`` (anything with ``x`` and ``edge_index``) -> ``(x, edge_index)`` plus ``batch``/``pe`` keywords
    where the graph has them. Returns ``None``-free keywords only."""
    x = getattr(graph, "x", None)
    edge_index = getattr(graph, "edge_index", None)
    if not isinstance(x, torch.Tensor) or not isinstance(edge_index, torch.Tensor):
        raise InvalidInputError(f"a graph needs tensors x and edge_index, got {type(graph).__name__}")
    kwargs: dict[str, Any] = {}
    for name in ("batch", "pe"):
        value = getattr(graph, name, None)
        if isinstance(value, torch.Tensor):
            kwargs[name] = value
    return (x, edge_index), kwargs


def generate_graphs(
    num_nodes_list: Sequence[int], *, avg_degree: float = DEFAULT_DEGREE, feature_dim: int = DEFAULT_FEATURES, seed: int = 42
) -> list[SyntheticGraph]:
    """One :func:`random_graph` per node count, each drawn from ``seed``."""
    return [random_graph(n, avg_degree=avg_degree, feature_dim=feature_dim, seed=seed) for n in num_nodes_list]
