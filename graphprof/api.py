"""The one-call API: ``profile_model`` (one model) and ``compare_models`` (several, side by side).

Both are built on :func:`graphprof.prepare`: resolve model -> warm up -> capture graph -> run with
observers (dry run) -> count cost -> aggregate by module. Classification (roofline) and rendering
consume the :class:`~graphprof.result.Profile` afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from graphprof.errors import GraphprofError
from graphprof.guard import guard_user_code
from graphprof.options import Mode, parse_dtype, parse_mode, parse_shape
from graphprof.prepared import prepare
from graphprof.result import Profile

__all__ = ["Mode", "profile_model", "compare_models", "ModelOutcome", "parse_dtype", "parse_mode", "parse_shape"]


@guard_user_code
def profile_model(
    model: nn.Module | str,
    *,
    input_shape: Sequence[int] | str | None = None,
    example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
    example_kwargs: dict[str, Any] | None = None,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    mode: Mode | str = Mode.EVAL,
    model_name: str | None = None,
    methods: Sequence[str] | None = None,
    allow_unsafe_load: bool = False,
    target: str | None = None,
    proposals: int | None = None,
) -> Profile:
    """Profile a model by name (``"resnet18"``, ``"yolov8n"``, ``"hf:llama"``, ``"pkg.mod:factory"``) or object.

    >>> import graphprof
    >>> p = graphprof.profile_model("resnet18")
    >>> p.total_params, p.capture_method
    (11689512, 'fx.symbolic_trace')

    ``methods`` forces capture methods, tried in order (see :data:`graphprof.capture.METHODS`); by
    default symbolic tracing, then the eager capture (Dynamo only when asked for).

    A model object needs ``input_shape`` (a float input of that shape: a dry run, so nothing is
    allocated and no random numbers are drawn) or ``example_inputs``/``example_kwargs``. The model is
    left exactly as it was found. Equivalent to ``prepare(...).profile()``.

    ``target`` (``"cpu"`` by default, or ``"cuda"``) is the device the costs are for: for ``"cuda"`` the
    dry run records the fused attention kernels a GPU runs (see :mod:`graphprof.lowering`);
    :attr:`Profile.lowering` says which was used.

    ``proposals`` sets a two-stage detector's region proposals per image (a model named from the
    torchvision zoo; default: the model's maximum, which a note states).

    ``allow_unsafe_load=True`` lets a named file run code as it loads (a pickled ``.pt`` unpickled with
    ``weights_only=False``, a YOLO yaml whose fields ultralytics evaluates); only for files you trust.
    """
    return prepare(
        model,
        input_shape=input_shape,
        example_inputs=example_inputs,
        example_kwargs=example_kwargs,
        batch_size=batch_size,
        dtype=dtype,
        mode=mode,
        methods=methods,
        model_name=model_name,
        allow_unsafe_load=allow_unsafe_load,
        target=target,
        proposals=proposals,
    ).profile()


@dataclass(frozen=True)
class ModelOutcome:
    """One model of :func:`compare_models`: its profile, or the error that stopped it."""

    spec: str
    profile: Profile | None
    error: Exception | None

    @property
    def ok(self) -> bool:
        return self.profile is not None


def compare_models(
    models: Sequence[str | nn.Module],
    *,
    on_result: Callable[[ModelOutcome], None] | None = None,
    **options: Any,
) -> list[ModelOutcome]:
    """Profile each model with the same ``options`` (as :func:`profile_model` takes them).

    A model that fails does not stop the others: its :class:`ModelOutcome` holds the error (a
    :class:`~graphprof.errors.GraphprofError` for a mistake graphprof can name, any other exception
    for a bug).
    ``on_result`` is called after each model (a progress display, say).
    """
    outcomes = []
    for outcome in iter_compare(models, **options):
        outcomes.append(outcome)
        if on_result is not None:
            on_result(outcome)
    return outcomes


def iter_compare(models: Sequence[str | nn.Module], **options: Any) -> Iterator[ModelOutcome]:
    """:func:`compare_models` one model at a time."""
    for model in models:
        spec = model if isinstance(model, str) else type(model).__name__
        try:
            yield ModelOutcome(spec, profile_model(model, **options), None)
        except GraphprofError as exc:
            yield ModelOutcome(spec, None, exc)
        except Exception as exc:  # not graphprof's own error: a bug, or the model's code; the others go on
            yield ModelOutcome(spec, None, exc)
