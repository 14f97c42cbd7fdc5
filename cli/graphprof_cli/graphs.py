"""``--graph FILE``: write the module and operator graphs of the profiled model (format from the suffix)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["check_graph_path"]


def check_graph_path(path: Path) -> None:
    """Fail before any profiling when ``path`` has an unknown suffix or its directory is missing (a file
    that another option also names is refused before: :func:`graphprof.render.sink.check_distinct`)."""
    from graphprof.errors import OutputError
    from graphprof.graph.export import GRAPH_FORMATS, check_paths, text_paths

    if path.suffix.lower() not in GRAPH_FORMATS:
        raise OutputError(f"unknown graph format {path.suffix or '(none)'!r} for {path}; use one of {', '.join(GRAPH_FORMATS)}")
    check_paths(text_paths(path) if path.suffix.lower() == ".txt" else [path], overwrite=True)
    if path.suffix.lower() in (".svg", ".png"):
        import shutil

        from graphprof.errors import MissingDependencyError

        if shutil.which("dot") is None:
            raise MissingDependencyError(f"writing {path.name} needs Graphviz's `dot` program; install Graphviz: apt-get install graphviz")
