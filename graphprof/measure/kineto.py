"""Keep torch.profiler's C++ side (Kineto) quiet on stderr while graphprof measures.

Kineto writes ``USDT ... profiler_start`` lines and, with no GPU, ``ERROR ... gpuGetDeviceCount failed``
to stderr each time a profiler starts, unless ``KINETO_LOG_LEVEL`` asks for less; it reads the variable
when a profiler first starts in the process. :func:`quiet_kineto` sets it for the span of graphprof's own
profiling when the user has not set it, and puts the environment back as it was on exit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["quiet_kineto", "KINETO_QUIET_LEVEL"]

#: Kineto's levels: 0 verbose ... 3 error; 6 is above every level it logs at.
KINETO_QUIET_LEVEL = "6"


@contextlib.contextmanager
def quiet_kineto() -> Iterator[None]:
    """Quiet Kineto inside the block unless the user chose a level; the environment is restored on exit."""
    if "KINETO_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["KINETO_LOG_LEVEL"] = KINETO_QUIET_LEVEL
    try:
        yield
    finally:
        os.environ.pop("KINETO_LOG_LEVEL", None)
