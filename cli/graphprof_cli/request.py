"""The main command's options, parsed once into one frozen record (:class:`ProfileRequest`).

``main.py``'s callback builds this record from Click's parsed parameters (:meth:`ProfileRequest.from_params`)
and hands it to the work, :func:`graphprof_cli.profile_run.run_profile`. Torch-free, so ``graphprof --help``
stays quick. (``generate``, ``shard`` and ``fits`` are commands of their own, with their own records.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphprof.base.choices import Capture, Mode, Optimizer, OutputFormat, WarmUp

__all__ = ["CommonOptions", "ProfileRequest"]


@dataclass(frozen=True, kw_only=True)
class CommonOptions:
    """The options every model command shares (declared once in :mod:`graphprof_cli.options`): the shape and
    precision of the run, the device of the estimate, where the result goes and how the report looks."""

    input_shape: str | None = None
    batch_size: int | None = None
    dtype: str | None = None
    hardware: str | None = None
    peak_tflops: float | None = None
    bandwidth_gbs: float | None = None
    output: Path | None = None
    width: int | None = None
    #: --redact: the host left out of the JSON and HTML written
    redact: bool = False
    debug: bool = False


@dataclass(frozen=True)
class ProfileRequest(CommonOptions):
    """Every option of ``graphprof --model X``, as parsed (names as the options', without dashes)."""

    model: str
    mode: Mode = Mode.EVAL
    capture: Capture = Capture.AUTO
    proposals: int | None = None
    showshape: bool = False
    verbose: bool = False
    depth: int | None = None
    top: int = 10
    fmt: OutputFormat | None = None
    allow_unsafe_load: bool = False
    plot: tuple[str, ...] = ()
    measure: bool = False
    device: str | None = None
    iters: int = 50
    warmup: int = 5
    trace: Path | None = None
    learn: bool = True
    optimizer: Optimizer = Optimizer.ADAMW
    graph: Path | None = None
    fvcore: bool = False
    html: Path | None = None
    nodes: str | None = None
    avg_degree: float | None = None
    edges: int | None = None
    warm_up: WarmUp = WarmUp.AUTO
    export_onnx: Path | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ProfileRequest:
        """The request from the main command's parsed parameters (``ctx.params``): the same names, but
        ``--html`` (``html_path``), ``--no-learn`` (``learn``, inverted) and ``--plot`` (a tuple)."""
        from graphprof_cli.common import request_from

        renamed = {
            **params,
            "html": params.get("html_path"),
            "learn": not params.get("no_learn", False),
            "plot": tuple(params.get("plot") or ()),
        }
        return request_from(cls, renamed)

    @property
    def to_stdout(self) -> bool:
        from graphprof.base.atomic import means_stdout

        return self.output is not None and means_stdout(self.output)
