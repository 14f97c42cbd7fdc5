"""Cross-check models: graphprof and a reference on the same model object and the same input.

:func:`crosscheck_model` checks one model and raises on failure (the API); :func:`iter_crosschecks`
checks many, one after another or in worker processes, and turns each model's failure into a
:class:`~graphprof.crosscheck.result.CrossCheck` whose ``error`` says why, so one model never stops
the batch. :func:`select_models` turns names, ``--family`` and ``--all`` into the list to check.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Reference
from graphprof.base.guard import guard_user_code
from graphprof.base.inputs import materialize
from graphprof.base.options import parse_shape
from graphprof.crosscheck.compare import compare_counts
from graphprof.crosscheck.conventions import CONVENTIONS
from graphprof.crosscheck.references import REFERENCES
from graphprof.crosscheck.result import CrossCheck
from graphprof.errors import InvalidInputError, one_line
from graphprof.prepared import prepare

__all__ = ["DEFAULT_MODEL", "DEFAULT_TOLERANCE", "crosscheck_model", "select_models", "iter_crosschecks", "crosscheck_models"]

DEFAULT_MODEL = "resnet18"
"""The model checked when none is named (the seed tool's default)."""

DEFAULT_TOLERANCE = 1.0
"""Percent of the reference's count within which a model agrees (after the explained differences)."""


@guard_user_code
def crosscheck_model(
    model: str | nn.Module,
    *,
    against: Reference | str = Reference.FVCORE,
    input_shape: Sequence[int] | str | None = None,
    batch_size: int | None = None,
    example_inputs: Any = None,
    example_kwargs: dict[str, Any] | None = None,
    model_name: str | None = None,
) -> CrossCheck:
    """graphprof's count under ``against``'s convention, and ``against``'s own, on one model and input.

    >>> c = crosscheck_model("resnet18", input_shape=(1, 3, 64, 64))
    >>> c.status().value, [e.name for e in c.explanations()]
    ('agrees', [])

    ``model`` is a name (as :func:`graphprof.profile_model` takes it) or a module with ``input_shape`` or
    ``example_inputs`` / ``example_kwargs``. The model is built once and both counters see the same
    object and the same tensors; it is left as it was found.
    """
    reference = Reference(against)
    convention = CONVENTIONS[reference.value]
    start = time.perf_counter()
    # built with weights on the CPU: the reference counter runs the model for real on the same tensors
    prepared = prepare(
        model, input_shape=input_shape, batch_size=batch_size, example_inputs=example_inputs,
        example_kwargs=example_kwargs, model_name=model_name, device="cpu",
    )  # fmt: skip
    profile = prepared.profile()
    module, args, kwargs = (
        prepared.model,
        materialize(prepared.args, torch.device("cpu")),
        materialize(prepared.kwargs, torch.device("cpu")),
    )
    counts = REFERENCES[reference.value](module, args, kwargs)
    return compare_counts(profile, counts, convention, family=prepared.family, seconds=time.perf_counter() - start)


# --------------------------------------------------------------------------------------------------
# Selecting models


def _split(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for item in names:
        for name in item.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out


def select_models(names: Sequence[str] = (), *, family: str | None = None, all_models: bool = False) -> list[str]:
    """The models to check: ``names`` (each may be a comma list), then every model of ``family``, or every
    model graphprof lists (``all_models``; with ``family``, every model of that family).

    A plain name that is not listed is resolved once here, so a typo fails early with a suggestion
    (:class:`~graphprof.errors.ModelNotFoundError`) instead of in the batch; other specs (``hf:...``,
    ``pkg.mod:factory``, a yaml or checkpoint path) are left to their row. Nothing given: ``[DEFAULT_MODEL]``.

    >>> select_models(["resnet18,resnet50", "resnet18"])
    ['resnet18', 'resnet50']
    """
    from graphprof.models import list_models, resolve_model

    infos = list_models()
    selected = _split(names)
    known = {info.name.lower() for info in infos}
    for name in selected:
        plain = not any(mark in name for mark in (":", "/", "\\", ".yaml", ".yml", ".pt"))
        if plain and name.lower() not in known:
            resolve_model(name)  # raises ModelNotFoundError (with the closest names) for a typo
    if family is not None:
        families = sorted({info.family for info in infos})
        if family not in families:
            raise InvalidInputError(f"unknown family {family!r}; choose from {', '.join(families)}")
        selected += [info.name for info in infos if info.family == family and info.name not in selected]
    elif all_models:
        selected += [info.name for info in infos if info.name not in selected]
    return selected or [DEFAULT_MODEL]


# --------------------------------------------------------------------------------------------------
# Many models


def _check_one(spec: str, against: str, input_shape: tuple[int, ...] | None, batch_size: int | None) -> CrossCheck:
    """One model, its failure turned into a row (the worker function: module-level, so it pickles)."""
    start = time.perf_counter()
    try:
        return crosscheck_model(spec, against=against, input_shape=input_shape, batch_size=batch_size)
    except Exception as exc:  # any failure of one model is that model's row, never the batch's end
        return CrossCheck(model=spec, reference=against, error=one_line(exc, 160, with_type=True), seconds=time.perf_counter() - start)


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def iter_crosschecks(
    models: Sequence[str],
    *,
    against: Reference | str = Reference.FVCORE,
    jobs: int = 1,
    input_shape: Sequence[int] | str | None = None,
    batch_size: int | None = None,
    on_start: Callable[[str], None] | None = None,
) -> Iterator[tuple[int, CrossCheck]]:
    """Check each model; yield ``(index in models, CrossCheck)`` as each one finishes.

    ``jobs > 1`` runs the models in that many worker processes (spawned, each with its share of the CPU
    threads); a model that fails, or whose worker dies, is yielded with its ``error`` set. ``on_start``
    is called with a model's name when it starts (in worker processes: when it is handed to the pool).
    """
    reference = Reference(against).value
    shape = parse_shape(input_shape)
    if jobs < 1:
        raise InvalidInputError(f"jobs must be at least 1, got {jobs}")
    if jobs == 1 or len(models) <= 1:
        for index, spec in enumerate(models):
            if on_start is not None:
                on_start(spec)
            yield index, _check_one(spec, reference, shape, batch_size)
        return

    workers = min(jobs, len(models))
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker, initargs=(threads,)
    )
    try:
        futures: dict[Future[CrossCheck], int] = {}
        for index, spec in enumerate(models):
            futures[pool.submit(_check_one, spec, reference, shape, batch_size)] = index
            if on_start is not None:
                on_start(spec)
        pending = set(futures)
        while pending:
            done, pending = wait_futures(pending, return_when="FIRST_COMPLETED")
            for future in done:
                index = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # the worker died (killed, out of memory): this model's row says so
                    result = CrossCheck(
                        model=models[index], reference=reference, error=f"worker process failed: {one_line(exc, 160, with_type=True)}"
                    )
                yield index, result
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def crosscheck_models(models: Sequence[str], **options: Any) -> list[CrossCheck]:
    """:func:`iter_crosschecks`, collected in the order of ``models``."""
    results: dict[int, CrossCheck] = dict(iter_crosschecks(models, **options))
    return [results[i] for i in range(len(models))]
