"""Graph options of graphprof's commands (``--nodes``, ``--avg-degree``, ``--edges``) and the graph commands.

* ``graphprof --model pyg:gps --nodes 1000 --avg-degree 5``: the options become the spec's own
  (``pyg:gps?num_nodes=1000&avg_degree=5``), so the main command runs unchanged;
* ``graphprof sweep --model pyg:gps --nodes 100:5000:x2`` (or ``--layers 2,4,8`` on a ``pyg:`` model): a
  graph sweep, FLOPs per component at every point and a growth fit per component
  (:func:`graphprof.gnn.scaling.run_graph_scaling`);
* ``graphprof graph-estimate --model pyg:graph_transformer``: the seed's estimate beside graphprof's
  count, per component, with the reason they differ (:func:`graphprof.gnn.compare.compare_graph_model`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof_cli import options as opt
from graphprof_cli.common import console as make_console
from graphprof_cli.common import run_guarded

__all__ = ["NodesOption", "AvgDegreeOption", "EdgesOption", "graph_spec", "is_graph_model", "run_graph_sweep", "graph_estimate_command"]

PREFIX = "pyg:"

NodesOption = Annotated[str | None, typer.Option("--nodes", help="pyg: models: nodes of the synthetic graph (sweep: 100:5000:x2).")]
AvgDegreeOption = Annotated[
    float | None, typer.Option("--avg-degree", help="pyg: models: edges per node of the synthetic graph (default 5).")
]
EdgesOption = Annotated[int | None, typer.Option("--edges", help="pyg: models: exactly this many edges (instead of --avg-degree).")]


def is_graph_model(model: str | None) -> bool:
    return bool(model) and str(model).strip().lower().startswith(PREFIX)


def _with(spec: str, key: str, value: Any) -> str:
    base, _, query = spec.partition("?")
    kept = [part for part in query.split("&") if part and part.split("=", 1)[0] != key]
    return f"{base}?{'&'.join([*kept, f'{key}={value}'])}"


def graph_spec(model: str | None, nodes: str | None, avg_degree: float | None, edges: int | None) -> str | None:
    """``model`` with the graph options in its spec; an option on a model that is not ``pyg:`` is an error."""
    from graphprof.errors import InvalidInputError

    given = {k: v for k, v in (("num_nodes", nodes), ("avg_degree", avg_degree), ("num_edges", edges)) if v is not None}
    if not given or model is None:
        return model
    if not is_graph_model(model):
        raise InvalidInputError(f"--nodes, --avg-degree and --edges apply to graph models (pyg:gps, pyg:gin...), not {model}")
    spec = model
    for key, value in given.items():
        if key == "num_nodes" and not str(value).strip().isdigit():
            raise InvalidInputError(f"--nodes takes a whole number here (a range is for graphprof sweep), got {value!r}")
        spec = _with(spec, key, value)
    return spec


def run_graph_sweep(
    model: str, *, nodes: str | None, layers: str | None, avg_degree: float | None, edges: int | None,
    measure: bool, output: Path | None, debug: bool, redact: bool = False,
) -> None:  # fmt: skip
    """``graphprof sweep`` on a graph model: ``--nodes`` or ``--layers``; a table per component and the fits."""
    from graphprof.errors import InvalidInputError
    from graphprof.gnn.scaling import run_graph_scaling
    from graphprof.render.graph_models import render_graph_scaling
    from graphprof.scaling import parse_values
    from graphprof_cli.output import emit, plan

    target = run_guarded(lambda: plan("graph-scaling", output, redact=redact), debug)  # a bad path fails before the sweep

    def run() -> Any:
        if (nodes is None) == (layers is None):
            raise InvalidInputError("a graph sweep takes one of --nodes or --layers")
        axis, text = ("num_nodes", nodes) if nodes is not None else ("num_layers", layers)
        values = [int(v) for v in parse_values(str(text), "--nodes" if nodes is not None else "--layers")]
        base = model.partition("?")[0]
        if not is_graph_model(base):
            raise InvalidInputError(f"--nodes sweeps a graph model (pyg:gps, pyg:gin...), not {model}")
        options: dict[str, Any] = {"measure": measure, "num_edges": edges}
        if avg_degree is not None:
            options["avg_degree"] = avg_degree
        return run_graph_scaling(model, axis, values, **options)

    result = run_guarded(run, debug)
    console = make_console(stderr=target is not None and target.to_stdout)
    console.print(render_graph_scaling(result))
    emit(result, target, console, debug)


def graph_estimate_command(
    model: Annotated[str, typer.Option("--model", "-m", help="A graph model: pyg:graph_transformer, pyg:gps?hidden_dim=256...")],
    nodes: NodesOption = None,
    avg_degree: AvgDegreeOption = None,
    edges: EdgesOption = None,
    sparse_ratio: Annotated[float, typer.Option("--sparse-ratio", help="The seed's share of node pairs its attention scores.")] = 1.0,
    output: opt.OutputOption = None,
    width: opt.WidthOption = None,
    redact: opt.RedactOption = False,
    debug: opt.DebugOption = False,
) -> None:
    """The seed's FLOPs estimate beside graphprof's count, per component: graphprof graph-estimate --model pyg:gps."""
    from graphprof.gnn.compare import compare_graph_model
    from graphprof.render.graph_models import render_comparison
    from graphprof_cli.output import emit, plan

    spec = run_guarded(lambda: graph_spec(model, nodes, avg_degree, edges), debug) or model
    target = run_guarded(lambda: plan("graph-estimate", output, redact=redact), debug)  # JSON only; a bad path fails before the work
    comparison = run_guarded(lambda: compare_graph_model(spec, sparse_ratio=sparse_ratio), debug)
    console = make_console(width, stderr=target is not None and target.to_stdout)
    console.print(render_comparison(comparison))
    emit(comparison, target, console, debug)
