"""One exception family for graphprof.

Every error the library raises on purpose derives from :class:`GraphprofError`. The CLI maps each
subclass to one message and one exit code (see ``cli/graphprof_cli/main.py``); a user never sees a
traceback for a mistake of theirs. Errors name what failed and chain the cause (``raise ... from exc``).
"""

from __future__ import annotations

__all__ = [
    "GraphprofError",
    "ModelNotFoundError",
    "ModelBuildError",
    "DownloadUnavailableError",
    "MissingDependencyError",
    "InvalidInputError",
    "CaptureError",
    "ShapePropagationError",
    "FormulaRegistryError",
    "OutputError",
    "ReferenceFailedError",
]


class GraphprofError(Exception):
    """Base class of every error graphprof raises on purpose."""

    exit_code: int = 1


class InvalidInputError(GraphprofError, ValueError):
    """A bad argument: an input shape, a dtype, a batch size, an option value."""

    exit_code = 2


class ModelNotFoundError(GraphprofError, LookupError):
    """The model name resolves to nothing graphprof knows."""

    exit_code = 3


class DownloadUnavailableError(GraphprofError):
    """Resolving the model would need a download, which graphprof never attempts."""

    exit_code = 3


class MissingDependencyError(GraphprofError, ImportError):
    """An optional package (ultralytics, transformers, fvcore, matplotlib) is not installed."""

    exit_code = 4


class ModelBuildError(GraphprofError):
    """The model was found but building it, or running it once, failed."""

    exit_code = 5


class CaptureError(GraphprofError):
    """Every graph-capture method failed; the message names each method's cause."""

    exit_code = 6


class ShapePropagationError(GraphprofError):
    """Shape propagation failed at a named graph node."""

    exit_code = 6


class FormulaRegistryError(GraphprofError):
    """A cost formula was registered twice or under a key that is not an aten op packet."""

    exit_code = 70


class OutputError(GraphprofError):
    """An output file could not be written, or its format is unknown."""

    exit_code = 7


class ReferenceFailedError(GraphprofError):
    """A reference counter (fvcore, FlopCounterMode) could not count the model."""

    exit_code = 6
