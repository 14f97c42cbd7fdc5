"""The command line's own process: how it treats Python's collector on the way in and how it ends.

These are choices for a process graphprof owns (the ``graphprof`` console script), never made by the library
inside a user's process.

**On the way in.** ``import torch, torchvision`` leaves some 350,000 objects that live as long as the process.
Python (3.11) walks all of them in each *full* collection, and the imports alone trigger several (0.84 s of
full collections in one ``graphprof --model resnet18``, read with ``gc.callbacks``, at a load of 2).
:func:`defer_full_collections` holds them back while the command's imports run; :func:`settle_heap`, called
before each library call (:func:`graphprof_cli.common.run_guarded`), moves what is alive then into the
permanent generation (``gc.freeze``) and gives the collector back its thresholds: later collections, full
ones too, walk only what the command allocates after that. Young collections run throughout.

**On the way out.** After the command the interpreter's teardown of torch (its modules, then the native
libraries of the CUDA build) takes about a second, longer than most dry runs. :func:`end_process` runs the
``atexit`` handlers (temporary folders, logging), flushes stdout and stderr and ends the process with the
command's exit code, skipping that teardown. Where a non-daemon thread is still running it exits as Python
normally does instead, so nothing waits in vain.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading

from graphprof.base.collector import DEFERRED

__all__ = ["settle_heap", "end_process"]

_DEFAULT = gc.get_threshold()


def settle_heap() -> None:
    """What is alive now stays alive: out of every later collection's walk; the thresholds come back (after
    :func:`~graphprof.base.collector.defer_full_collections`; otherwise nothing changes)."""
    if gc.get_threshold()[2] == DEFERRED:
        gc.freeze()
        gc.set_threshold(*_DEFAULT)


def _exit_status(code: object) -> int:
    """``sys.exit``'s rule: ``None`` is 0, an int is itself, anything else is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def end_process(code: object) -> None:
    """End the process now with ``code`` (as ``sys.exit`` reads it), output flushed and ``atexit`` run."""
    status = _exit_status(code)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        raise SystemExit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`graphprof ... | head`) or a closed stream
            pass
    os._exit(status)
