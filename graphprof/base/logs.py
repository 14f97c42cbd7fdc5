"""Other libraries' log records kept off the user's terminal for a block: the library never prints.

torch's exporters, Dynamo and fvcore log warnings (some with a whole traceback) about choices graphprof
makes on the user's behalf; :func:`quiet_loggers` raises their loggers' levels for the block and puts
each level back afterwards, whatever the block raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["quiet_loggers"]


@contextmanager
def quiet_loggers(*names: str, level: int = logging.ERROR) -> Iterator[None]:
    """Let through only records of ``level`` and above from the loggers ``names`` while the block runs.

    Example::

        with quiet_loggers("torch.onnx"):   # warnings dropped, errors still logged
            torch.onnx.export(...)
    """
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(level)
        yield
    finally:
        for logger, previous in zip(loggers, levels, strict=True):
            logger.setLevel(previous)
