"""Graph scaling: a graph model profiled (and, if asked, timed) as the graph grows or the model deepens.

Each point builds its graph (:func:`~graphprof.models.graphs.random_graph`, deterministic) and, on the
``num_layers`` or PE axes, its model; then graphprof's dry run counts it per component
(:func:`~graphprof.gnn.components.component_costs`) and, with ``measure=True``, the plain forward is
timed (:func:`graphprof.measure.profile_forward`: mean ± std over ``num_runs`` runs, in ms).

>>> r = run_graph_scaling("pyg:gin", "num_nodes", [100, 200, 400])      # doctest: +SKIP
>>> r.parameter_values, r.fit("mpnn").exponent                          # doctest: +SKIP
([100, 200, 400], 1.0)

Growth fits are log-log least squares of a component's FLOPs on the parameter (exponent 1: linear,
2: quadratic); :meth:`GraphScalingResult.fit_quadratic` splits a component into ``c + a x + b x²``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from graphprof.cost.result import Profile
from graphprof.errors import InvalidInputError
from graphprof.gnn.components import ComponentCosts, component_costs, present
from graphprof.measure.timing import RuntimeStats, profile_forward
from graphprof.models.graphs import DEFAULT_DEGREE, DEFAULT_NODES, graph_args, random_graph
from graphprof.scaling.fit import GrowthFit, QuadraticFit, fit_growth, fit_quadratic

__all__ = ["GraphPoint", "GraphScalingResult", "run_graph_scaling", "AXES", "feature_dim_of"]

#: What a graph scaling varies: the graph's size, or a keyword of the model (a factory's or a pyg: option).
AXES = ("num_nodes", "num_edges", "avg_degree", "num_layers", "pe_dim")
_GRAPH_AXES = ("num_nodes", "num_edges", "avg_degree")

ModelSource = str | Callable[..., nn.Module]


@dataclass(frozen=True)
class GraphPoint:
    """One point: the graph's size, the dry-run counts per component, and the measured forward (or None)."""

    value: Any
    num_nodes: int
    num_edges: int
    params: int
    costs: ComponentCosts
    runtime: RuntimeStats | None = None

    def to_dict(self) -> dict[str, Any]:
        runtime = (
            None
            if self.runtime is None
            else {"mean": self.runtime.mean, "std": self.runtime.std, "num_runs": self.runtime.num_runs, "unit": "ms"}
        )
        return {
            "value": self.value, "num_nodes": self.num_nodes, "num_edges": self.num_edges, "params": self.params,
            "flops": self.costs.total.flops, "macs": self.costs.total.macs, "components": self.costs.to_dict(), "runtime": runtime,
        }  # fmt: skip


@dataclass(frozen=True)
class GraphScalingResult:
    """The seed's scaling result: ``parameter_name``, ``parameter_values`` and per-point ``runtime_stats``
    (mean ± std ms; empty on a dry run), with graphprof's counts per component at every point."""

    model: str
    parameter_name: str
    points: tuple[GraphPoint, ...]
    notes: tuple[str, ...] = ()
    profiles: tuple[Profile, ...] = field(default=(), repr=False, compare=False)

    @property
    def parameter_values(self) -> list[Any]:
        return [p.value for p in self.points]

    @property
    def runtime_stats(self) -> list[RuntimeStats]:
        return [p.runtime for p in self.points if p.runtime is not None]

    @property
    def components(self) -> list[str]:
        """The components with FLOPs at some point, in :data:`~graphprof.gnn.components.COMPONENTS` order."""
        return present(p.costs for p in self.points)

    def series(self, component: str) -> tuple[list[float], list[float]]:
        """``(values, FLOPs)`` of ``component`` (``"total"`` for all) at the points where it is positive."""
        xs, ys = [], []
        for p in self.points:
            y = p.costs.total.flops if component == "total" else p.costs.flops(component)
            if y > 0 and isinstance(p.value, (int, float)):
                xs.append(float(p.value))
                ys.append(float(y))
        return xs, ys

    def fit(self, component: str) -> GrowthFit:
        """Log-log growth exponent of ``component``'s FLOPs (``"total"`` for the whole model), with R²."""
        return fit_growth(component, *self.series(component))

    def fit_quadratic(self, component: str) -> QuadraticFit:
        """``FLOPs = c + a x + b x²`` of ``component`` (columns scaled, so large counts stay exact)."""
        return fit_quadratic(component, *self.series(component))

    def fits(self) -> dict[str, GrowthFit]:
        """A growth fit per component with FLOPs at two points or more, and ``"total"``."""
        names = [*self.components, "total"]
        return {n: self.fit(n) for n in names if len(self.series(n)[0]) >= 2}

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "parameter_name": self.parameter_name, "parameter_values": self.parameter_values,
            "points": [p.to_dict() for p in self.points], "fits": {n: f.to_dict() for n, f in self.fits().items()},
            "notes": list(self.notes),
        }  # fmt: skip


def feature_dim_of(model: nn.Module) -> int:
    """The node-feature width ``model`` takes: a ``pyg:`` model's ``in_dim``, else the first ``nn.Linear``'s input."""
    config = getattr(model, "config", None)
    if config is not None and isinstance(getattr(config, "in_dim", None), int):
        return int(config.in_dim)
    first = next((m for m in model.modules() if isinstance(m, nn.Linear)), None)
    if first is None:
        raise InvalidInputError("cannot tell the model's node-feature width: pass feature_dim")
    return int(first.in_features)


