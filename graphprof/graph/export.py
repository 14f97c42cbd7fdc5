"""Write graphs: JSON, Graphviz DOT (clusters by module), SVG/PNG through Graphviz, and the text format.

Pure functions of :class:`~graphprof.graph.model.Graph`. Every path is checked before anything is
written (its directory exists; an existing file only with ``overwrite=True``), so a bad path writes
nothing. SVG and PNG need Graphviz's ``dot`` program (``apt-get install graphviz``, ``brew install
graphviz``); without it they raise :class:`~graphprof.errors.MissingDependencyError`.

The text format (``<base>_module.txt`` / ``<base>_detail.txt``, as the edge profiler writes them)::

    # graphprof module graph of resnet18 (schema 1.0)
    [nodes]
    id  name  type  params  macs  flops  bytes  estimated_ms  measured_ms  output_shapes
    0   input input 0       0     0      602112 -             -            1x3x224x224
    ...
    [edges]
    0 -> 1  1x3x224x224  float32  602112
    ...
    [stats]
    total_nodes: 70
    ...
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from graphprof.base.atomic import check_path, write_atomic
from graphprof.errors import MissingDependencyError, OutputError
from graphprof.graph.model import Graph
from graphprof.schemas import envelope

__all__ = ["GRAPH_FORMATS", "check_paths", "text_paths", "write_graph", "to_dot", "to_text", "to_json"]

GRAPH_FORMATS = (".json", ".dot", ".svg", ".png", ".txt")
_GRAPHVIZ_HINT = "install Graphviz: apt-get install graphviz (Debian/Ubuntu) or brew install graphviz (macOS)"


def check_paths(paths: Iterable[Path], *, overwrite: bool) -> None:
    """Raise :class:`OutputError` unless every path can be written (:func:`graphprof.base.atomic.check_path`:
    its folder exists and is writable, it is no folder nor link; no clobbering)."""
    for path in paths:
        check_path(path)
        if path.exists() and not overwrite:
            raise OutputError(f"{path} exists; pass overwrite (overwrite_module=True) to replace it")


def text_paths(base: str | Path) -> tuple[Path, Path]:
    """``<base>_module.txt`` and ``<base>_detail.txt`` (a ``.txt`` suffix on ``base`` is dropped)."""
    base = Path(base)
    if base.suffix == ".txt":
        base = base.with_suffix("")
    return base.with_name(base.name + "_module.txt"), base.with_name(base.name + "_detail.txt")


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape) or "scalar"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.6f}"


def to_text(graph: Graph, *, include_edges: bool = True, include_stats: bool = True) -> str:
    """The edge profiler's text format: ids, names, parameter sizes, costs, times, edges, stats."""
    lines = [f"# graphprof {graph.level} graph of {graph.model_name} (schema {graph.to_dict()['schema_version']})"]
    if graph.hardware:
        lines.append(f"# estimated_ms: roofline lower bound on {graph.hardware}")
    lines.append("[nodes]")
    lines.append("id\tname\ttype\tparams\tmacs\tflops\tbytes\testimated_ms\tmeasured_ms\toutput_shapes")
    for n in graph.nodes:
        shapes = ",".join(_shape(s) for s in n.output_shapes) or "-"
        lines.append(
            f"{n.id}\t{n.name}\t{n.type}\t{n.params}\t{n.macs}\t{n.flops}\t{n.bytes}\t{_ms(n.estimated_ms)}\t{_ms(n.measured_ms)}\t{shapes}"
        )
    if include_edges:
        lines.append("[edges]")
        lines.append("src -> dst\tshape\tdtype\tbytes")
        lines += [f"{e.src} -> {e.dst}\t{_shape(e.shape)}\t{e.dtype}\t{e.bytes}" for e in graph.edges]
    if include_stats:
        lines.append("[stats]")
        lines.append(graph.stats_text())
    return "\n".join(lines) + "\n"


def to_json(graph: Graph, detail: Graph | None = None) -> str:
    """Both graphs (the detail one may be ``None``), versioned: ``{"kind": "graph", "schema_version": ...,
    "module_graph": ..., "detail_graph": ...}`` (its schema: :mod:`graphprof.schemas`)."""
    body = {"module_graph": graph.to_dict(), "detail_graph": detail.to_dict() if detail is not None else None}
    return json.dumps({**envelope("graph"), **body}, indent=1)


