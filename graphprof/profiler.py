"""``Profiler``: the edge profiler's API (seed 000) on graphprof's run loop, above :func:`graphprof.prepare`.

Wrap a model, run ``profile_once`` (module graph) and ``profile_detail`` (operator graph), ``export``
the text files, and keep calling the wrapper like the model. Each pass is one dry run on FakeTensors
through :func:`graphprof.prepare` (meta weights work; real weights are never changed), with a
:class:`~graphprof.graph.build.GraphBuilder` riding along. Nothing is attached to the user's modules:
the run loop's hooks are global and removed when the run ends, so nothing is left behind.

Example (the edge profiler's ResNet18 walk-through with the import changed)::

    >>> import torch, torchvision
    >>> from graphprof import Profiler
    >>> prof = Profiler(torchvision.models.resnet18().eval(), granularity="layer", auto_profile=False)
    >>> g = prof.profile_once(torch.randn(1, 3, 224, 224))
    >>> g.summary()["edges"]
    77
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from graphprof.base.atomic import write_atomic
from graphprof.base.guard import guard_user_code
from graphprof.devices.hardware import Hardware
from graphprof.errors import InvalidInputError
from graphprof.graph.build import GraphBuilder
from graphprof.graph.export import check_paths, text_paths, to_text
from graphprof.graph.measured import with_measured_times
from graphprof.graph.model import Graph
from graphprof.prepared import prepare

__all__ = ["Profiler", "GRANULARITIES"]

GRANULARITIES = ("module", "layer")


class Profiler(nn.Module):
    """Wraps ``model``; builds its module graph and operator graph on dry runs.

    ``granularity``: ``"layer"`` makes every layer a node (each leaf module call and each Python-level
    function such as a residual ``add``); ``"module"`` groups them by the model's top-level submodules,
    as the edge profiler does (``depth=1``: ``layer1``); ``depth`` chooses another level
    (``depth=2``: ``layer1.0``).
    ``token_kwarg`` names the keyword argument that carries the tokens (``input_ids``); it must be
    passed to each pass. ``auto_profile`` builds the module graph on the first call of the wrapper;
    ``capture_ops`` builds the operator graph in that same pass. ``hardware`` adds roofline time
    estimates to the nodes. ``measure`` also runs the model for real in each pass and puts the measured
    times on the nodes of the graph it builds (:mod:`graphprof.graph.measured`); by default it does so
    when the weights are real, not on the meta device, as the edge profiler reports forward times; the
    last such run is kept as ``measurement`` (its ``instrumented_forward`` is the forward the node times
    come from, and they sum to it less the model's own Python between its layers).

    The wrapper is an ``nn.Module`` so it can replace a submodule (``model.model = Profiler(model.model)``);
    the wrapped model is its child ``model`` and is otherwise untouched.
    """

    def __init__(
        self,
        model: nn.Module,
        granularity: str = "module",
        token_kwarg: str | None = None,
        auto_profile: bool = True,
        capture_ops: bool = False,
        *,
        depth: int | None = None,
        hardware: Hardware | None = None,
        measure: bool | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise InvalidInputError(f"Profiler wraps a torch.nn.Module, got {type(model).__name__}")
        if granularity not in GRANULARITIES:
            raise InvalidInputError(f"granularity must be one of {', '.join(GRANULARITIES)}, got {granularity!r}")
        if depth is not None and (granularity == "layer" or depth < 1):
            raise InvalidInputError("depth folds a module graph: use granularity='module' and a depth of at least 1")
        super().__init__()
        self.model = model
        self.granularity = granularity
        self.token_kwarg = token_kwarg
        self.auto_profile = auto_profile
        self.capture_ops = capture_ops
        self.depth = depth if depth is not None or granularity == "layer" else 1
        self.hardware = hardware
        self.measure = measure
        self.graph: Graph | None = None
        self.detail_graph: Graph | None = None
        self.measurement: Any = None  # the last pass's real run (a graphprof.measure.Measurement), if it ran one

    def guard_label(self) -> str:
        return type(self.model).__name__

    # ---- passes ------------------------------------------------------------------------------------
    def _pass(self, detail: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[GraphBuilder, Any]:
        if self.token_kwarg is not None and self.token_kwarg not in kwargs:
            given = ", ".join(kwargs) or "none"
            raise InvalidInputError(f"token_kwarg {self.token_kwarg!r} is not among the keyword arguments (given: {given})")
        builder = GraphBuilder(depth=self.depth, hardware=self.hardware, detail=detail)
        prepared = prepare(self.model, example_inputs=args, example_kwargs=kwargs, model_name=type(self.model).__name__)
        prepared.run([builder])
        return builder, prepared

    def _measurement(self, prepared: Any) -> Any:
        """A real run timing every layer and op, when this profiler measures (``measure``, or by default
        real weights); ``None`` otherwise. One per pass: the inputs may differ between passes."""
        weights = [*self.model.parameters(), *self.model.buffers()]
        device = weights[0].device if weights else torch.device("cpu")
        if not (self.measure or (self.measure is None and device.type != "meta")):
            return None
        self.measurement = prepared.measure(device=device, iters=10, warmup=2, layer_runs=1, breakdown=False)
        return self.measurement

    @guard_user_code
    def profile_once(self, *args: Any, **kwargs: Any) -> Graph:
        """One dry run: the module graph (and the operator graph too with ``capture_ops``); with
        ``measure``, a real run that times each node too."""
        builder, prepared = self._pass(self.capture_ops, args, kwargs)
        name = type(self.model).__name__
        graph, detail = builder.module_graph(name), builder.detail_graph(name) if self.capture_ops else None
        measurement = self._measurement(prepared)
        if measurement is not None:
            graph = with_measured_times(graph, measurement)
            detail = with_measured_times(detail, measurement) if detail is not None else None
        self.graph = graph
        if self.capture_ops:
            self.detail_graph = detail
        return self.graph

    @guard_user_code
    def profile_detail(self, *args: Any, **kwargs: Any) -> Graph:
        """One more dry run: the operator graph (views, metadata and scalar reads are not nodes); with
        ``measure``, a real run that times each node too."""
        builder, prepared = self._pass(True, args, kwargs)
        name = type(self.model).__name__
        graph = builder.detail_graph(name)
        assert graph is not None
        if self.graph is None:
            self.graph = builder.module_graph(name)
        measurement = self._measurement(prepared)
        self.detail_graph = with_measured_times(graph, measurement) if measurement is not None else graph
        return self.detail_graph

    def get_graphs(self) -> dict[str, Graph | None]:
        """``{"module_graph": ..., "detail_graph": ... or None}``."""
        return {"module_graph": self.graph, "detail_graph": self.detail_graph}

    # ---- export ------------------------------------------------------------------------------------
    def export(
        self,
        base_path: str | Path,
        module_include_edges: bool = True,
        detail_include_edges: bool = True,
        include_stats: bool = True,
        overwrite_module: bool = False,
    ) -> list[Path]:
        """Write ``<base>_module.txt`` and, once there is a detail graph, ``<base>_detail.txt``.

        An existing module file is replaced only with ``overwrite_module=True``; otherwise it is kept as
        it is (the edge profiler's second export, of the detail graph, leaves the first one's module file
        alone) and only the detail file is written. The detail file is rewritten on each export. Every
        path is checked first: a missing directory or a file in the way raises :class:`OutputError` and
        nothing is written. Returns the files written.
        """
        if not isinstance(base_path, (str, os.PathLike)) or not str(base_path).strip():
            raise InvalidInputError(
                f"export needs a base path, a str or Path, not {base_path!r:.40} (the files are <base>_module.txt and <base>_detail.txt)"
            )
        if self.graph is None:
            raise InvalidInputError("nothing to export yet: call profile_once (or profile_detail) first")
        module_path, detail_path = text_paths(base_path)
        module_text = to_text(self.graph, include_edges=module_include_edges, include_stats=include_stats)
        write_module = overwrite_module or not module_path.exists()
        targets = [module_path] if write_module else []
        detail_text = None
        if self.detail_graph is not None:
            detail_text = to_text(self.detail_graph, include_edges=detail_include_edges, include_stats=include_stats)
            targets.append(detail_path)
        check_paths(targets, overwrite=True)
        if write_module:
            write_atomic(module_path, module_text)
        if detail_text is not None:
            write_atomic(detail_path, detail_text)
        return targets

    # ---- the model itself --------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped model's forward; with ``auto_profile`` the first call builds the graph first."""
        if self.auto_profile and self.graph is None:
            self.profile_once(*args, **kwargs)
        return self.model(*args, **kwargs)
