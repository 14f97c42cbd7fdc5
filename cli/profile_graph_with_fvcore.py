"""Seed path of the fvcore comparison: ``python cli/profile_graph_with_fvcore.py --model resnet50``.

Also ``--models resnet18,resnet50,mobilenet_v2,efficientnet_b0``, and every option of
``graphprof validate`` (``--verbose``, ``--against torch``, ``--jobs``, ``--output``...), which it runs.

The seed's Python use: ``from cli.profile_graph_with_fvcore import compare_with_fvcore;
compare_with_fvcore("resnet18", "resnet50")`` prints the comparison table and returns the rows.
"""

from __future__ import annotations

from typing import Any

try:
    from cli._shim import run_cli
except ImportError:  # run as a script: cli/ itself is on sys.path
    from _shim import run_cli


def compare_with_fvcore(*models: str, tolerance: float = 1.0, **options: Any) -> list[Any]:
    """Check ``models`` against fvcore, print the seed's comparison table, return the :class:`CrossCheck` rows."""
    from rich.console import Console

    from graphprof.compat.seed002 import COMPARISON_LABELS
    from graphprof.crosscheck import crosscheck_models
    from graphprof.render.crosscheck import render_comparison

    results = crosscheck_models(list(models) or ["resnet18"], **options)
    Console().print(render_comparison(results, tolerance=tolerance, labels=COMPARISON_LABELS))
    return results


if __name__ == "__main__":
    run_cli(["validate", "--seed-labels"])  # the seed's title and columns: FLOP COMPARISON, Our FLOPs, fvcore FLOPs
