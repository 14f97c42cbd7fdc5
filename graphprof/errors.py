"""One exception family for graphprof.

Every error the library raises on purpose derives from :class:`GraphprofError`. The CLI maps each
subclass to one message and one exit code (see ``cli/graphprof_cli/main.py``); a user never sees a
traceback for a mistake of theirs. Errors name what failed and chain the cause (``raise ... from exc``).

Exit codes, the one table (the CLI adds the codes of the last four rows itself):

=====  ==========================================================================================
code   meaning
=====  ==========================================================================================
0      success
1      :class:`GraphprofError` itself; ``validate``: a model disagrees with its reference or failed
2      :class:`InvalidInputError`; also a command line that does not parse (Click's usage errors)
3      :class:`ModelNotFoundError`, :class:`DownloadUnavailableError`
4      :class:`MissingDependencyError`
5      :class:`ModelBuildError`
6      :class:`CaptureError`, :class:`ShapePropagationError`, :class:`ReferenceFailedError`
7      :class:`OutputError`
8      :class:`ModelExitError`: the model's own code raised ``SystemExit`` (or another ``BaseException``)
9      :class:`UnsafeLoadError`: loading the file would run code from it and that was not allowed
70     :class:`FormulaRegistryError`, and any other exception: a bug in graphprof
130    interrupted (Ctrl-C)
=====  ==========================================================================================
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
    "ModelExitError",
    "UnsafeLoadError",
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


class ModelExitError(GraphprofError):
    """The user's model or factory raised ``SystemExit`` (``sys.exit``) or another ``BaseException``.

    It is that model's failure, reported like any other, never graphprof's own exit: the exit code the
    user's code asked for is in the message, not passed on (``sys.exit(3)`` would read as "not found").
    """

    exit_code = 8


class UnsafeLoadError(GraphprofError):
    """Loading a file (a pickled ``.pt``, a YOLO yaml) would execute code from it, and that was not allowed.

    ``allow_unsafe_load=True`` (``--allow-unsafe-load``) allows it, for files the user trusts.
    """

    exit_code = 9
