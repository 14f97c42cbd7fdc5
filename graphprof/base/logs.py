"""Other libraries' log records kept off the user's terminal for a block: the library never prints.

torch's exporters, Dynamo and fvcore log warnings (some with a whole traceback) about choices graphprof
makes on the user's behalf; :func:`quiet_loggers` raises their loggers' levels for the block and puts
each level back afterwards, whatever the block raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FAKE_TENSOR_LOGGER", "quiet_loggers"]

#: torch's FakeTensor logger: it logs a meta kernel's failure with the whole traceback (at ERROR) before
#: raising it, and graphprof names that failure in one line of its own; quiet (``logging.CRITICAL``) wherever
#: FakeTensors run (the dry run, a training step, Dynamo's export).
FAKE_TENSOR_LOGGER = "torch._subclasses.fake_tensor"


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
