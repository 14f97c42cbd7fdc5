"""Seed path of the original profiler: ``python cli/profile_graph.py --model resnet50 [--input-shape 1,3,224,224]``.

With no ``--model`` it profiles resnet18, the seed's default.

Also the seed's Python API: ``from cli.profile_graph import show_table; show_table("resnet18", show_shapes=True)``.
"""

from __future__ import annotations

import sys

try:
    from cli._shim import print_profile, run_cli
except ImportError:  # run as a script: cli/ itself is on sys.path
    from _shim import print_profile, run_cli

show_table = print_profile

#: The model profiled when no ``--model`` is given (seed 002's table of arguments).
DEFAULT_MODEL = "resnet18"


def default_model_args(argv: list[str]) -> list[str]:
    """``["--model", DEFAULT_MODEL]`` when ``argv`` names no model (``--model X``, ``--model=X``, ``-m X``), else ``[]``."""
    named = any(arg == "-m" or arg.startswith(("--model", "-m")) for arg in argv)
    return [] if named else ["--model", DEFAULT_MODEL]


if __name__ == "__main__":
    run_cli(default_model_args(sys.argv[1:]))
