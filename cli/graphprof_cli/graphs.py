"""``--graph FILE``: write the module and operator graphs of the profiled model (format from the suffix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_graph_path", "write_model_graph"]


def check_graph_path(path: Path) -> None:
    """Fail before any profiling when ``path`` has an unknown suffix or its directory is missing (a file
    that another option also names is refused before: :func:`graphprof.render.sink.check_distinct`)."""
    from graphprof.errors import OutputError
    from graphprof.graph.export import GRAPH_FORMATS, check_paths, text_paths

    if path.suffix.lower() not in GRAPH_FORMATS:
        raise OutputError(
            f"unknown graph format {path.suffix or '(none)'!r} for {path}; use one of {', '.join(GRAPH_FORMATS)}"
        )
    check_paths(text_paths(path) if path.suffix.lower() == ".txt" else [path], overwrite=True)
    if path.suffix.lower() in (".svg", ".png"):
        import shutil

        from graphprof.errors import MissingDependencyError

        if shutil.which("dot") is None:
            raise MissingDependencyError(
                f"writing {path.name} needs Graphviz's `dot` program; install Graphviz: apt-get install graphviz"
            )


def write_model_graph(prepared: Any, path: Path, *, depth: int | None, hardware: Any, measurement: Any = None) -> list[Path]:
    """Build both graphs of the prepared model (one more dry run on its capture), write them; the files written.

    With ``measurement`` (``--measure``) the nodes of both graphs carry their measured times too."""
    from graphprof.graph import write_graph

    module_graph, detail_graph = prepared.graph(hardware=hardware, measurement=measurement)
    return write_graph(module_graph, path, detail=detail_graph, depth=depth)
