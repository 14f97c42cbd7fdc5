"""Seed path of the original profiler: ``python cli/profile_graph.py --model resnet50 [--input-shape 1,3,224,224]``.

Also the seed's Python API: ``from cli.profile_graph import show_table; show_table("resnet18", show_shapes=True)``.
"""

from __future__ import annotations

try:
    from cli._shim import print_profile, run_cli
except ImportError:  # run as a script: cli/ itself is on sys.path
    from _shim import print_profile, run_cli

show_table = print_profile

if __name__ == "__main__":
    run_cli()
