"""Seed 003's launcher: ``chisel python my_model_script.py [args...]`` (also ``chisel my_model_script.py``
and ``chisel python -m package.module``).

It runs the script in this process, as ``python`` would (its ``sys.argv``, ``__main__``, its folder first
on ``sys.path``, its exit code), with seed 003's decorator switched on (``CHISEL_BACKEND_RUN=1``): every
forward of a ``@capture_model`` class writes ``{model_name}_forward_{NNN}.json`` into the working folder
(or ``$GRAPHPROF_TRACE_DIR``) and prints its layer summary. Inside the script ``from chisel import
capture_model, parse_model_trace`` is :mod:`graphprof.compat.seed003` (unless a package named ``chisel``
is installed, which is then left alone). With ``CHISEL_DEBUG=1`` the launcher and the decorator say what
they do on stderr (lines starting ``chisel:``), and the launcher ends with the trace files written.

A launcher mistake (no script, a script or ``-m`` module that does not exist) is one line on stderr and exit 2; what the
script itself raises is the script's, shown as ``python`` shows it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["main", "USAGE"]

USAGE = "usage: chisel python my_model_script.py [args...]  (or: chisel python -m package.module [args...])"
_PYTHONS = ("python", "python3", Path(sys.executable).name)


def _split(argv: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """``(module or None, script or module name, its arguments)`` from the launcher's arguments."""
    args = list(argv)
    if args and Path(args[0]).name in _PYTHONS:
        args = args[1:]
    if args and args[0] in ("-h", "--help"):
        raise _Help(USAGE)
    if not args:
        raise _Usage(USAGE)
    if args[0] == "-m":
        if len(args) < 2:
            raise _Usage("chisel: error: -m needs a module name")
        return args[1], args[1], args[2:]
    if args[0].startswith("-"):
        raise _Usage(f"chisel: error: unsupported python option {args[0]!r}; {USAGE}")
    return None, args[0], args[1:]


class _Usage(Exception):
    """A mistake in the launcher's own arguments: one line, exit 2."""


class _Help(Exception):
    """``chisel --help``: the usage on stdout, exit 0 (as ``python --help`` does)."""


def _traces(directory: Path) -> set[Path]:
    return set(directory.glob("*_forward_*.json")) if directory.is_dir() else set()


def _alias_chisel() -> None:
    """``import chisel`` inside the script: seed 003's API, unless a real ``chisel`` package exists."""
    if "chisel" in sys.modules or importlib.util.find_spec("chisel") is not None:
        return
    from graphprof.compat import seed003

    sys.modules["chisel"] = seed003


def _run(module: str | None, target: str, script_args: list[str]) -> None:
    if module is None:
        script = Path(target)
        if not script.is_file():
            raise _Usage(f"chisel: error: can't open file {target!r}: no such file")
        sys.argv = [target, *script_args]
        sys.path.insert(0, str(script.resolve().parent))
        runpy.run_path(target, run_name="__main__")
    else:
        sys.argv = [target, *script_args]
        sys.path.insert(0, os.getcwd())
        _require_module(module)
        runpy.run_module(module, run_name="__main__", alter_sys=True)


def _require_module(module: str) -> None:
    """``-m MODULE`` names a module that can run (found, or a package with a ``__main__``), else a launcher
    mistake (one line): ``python -m`` says the same. Only finding it imports its parent packages."""
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None and importlib.util.find_spec(f"{module}.__main__") is None:
            raise _Usage(f"chisel: error: {module!r} is a package with no __main__ module, so it cannot be run with -m")
    except (ImportError, ValueError) as exc:
        raise _Usage(f"chisel: error: no module named {module!r} ({exc})") from None
    if spec is None:
        raise _Usage(f"chisel: error: no module named {module!r}")


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    """The launcher's own answers, each one line: help on stdout (exit 0), a usage error on stderr (exit 2)."""
    try:
        yield
    except _Help as exc:
        sys.stdout.write(f"{exc}\n")
        raise SystemExit(0) from None
    except _Usage as exc:
        sys.stderr.write(f"{exc}\n")
        raise SystemExit(2) from None


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``chisel``); the exit code is the script's."""
    from graphprof.compat.seed003 import CHISEL_ENV, debug
    from graphprof.measure.trace import TRACE_DIR_ENV

    with _answered():
        module, target, script_args = _split(sys.argv[1:] if argv is None else argv)
    os.environ[CHISEL_ENV] = "1"
    directory = Path(os.environ.get(TRACE_DIR_ENV, "."))
    before = _traces(directory)
    debug(f"running {target} with profiling on ({CHISEL_ENV}=1); traces into {directory.resolve()}")
    _alias_chisel()
    try:
        with _answered():
            _run(module, target, script_args)
    finally:
        written = sorted(_traces(directory) - before)
        if written:
            debug(f"{len(written)} trace file(s) written: {', '.join(p.name for p in written)}")
        else:
            debug("no trace files written: no forward of a @capture_model class ran")


if __name__ == "__main__":
    main()
