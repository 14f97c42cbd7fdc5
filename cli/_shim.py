"""Shared set-up for the seeds' script paths (``python cli/profile_graph_v2.py ...``).

The scripts are thin shims over the ``graphprof`` command line, so users of the earlier tools can
migrate unchanged. They work from a checkout whether or not graphprof is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_CLI = Path(__file__).resolve().parent
for _path in (str(_CLI), str(_CLI.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def run_cli(prefix: list[str] | None = None) -> None:
    """Run the graphprof app with ``prefix`` before this script's own arguments."""
    from graphprof_cli.main import main

    main([*(prefix or []), *sys.argv[1:]])


def print_profile(model: Any, *, show_shapes: bool = False, input_shape: Any = None, model_name: str | None = None, **kwargs: Any) -> Any:
    """The seeds' Python API: profile, print the report, return the :class:`graphprof.Profile`."""
    from rich.console import Console

    import graphprof
    from graphprof.render import render_report

    profile = graphprof.profile_model(model, input_shape=input_shape, model_name=model_name, **kwargs)
    Console().print(render_report(profile, show_shapes=show_shapes))
    return profile
