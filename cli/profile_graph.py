"""Seed 002's script: ``python3 cli/profile_graph.py --model resnet50 [--input-shape 1,3,224,224]
[--output profile.json] [--verbose]``, printing the seed's report (``GRAPH PROFILE``, ``Total Operators``,
``Total Memory``, ``Layer Details (Top 10 by FLOPs)``) and writing its JSON (:mod:`graphprof_cli.seed_graph`).

With no ``--model`` it profiles resnet18, the seed's default. A model of your own, the seed's way: add
it to ``MODEL_REGISTRY`` below (``MODEL_REGISTRY['my_model'] = lambda: MyModel()``), then
``python3 cli/profile_graph.py --model my_model``.

Also the seed's Python API: ``from cli.profile_graph import show_table; show_table("resnet18", show_shapes=True)``
(graphprof's report).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

try:
    from cli._shim import print_profile
except ImportError:  # run as a script: cli/ itself is on sys.path
    from _shim import print_profile

show_table = print_profile

#: The model profiled when no ``--model`` is given (seed 002's table of arguments).
DEFAULT_MODEL = "resnet18"

#: Your models, by name: ``MODEL_REGISTRY['my_model'] = lambda: MyModel()`` (seed 002's "Validate Custom
#: Models"); each factory is called with no arguments, its input is ``--input-shape`` (default 1,3,224,224).
MODEL_REGISTRY: dict[str, Callable[[], Any]] = {}


def default_model_args(argv: list[str]) -> list[str]:
    """``["--model", DEFAULT_MODEL]`` when ``argv`` names no model (``--model X``, ``--model=X``, ``-m X``), else ``[]``."""
    named = any(arg == "-m" or arg.startswith(("--model", "-m")) for arg in argv)
    return [] if named else ["--model", DEFAULT_MODEL]


def main(argv: list[str] | None = None) -> int:
    """The script: the seed's report of ``--model`` (a :data:`MODEL_REGISTRY` key or a graphprof name)."""
    from graphprof_cli.seed_graph import main as run

    args = sys.argv[1:] if argv is None else argv
    return run([*default_model_args(args), *args], registry=MODEL_REGISTRY)


if __name__ == "__main__":
    sys.exit(main())
