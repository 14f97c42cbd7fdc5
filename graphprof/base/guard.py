"""The boundary around the user's code: exits become errors, and deep models get the frames they need.

Everything graphprof runs on a user's behalf (a factory, a model's ``forward``, a checkpoint's classes)
runs inside :func:`user_code`, which

- turns ``SystemExit`` (``sys.exit`` in a factory or a forward) and any other ``BaseException`` but
  ``KeyboardInterrupt`` into :class:`~graphprof.errors.ModelExitError`, naming the user's file and line,
  so one model's exit never ends a ``compare`` or ``validate`` silently, and never with its own code;
- gives Python :data:`RECURSION_LIMIT` frames (restored after): PyTorch runs a module nested ``d`` deep
  in about ``4 d`` frames, and the dry run adds a few per level (fx's tracer, module hooks, the
  FakeTensor dispatch), so a model PyTorch runs 200 deep needs more than Python's default 1000;
- turns running out of those frames (``RecursionError``) into one clear :class:`ModelBuildError`;
- puts the caller's global (CPU) RNG state back: building a model draws its random weights from it;
- puts back the environment variables PyTorch sets for itself (:data:`TORCH_SETS`: its compiler's cache
  folder is written into ``os.environ`` the first time it is asked for it), so the caller's environment is
  as it was.

graphprof's own passes (aggregate, names, render) are iterative; the frames go to PyTorch's recursive
module calls (``named_modules``, ``train``, ``_call_impl``) and to the user's ``forward``.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from graphprof.errors import GraphprofError, ModelBuildError, ModelExitError, one_line

__all__ = ["RECURSION_LIMIT", "TORCH_SETS", "user_code", "guard_user_code", "describe_exit"]

#: Environment variables PyTorch writes into ``os.environ`` on its own (``torch._inductor``'s ``cache_dir()``
#: sets ``TORCHINDUCTOR_CACHE_DIR``, Triton's ``TRITON_CACHE_DIR``); :func:`user_code` puts them back.
TORCH_SETS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

RECURSION_LIMIT = 4000
"""Python frames allowed while the user's code runs (Python's default is 1000)."""

P = ParamSpec("P")
R = TypeVar("R")


def _where(exc: BaseException) -> str:
    """`` at path/to/file.py:12 (in make)`` for the innermost Python frame that raised ``exc``, or ``""``."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if not frames:
        return ""
    last = frames[-1]
    return f" at {last.filename}:{last.lineno} (in {last.name})"


def describe_exit(exc: BaseException) -> str:
    """``called sys.exit(3) at mod.py:4 (in make)``, or ``raised GeneratorExit: ... at ...``."""
    if isinstance(exc, SystemExit):
        code = exc.code
        what = "called sys.exit()" if code is None else f"called sys.exit({code!r})"
    else:
        text = one_line(str(exc), None)
        what = f"raised {type(exc).__name__}" + (f": {text}" if text else "")
    return what + _where(exc)


def _recursion_in(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, RecursionError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run the block as the user's code for the model ``what`` (see the module docstring)."""
    import torch

    previous = sys.getrecursionlimit()
    raised = previous < RECURSION_LIMIT
    if raised:
        sys.setrecursionlimit(RECURSION_LIMIT)
    rng = torch.get_rng_state()  # building a model initialises weights from the global RNG: the caller's is put back
    environment = {name: os.environ.get(name) for name in TORCH_SETS}
    try:
        yield
    except KeyboardInterrupt:
        raise
    except (ModelExitError, RecursionError, GraphprofError) as exc:
        if isinstance(exc, ModelExitError) or not _recursion_in(exc):
            raise
        raise ModelBuildError(
            f"{what} is nested too deeply: Python's limit of {sys.getrecursionlimit()} frames was reached while building or running it"
        ) from exc
    except Exception:
        raise
    except BaseException as exc:  # SystemExit, GeneratorExit, ...: the model's own end, reported as its error
        raise ModelExitError(f"{what} {describe_exit(exc)}; graphprof reports this as the model's error") from exc
    finally:
        torch.set_rng_state(rng)
        _restore(environment)
        if raised and sys.getrecursionlimit() == RECURSION_LIMIT:
            sys.setrecursionlimit(previous)


def _restore(environment: dict[str, str | None]) -> None:
    """Each variable of ``environment`` as it was: unset again, or its old value."""
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _model_label(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    model = args[0] if args else kwargs.get("model", kwargs.get("spec"))
    if isinstance(model, str):
        return model
    label = getattr(type(model), "guard_label", None)  # a method's self that names its model (PreparedModel, Profiler)
    if callable(label):
        return str(label(model))
    return type(model).__name__ if model is not None else "the model"


def guard_user_code(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a public entry point whose first argument is the model (a spec or an ``nn.Module``)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with user_code(_model_label(args, kwargs)):
            return fn(*args, **kwargs)

    return wrapper