def _quote(text: str) -> str:
    """A DOT string: backslashes and quotes escaped, line breaks written as DOT's line-break escape."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: Graph, depth: int | None = None) -> str:
    """Graphviz text: one cluster per module at ``depth`` (default 1) holding the nodes under it."""
    cut = depth if depth is not None and depth > 0 else 1
    clusters: dict[str, list[str]] = {}
    loose: list[str] = []
    for n in graph.nodes:
        shape = "ellipse" if n.kind == "input" else "box"
        label = f"{n.name}\n{n.type}" + (f"\n{n.flops:,} FLOPs" if n.flops else "")
        if n.measured_ms is not None:
            label += f"\nmeasured {n.measured_ms:.3g} ms"
        elif n.estimated_ms is not None:
            label += f"\nestimated {n.estimated_ms:.3g} ms"
        line = f"  n{n.id} [label={_quote(label)} shape={shape}];"
        parts = n.module.split(".") if n.module else []
        if n.kind != "input" and parts:
            clusters.setdefault(".".join(parts[:cut]), []).append(line)
        else:
            loose.append(line)
    out = [f"digraph {_quote(graph.model_name)} {{", "  rankdir=TB;", '  node [fontname="Helvetica" fontsize=10];']
    out += loose
    for i, (module, members) in enumerate(clusters.items()):
        out.append(f"  subgraph cluster_{i} {{")
        out.append(f"    label={_quote(module)}; style=rounded; color=gray;")
        out += ["  " + m for m in members]
        out.append("  }")
    for e in graph.edges:
        out.append(f"  n{e.src} -> n{e.dst} [label={_quote(_shape(e.shape))} fontsize=8];")
    out.append("}")
    return "\n".join(out) + "\n"


def _render(dot_text: str, path: Path, fmt: str) -> None:
    dot = shutil.which("dot")
    if dot is None:
        raise MissingDependencyError(f"writing {path.name} needs Graphviz's `dot` program; {_GRAPHVIZ_HINT}")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "graph.dot", Path(tmp) / f"graph.{fmt}"
        src.write_text(dot_text)
        done = subprocess.run([dot, f"-T{fmt}", str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OutputError(f"Graphviz `dot -T{fmt}` failed for {path}: {done.stderr.strip()[:200]}")
        write_atomic(path, out.read_bytes())  # the previous file stays whole until the new one is complete


def write_graph(
    graph: Graph,
    path: str | Path,
    *,
    detail: Graph | None = None,
    depth: int | None = None,
    overwrite: bool = True,
    redact: Callable[[str], str] | None = None,
) -> list[Path]:
    """Write ``graph`` to ``path`` in the format its suffix names; returns the files written.

    ``.json`` holds both graphs; ``.dot``/``.svg``/``.png`` the module graph with clusters at ``depth``;
    ``.txt`` writes ``<base>_module.txt`` and, when ``detail`` is given, ``<base>_detail.txt``.
    ``redact`` (``--redact``: :func:`graphprof.base.redact.redact_text`) rewrites each text before it is
    written or drawn, so no path of the model's (the ``.dot``'s ``digraph "<home>/m.py:Tiny"``) is left in.
    """
    clean = redact or (lambda text: text)
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in GRAPH_FORMATS:
        raise OutputError(f"unknown graph format {path.suffix or '(none)'!r} for {path}; use one of {', '.join(GRAPH_FORMATS)}")
    if suffix == ".txt":
        module_path, detail_path = text_paths(path)
        targets = [module_path] + ([detail_path] if detail is not None else [])
        check_paths(targets, overwrite=overwrite)
        write_atomic(module_path, clean(to_text(graph)))
        if detail is not None:
            write_atomic(detail_path, clean(to_text(detail)))
        return targets
    check_paths([path], overwrite=overwrite)
    if suffix in (".svg", ".png"):
        _render(clean(to_dot(graph, depth)), path, suffix[1:])
    elif suffix == ".dot":
        write_atomic(path, clean(to_dot(graph, depth)))
    else:
        write_atomic(path, clean(to_json(graph, detail)))
    return [path]
