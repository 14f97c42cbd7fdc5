"""Seed path of the unified profiler: ``python cli/profile_graph_v2.py --model resnet18 [--showshape]``.

Also the seed's Python API: ``from cli.profile_graph_v2 import profile_model``.
"""

from __future__ import annotations

try:
    from cli._shim import print_profile, run_cli
except ImportError:  # run as a script: cli/ itself is on sys.path
    from _shim import print_profile, run_cli

profile_model = print_profile

if __name__ == "__main__":
    run_cli()