@dataclass(frozen=True)
class _Graph:
    num_nodes: int
    avg_degree: float | None
    num_edges: int | None
    feature_dim: int | None
    pe_dim: int
    seed: int


def _build(source: ModelSource, options: dict[str, Any]) -> tuple[nn.Module, str]:
    if isinstance(source, str):
        from graphprof.models.pyg import PREFIX, build_graph_model

        if not source.lower().startswith(PREFIX):
            raise InvalidInputError(f"graph scaling takes a pyg: model or a factory, got {source!r}")
        base, _, query = source.partition("?")
        from graphprof.models.hf import parse_options
        from graphprof.models.pyg import split_options

        merged = {**parse_options(query), **options}
        in_spec = sorted(k for k in merged if k in ("num_nodes", "avg_degree", "num_edges", "seed"))
        if in_spec:
            raise InvalidInputError(
                f"{source}: a scaling builds its own graphs; give {', '.join(in_spec)} as arguments (--avg-degree, --edges), not in the spec"
            )
        split_options(merged, source)
        return build_graph_model(base[len(PREFIX) :].lower(), **merged).eval(), base
    model = source(**options)
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"the factory returned {type(model).__name__}, not an nn.Module")
    return model, getattr(source, "__name__", "factory")


def _point(
    source: ModelSource, axis: str, value: Any, graph: _Graph, measure: bool, runs: tuple[int, int]
) -> tuple[GraphPoint, Profile, str]:
    from graphprof.profile import profile_model

    model_options = {} if axis in _GRAPH_AXES else {axis: value}
    sizes: dict[str, Any] = {"num_nodes": graph.num_nodes, "avg_degree": graph.avg_degree, "num_edges": graph.num_edges}
    if axis == "num_nodes":
        sizes["num_nodes"] = value
    elif axis == "avg_degree":
        sizes.update(avg_degree=value, num_edges=None)
    elif axis == "num_edges":
        sizes.update(num_edges=value, avg_degree=None)
    edges = None if sizes["num_edges"] is None else int(sizes["num_edges"])
    pe_dim = value if axis == "pe_dim" else graph.pe_dim
    model, name = _build(source, model_options)
    g = random_graph(
        int(sizes["num_nodes"]), avg_degree=None if edges is not None else sizes["avg_degree"], num_edges=edges,
        feature_dim=graph.feature_dim or feature_dim_of(model), pe_dim=pe_dim, seed=graph.seed,
    )  # fmt: skip
    args, kwargs = graph_args(g)
    runtime = _timed(model, _Call(args, kwargs) if kwargs else args, runs) if measure else None  # before the dry run (see below)
    profile = profile_model(model, example_inputs=args, example_kwargs=kwargs, model_name=name)
    point = GraphPoint(value, g.num_nodes, g.num_edges, profile.total_params, component_costs(profile, model), runtime)
    return point, profile, name


def _timed(model: nn.Module, batch: Any, runs: tuple[int, int]) -> RuntimeStats:
    """The forward timed in eval mode, the model's mode put back. Timed before graphprof's capture: the
    first calls of a PyG model after a Dynamo export run slowly (hundreds of ms) for a while."""
    was_training = model.training
    model.eval()
    try:
        return profile_forward(model, batch, num_runs=runs[0], warmup_runs=runs[1])
    finally:
        model.train(was_training)


class _Call(dict[str, Any]):
    """Keyword inputs for :func:`graphprof.measure.timing.call_model` (a dict is passed as ``**batch``)."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__({"x": args[0], "edge_index": args[1], **kwargs})


def run_graph_scaling(
    model: ModelSource,
    parameter: str,
    values: Sequence[Any],
    *,
    num_nodes: int = DEFAULT_NODES,
    avg_degree: float | None = DEFAULT_DEGREE,
    num_edges: int | None = None,
    feature_dim: int | None = None,
    pe_dim: int = 0,
    seed: int = 42,
    measure: bool = False,
    num_runs: int = 10,
    warmup_runs: int = 2,
    keep_profiles: bool = False,
    on_point: Callable[[int, Any], None] | None = None,
) -> GraphScalingResult:
    """Profile ``model`` (a ``pyg:`` spec or a factory taking keywords) at each of ``values`` of ``parameter``.

    ``parameter`` is a graph size (``num_nodes``, ``num_edges``, ``avg_degree``: one model, a new graph
    per point) or a model keyword (``num_layers``, ``pe_dim``, ``hidden_dim``...: a new model per point,
    on the graph of ``num_nodes`` nodes: by default the main command's graph, :data:`DEFAULT_NODES`).
    ``measure=True`` times the forward at every point.
    """
    if not values:
        raise InvalidInputError("graph scaling needs at least one value")
    if num_edges is not None:
        avg_degree = None
    graph = _Graph(num_nodes, avg_degree, num_edges, feature_dim, pe_dim, seed)
    points, profiles, name = [], [], str(model)
    for index, value in enumerate(values):
        if on_point is not None:
            on_point(index, value)
        point, profile, name = _point(model, parameter, value, graph, measure, (num_runs, warmup_runs))
        points.append(point)
        if keep_profiles:
            profiles.append(profile)
    notes = ("measured on the CPU, forward only, eval mode, no_grad; mean ± std over the runs",) if measure else ()
    return GraphScalingResult(name, parameter, tuple(points), notes, tuple(profiles))
