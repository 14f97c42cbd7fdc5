"""One exception family for graphprof.

Every error the library raises on purpose derives from :class:`GraphprofError`. The CLI maps each
subclass to one message and one exit code (see ``cli/graphprof_cli/main.py``); a user never sees a
traceback for a mistake of theirs. Errors name what failed and chain the cause (``raise ... from exc``).
"""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "one_line",
    "first_line",
    "EXIT_OK",
    "EXIT_DISAGREE",
    "EXIT_INVALID_INPUT",
    "EXIT_MODEL_NOT_FOUND",
    "EXIT_MISSING_DEPENDENCY",
    "EXIT_MODEL_BUILD",
    "EXIT_CAPTURE",
    "EXIT_OUTPUT",
    "EXIT_MODEL_EXIT",
    "EXIT_UNSAFE_LOAD",
    "EXIT_FORMULA_REGISTRY",
    "EXIT_MEASUREMENT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "GraphprofError",
    "ModelNotFoundError",
    "ModelBuildError",
    "DownloadUnavailableError",
    "MissingDependencyError",
    "InvalidInputError",
    "CaptureError",
    "ShapePropagationError",
    "DataDependentError",
    "FormulaRegistryError",
    "OutputError",
    "ReferenceFailedError",
    "ModelExitError",
    "UnsafeLoadError",
    "MeasurementError",
]


# ---- every exit code of the command line, in one table ------------------------------------------------
EXIT_OK = 0
EXIT_DISAGREE = 1
EXIT_INVALID_INPUT = 2
EXIT_MODEL_NOT_FOUND = 3
EXIT_MISSING_DEPENDENCY = 4
EXIT_MODEL_BUILD = 5
EXIT_CAPTURE = 6
EXIT_OUTPUT = 7
EXIT_MODEL_EXIT = 8
EXIT_UNSAFE_LOAD = 9
EXIT_FORMULA_REGISTRY = 10
EXIT_MEASUREMENT = 11
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

#: code -> what it means (``graphprof --help`` shows this table).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_DISAGREE: "validate: a model disagrees with the reference or failed; any other graphprof error",
    EXIT_INVALID_INPUT: "a bad option or input (shape, dtype, batch size, number)",
    EXIT_MODEL_NOT_FOUND: "the model is unknown, or only a download would give it",
    EXIT_MISSING_DEPENDENCY: "an optional package is not installed",
    EXIT_MODEL_BUILD: "the model could not be built or run once",
    EXIT_CAPTURE: "capture, shape propagation or a reference counter failed",
    EXIT_OUTPUT: "an output file could not be written, or its format is unknown",
    EXIT_MODEL_EXIT: "the model's own code called sys.exit (or raised another BaseException)",
    EXIT_UNSAFE_LOAD: "loading the file would run code from it, and --allow-unsafe-load was not given",
    EXIT_FORMULA_REGISTRY: "a cost formula was registered wrongly",
    EXIT_MEASUREMENT: "a real run failed: out of memory on the device (the batch is named), or the model raised",
    EXIT_INTERNAL: "a bug in graphprof (--debug shows the traceback)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


class GraphprofError(Exception):
    """Base class of every error graphprof raises on purpose."""

    exit_code: int = EXIT_DISAGREE


class InvalidInputError(GraphprofError, ValueError):
    """A bad argument: an input shape, a dtype, a batch size, an option value."""

    exit_code = EXIT_INVALID_INPUT


class ModelNotFoundError(GraphprofError, LookupError):
    """The model name resolves to nothing graphprof knows."""

    exit_code = EXIT_MODEL_NOT_FOUND


class DownloadUnavailableError(GraphprofError):
    """Resolving the model would need a download, which graphprof never attempts."""

    exit_code = EXIT_MODEL_NOT_FOUND


class MissingDependencyError(GraphprofError, ImportError):
    """An optional package (ultralytics, transformers, fvcore, matplotlib) is not installed."""

    exit_code = EXIT_MISSING_DEPENDENCY


class ModelBuildError(GraphprofError):
    """The model was found but building it, or running it once, failed."""

    exit_code = EXIT_MODEL_BUILD


class CaptureError(GraphprofError):
    """Every graph-capture method failed; the message names each method's cause."""

    exit_code = EXIT_CAPTURE


class ShapePropagationError(GraphprofError):
    """Shape propagation failed at a named graph node."""

    exit_code = EXIT_CAPTURE


class DataDependentError(ShapePropagationError):
    """The dry run needs real values (a data-dependent shape); run again with ``fake=False``."""


class FormulaRegistryError(GraphprofError):
    """A cost formula was registered twice or under a key that is not an aten op packet."""

    exit_code = EXIT_FORMULA_REGISTRY


class OutputError(GraphprofError):
    """An output file could not be written, or its format is unknown."""

    exit_code = EXIT_OUTPUT


class ReferenceFailedError(GraphprofError):
    """A reference counter (fvcore, FlopCounterMode) could not count the model."""

    exit_code = EXIT_CAPTURE


class ModelExitError(GraphprofError):
    """The user's model or factory raised ``SystemExit`` (``sys.exit``) or another ``BaseException``.

    It is that model's failure, reported like any other, never graphprof's own exit: the exit code the
    user's code asked for is in the message, not passed on (``sys.exit(3)`` would read as "not found").
    """

    exit_code = EXIT_MODEL_EXIT


class UnsafeLoadError(GraphprofError):
    """Loading a file (a pickled ``.pt``, a YOLO yaml) would execute code from it, and that was not allowed.

    ``allow_unsafe_load=True`` (``--allow-unsafe-load``) allows it, for files the user trusts.
    """

    exit_code = EXIT_UNSAFE_LOAD


class MeasurementError(GraphprofError):
    """A real run failed: out of memory on the device (the batch is named), or the model raised."""

    exit_code = EXIT_MEASUREMENT


def first_line(error: BaseException | str, limit: int | None = None) -> str:
    """The first line of ``error``'s message (``""`` for an empty one), cut at ``limit`` characters: what a
    one-line message quotes of a long error from elsewhere (torch's, a model's).

    >>> first_line(RuntimeError("shape mismatch\n  at layer 3")), first_line("abcdef", limit=3)
    ('shape mismatch', 'abc')
    """
    first = (str(error).splitlines() or [""])[0]
    return first if limit is None else first[:limit]


def one_line(error: BaseException | str, limit: int | None = 300, *, with_type: bool = False) -> str:
    """``error`` on one line, whitespace collapsed; above ``limit`` characters it ends at a word with
    `` ...``, never mid-word. ``with_type`` names an exception's type first (``ValueError: ...``) unless it
    is one of graphprof's own, whose messages are already sentences; an empty message is the type's name.

    >>> one_line(ValueError("bad\\n  shape"), with_type=True), one_line("a b c d", limit=4)
    ('ValueError: bad shape', 'a b ...')
    """
    text = " ".join(str(error).split())
    if isinstance(error, BaseException):
        kind = type(error).__name__
        if not text:
            text = kind
        elif with_type and not isinstance(error, GraphprofError):
            text = f"{kind}: {text}"
    if limit is None or len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."
