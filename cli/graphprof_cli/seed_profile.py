"""Seed 004's script, ``profile_model.py --model graph_transformer --profile runtime memory flops scaling``.

Parses the seed's flags (argparse: ``--profile`` takes several words, ``--hidden_dim`` keeps its
underscore), calls the library (:func:`graphprof.compat.seed004_profiling.profile_report`, :func:`graphprof.compat.seed004_profiling.run_node_scaling`,
:func:`graphprof.gnn.compare.compare_estimate`) and renders. ``--dataset`` reads a real graph
(``karate`` ships with PyG; others from ``--data-root``, never downloaded); without it the graph is
synthetic (``--num_nodes``, ``--avg_degree``). Errors are one line on stderr and graphprof's exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphprof.base.atomic import absolute_output, check_path, means_stdout, write_atomic
from graphprof.render.sink import stamped
from graphprof.schemas import envelope

__all__ = ["main", "build_parser", "run"]

PROFILES = ("runtime", "memory", "flops", "scaling")
#: The ``kind`` of the script's JSON (:mod:`graphprof.schemas`).
KIND = "seed004-profile"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="profile_model.py", description="Profile a graph transformer (seed 004's script, on graphprof).")
    parser.add_argument("--model", default="graph_transformer", help="gps, graph_transformer, gin, gat, gcn (or pyg:NAME)")
    parser.add_argument("--dataset", default=None, help="karate (packaged with PyG), or peptides_func, zinc, cora... from --data-root")
    parser.add_argument("--data-root", "--data_root", dest="data_root", default=None, help="a folder holding a copy of --dataset")
    parser.add_argument("--profile", nargs="+", default=["runtime", "memory", "flops"], choices=PROFILES)
    for name, default in (("hidden_dim", 64), ("num_layers", 4), ("num_heads", 4), ("ffn_dim", 0), ("pe_dim", 0), ("num_nodes", 500)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--avg_degree", type=float, default=5.0)
    parser.add_argument("--num_runs", type=int, default=20, help="timed runs per measurement (stops early once stable)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: where the model is, the CPU)")
    parser.add_argument("--output", default=None, help="write the JSON report here (- for stdout)")
    parser.add_argument("--seed", type=int, default=42)
    return parser


def _graph(args: argparse.Namespace) -> Any:
    from graphprof.gnn.datasets import load_graph
    from graphprof.models.graphs import random_graph

    if args.dataset is not None:
        return load_graph(args.dataset, args.data_root)
    return random_graph(args.num_nodes, avg_degree=args.avg_degree, feature_dim=16, pe_dim=args.pe_dim, seed=args.seed).to_data()


def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[Any]]:
    """The report (the seed's JSON fields) and the renderables to print."""
    from graphprof.compat.seed004_profiling import profile_report, run_node_scaling, set_seed
    from graphprof.models.pyg import build_graph_model
    from graphprof.render.graph_models import render_graph_scaling

    arch = args.model.removeprefix("pyg:")
    data = _graph(args)  # first: a missing dataset fails before anything is built
    hyper = {
        "hidden_dim": args.hidden_dim,
        "num_layers": args.num_layers,
        "num_heads": args.num_heads,
        "ffn_dim": args.ffn_dim,
        "pe_dim": args.pe_dim,
    }
    set_seed(args.seed)
    model = build_graph_model(arch, in_dim=int(data.x.shape[1]), **hyper).eval()
    profiles = [p for p in args.profile if p != "scaling"]
    report = profile_report(model, data, args.device, profiles=profiles, num_runs=args.num_runs)
    shown: list[Any] = []
    if "scaling" in args.profile:
        sizes = [n for n in (100, 200, 400, 800) if n <= max(args.num_nodes, 100)] or [100]

        def factory(**kw: Any) -> Any:
            return build_graph_model(arch, **{**hyper, **kw})

        factory.__name__ = f"pyg:{arch}"
        scaling = run_node_scaling(factory, sizes, avg_degree=args.avg_degree, num_runs=min(args.num_runs, 10))
        report["scaling"] = scaling.to_dict()
        shown.append(render_graph_scaling(scaling))
    return report, shown


def _summary(report: dict[str, Any]) -> list[str]:
    lines = [f"parameters: {report['model_info']['total_parameters']:,} ({report['model_info']['parameter_memory_mb']:.2f} MB)"]
    for name, stats in report.get("runtime", {}).items():
        lines.append(f"{name}: {stats['mean']:.2f} ± {stats['std']:.2f} ms ({stats['num_runs']} runs)" + _noise(stats))
    if "memory" in report:
        lines.append(f"peak memory (forward): {report['memory']['peak_mb']:.2f} MB on {report['memory']['device']}")
    flops = report.get("flops")
    if flops:
        lines.append(f"FLOPs: seed estimate {flops['total_gflops']:.3f} G, graphprof count {flops['counted_total_gflops']:.3f} G")
        for name, estimated in flops["breakdown"].items():
            lines.append(
                f"  {name}: estimate {estimated:.3f} G, count {flops['counted_breakdown'].get(name, 0.0):.3f} G; {flops['reasons'].get(name, '')}"
            )
    return lines


def _noise(stats: dict[str, Any]) -> str:
    """`` - noisy: ...`` where the spread is over :data:`~graphprof.measure.timing.NOISY_CV` of the mean, as the main command flags."""
    from graphprof.measure.timing import NOISY_CV

    cv = stats["std"] / stats["mean"] if stats["mean"] > 0 else 0.0
    if cv <= NOISY_CV:
        return ""
    return f" - noisy: the spread is {cv:.0%} of the mean (over {NOISY_CV:.0%}); quiet the machine or raise --num_runs"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; returns the exit code (0, or the :class:`GraphprofError`'s)."""
    from graphprof.errors import GraphprofError
    from graphprof_cli.common import console as make_console

    args = build_parser().parse_args(argv)
    try:
        target = _checked_output(args.output)  # a missing folder fails before anything is built
        report, shown = run(args)
        console = make_console(stderr=target is not None and means_stdout(target))
        for line in _summary(report):
            console.print(line, highlight=False, markup=False)
        for renderable in shown:
            console.print(renderable)
        if target is not None:
            _write(report, target)
    except GraphprofError as exc:
        print(f"profile_model.py: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (RuntimeError, MemoryError) as exc:  # a graph too large for this machine: one line, not a traceback
        from graphprof.errors import MeasurementError, first_line
        from graphprof.measure.run import is_out_of_memory

        if not is_out_of_memory(exc):
            raise
        first = first_line(exc, 200)
        print(f"profile_model.py: error: out of memory at --num_nodes {args.num_nodes} ({first}); try fewer nodes", file=sys.stderr)
        return MeasurementError.exit_code
    return 0


def _checked_output(output: str | None) -> Path | None:
    """``--output`` checked (its folder exists and is writable) and made absolute, before any work."""
    if output is None:
        return None
    check_path(output)
    return absolute_output(output)


def _write(report: dict[str, Any], target: Path) -> None:
    """The seed's JSON report, after graphprof's envelope (``kind``, ``schema_version``: the
    ``seed004-profile`` schema) and ``timestamp`` and ``host``: to standard output, or atomically to the file."""
    head = envelope(KIND)
    text = json.dumps({**head, **{k: v for k, v in stamped(report).items() if k not in head}}, indent=2)
    if means_stdout(target):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_atomic(target, text)
