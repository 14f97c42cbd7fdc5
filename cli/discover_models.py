"""Seed path of the model list: ``python cli/discover_models.py [--filter resnet]`` (same as ``graphprof --list``)."""

from __future__ import annotations

try:
    from cli._shim import run_cli
except ImportError:  # run as a script: cli/ itself is on sys.path
    from _shim import run_cli

if __name__ == "__main__":
    run_cli(["--list"])
