"""``prepare``: resolve, warm up and capture a model once; profile, measure and graph it many times.

:class:`PreparedModel` is a :class:`~graphprof.session.Session` (the floor every pass stands on) with the
passes as methods: :meth:`~PreparedModel.profile` (the dry run, :mod:`graphprof.profile`),
:meth:`~PreparedModel.measure` (a real run, :mod:`graphprof.measure.run`) and
:meth:`~PreparedModel.graph` (:mod:`graphprof.graph.build`). It is the façade at the top: the passes
never import it. :func:`graphprof.profile_model` is ``prepare(...).profile()``; sweeps reuse the same
prepared model.

>>> import graphprof
>>> pm = graphprof.prepare("resnet18")
>>> [pm.profile(batch_size=b).total_macs // 1_000_000 for b in (1, 2)]
[1814, 3628]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from typing_extensions import Unpack

from graphprof.base.choices import Mode
from graphprof.base.collector import full_collections_deferred
from graphprof.base.guard import guard_user_code
from graphprof.base.options import KEEP, ModelOptions, RunSpec
from graphprof.capture.methods import preserved_state
from graphprof.cost.result import Profile
from graphprof.devices.hardware import Hardware
from graphprof.errors import InvalidInputError
from graphprof.graph.build import GraphBuilder
from graphprof.graph.measured import with_measured_times
from graphprof.graph.model import Graph
from graphprof.graph.onnx_export import OnnxExport, export_onnx
from graphprof.measure.result import Measurement
from graphprof.measure.run import MeasureOptions, measure_run
from graphprof.profile import profile_session
from graphprof.run.events import Observer
from graphprof.session import Session, open_session

__all__ = ["PreparedModel", "prepare", "measure_model", "graph_model"]


class PreparedModel(Session):
    """A model resolved, warmed up and captured once, with the passes that run it. See the module docstring.

    Each pass runs the user's model as user code (:func:`graphprof.base.guard.guard_user_code`): a ``sys.exit``
    in its forward is the model's error (:class:`~graphprof.errors.ModelExitError`), never an exit.
    """

    def guard_label(self) -> str:
        return self.name

    def spec(
        self,
        *,
        batch_size: int | None = None,
        input_shape: Sequence[int] | str | None = None,
        seq_len: int | None = None,
        example_inputs: tuple[Any, ...] | list[Any] | torch.Tensor | None = None,
        example_kwargs: dict[str, Any] | None = None,
        dtype: str | torch.dtype | None = KEEP,
        mode: Mode | str | None = None,
    ) -> RunSpec:
        """The :class:`~graphprof.base.options.RunSpec` of these keywords (``dtype``/``mode``: the prepared ones by default).
        A graph model (``pyg:``) has no batch dimension: a batch or an input shape for it is refused, as at :func:`prepare`."""
        from graphprof.models import family_traits

        if family_traits(self.family).graph_input and (batch_size is not None or input_shape is not None):
            raise InvalidInputError(
                f"{self.name} takes a graph: set its size with num_nodes/avg_degree when preparing it, not a batch or an input shape"
            )
        return RunSpec.of(
            batch_size=batch_size, input_shape=input_shape, seq_len=seq_len, example_inputs=example_inputs,
            example_kwargs=example_kwargs, dtype=dtype, mode=mode,
        )  # fmt: skip

    @guard_user_code
    def run(self, observers: Sequence[Observer], spec: RunSpec | None = None, **options: Any) -> Any:
        """One dry run (or real run, where the model needs values) with ``observers`` riding along.

        The inputs are ``spec``'s, or the keywords of :meth:`spec`. The model is left as found."""
        return super().run(observers, spec or self.spec(**options))

    @guard_user_code
    @full_collections_deferred()
    def profile(self, *, observers: Sequence[Observer] = (), **options: Any) -> Profile:
        """The cost of one forward (and, in train mode, backward) pass at these inputs: a :class:`Profile`.

        With no argument, the inputs of :func:`prepare`. ``batch_size`` / ``input_shape`` / ``seq_len``
        derive inputs of another size (:meth:`inputs`); ``dtype`` and ``mode`` default to the prepared
        ones (the keywords of :meth:`spec`). ``observers`` ride along on the run.
        """
        return profile_session(self, self.spec(**options), observers)

    @guard_user_code
    def measure(
        self,
        *,
        device: str | torch.device | None = None,
        iters: int = 50,
        warmup: int = 5,
        layer_runs: int = 3,
        trace_dir: str | Path | None = None,
        optimizer: str = "adamw",
        breakdown: bool = True,
        seed: int = 0,
        dtype: Any = None,
        **inputs: Any,
    ) -> Measurement:
        """A real run on a device (CUDA when present): a :class:`~graphprof.measure.Measurement`.

        ``inputs`` are the keywords of :meth:`spec` (``batch_size``, ``mode``, ...); ``dtype=None`` keeps
        the prepared dtype. See :func:`graphprof.measure.run.measure_run`. The model is left as found.
        """
        spec = self.spec(dtype=KEEP if dtype is None else dtype, **inputs)
        call = self.resolve(spec)
        activations = profile_session(self, spec).peak_activation_bytes  # a dry run: does the real one fit?
        options = MeasureOptions(device, iters, warmup, layer_runs, trace_dir, optimizer, breakdown, seed, activations)
        return measure_run(self.model, call.args, call.kwargs, name=self.name, train=call.train, dtype=call.dtype, options=options)

    @guard_user_code
    def graph(
        self,
        *,
        depth: int | None = None,
        hardware: Hardware | None = None,
        detail: bool = True,
        measurement: Measurement | None = None,
        **options: Any,
    ) -> tuple[Graph, Graph | None]:
        """The module graph and (with ``detail``) the operator graph of one run: ``(Graph, Graph | None)``.

        ``depth`` folds module-graph nodes into their module at that depth; ``hardware`` adds roofline
        estimates; ``measurement`` (from :meth:`measure`) adds each node's measured time; ``options`` as
        for :meth:`spec`.
        """
        builder = GraphBuilder(depth=depth, hardware=hardware, detail=detail)
        self.run([builder], self.spec(**options))
        module_graph, detail_graph = builder.module_graph(self.name), builder.detail_graph(self.name)
        if measurement is not None:
            module_graph = with_measured_times(module_graph, measurement)
            detail_graph = with_measured_times(detail_graph, measurement) if detail_graph is not None else None
        return module_graph, detail_graph

    @guard_user_code
    def export_onnx(self, path: str | Path, profile: Profile | None = None) -> OnnxExport:
        """Write the model to the ONNX file ``path`` through ``torch.onnx`` (the ``onnx`` extra), at the
        prepared inputs, with the graph's op counts checked against ``profile`` (by default the prepared
        inputs' profile): :func:`graphprof.graph.onnx_export.export_onnx`. Needs a model with weights
        (``prepare(..., device="cpu")`` for a named model)."""
        with preserved_state(self.model):
            return export_onnx(self.model, self.args, self.kwargs, path, profile if profile is not None else self.profile())


@guard_user_code
@full_collections_deferred()  # the process's full collection is not this dry run's (graphprof.base.collector)
def prepare(model_or_name: nn.Module | str, **options: Unpack[ModelOptions]) -> PreparedModel:
    """Resolve (build) a model, warm it up and capture it once; see :class:`PreparedModel`.

    ``model_or_name`` is a name (``"resnet18"``, ``"yolov8n"``, ``"hf:llama"``, ``"pkg.mod:factory"``)
    or an ``nn.Module`` with ``input_shape`` or ``example_inputs``/``example_kwargs`` (the keywords are
    :class:`~graphprof.base.options.ModelOptions`; ``batch_size``, ``dtype`` and ``mode`` as for
    :meth:`PreparedModel.spec`, ``model_name`` to name a module object). Named models are
    built on the meta device when the family allows it; ``device="cpu"`` builds them with weights
    (what a real run or a reference counter needs). ``methods`` forces capture methods, tried in order.
    ``allow_unsafe_load=True`` lets a named file run code as it loads, and ``target="cuda"`` costs the
    fused kernels a GPU runs (see :func:`graphprof.profile_model`). ``proposals`` sets a two-stage
    detector's region proposals per image (a model named from the torchvision zoo). ``warm_up``
    (:class:`~graphprof.base.choices.WarmUp`: ``"auto"``, ``"always"``, ``"never"``) says when one real
    forward runs before the capture: by default only for a model that initialises state lazily.
    The user's model is left exactly as it was found.
    """
    return open_session(model_or_name, cls=PreparedModel, **options)


def measure_model(model_or_name: nn.Module | str, *, iters: int = 50, warmup: int = 5, **options: Unpack[ModelOptions]) -> Measurement:
    """A real run of a model: ``prepare(model_or_name, **options).measure(device=..., iters=..., warmup=...)``.

    ``device`` is where the model runs (CUDA when present, else the CPU); a named model is built there
    with weights (a real run needs values). :meth:`PreparedModel.measure` has the other knobs.

    >>> m = measure_model("resnet18", iters=5, warmup=1)     # doctest: +SKIP
    >>> m.forward.mean_ms, m.memory.peak_bytes                # doctest: +SKIP
    """
    device = options.get("device")
    if isinstance(model_or_name, str) and device is None:
        options["device"] = "cpu"
    return prepare(model_or_name, **options).measure(device=device, iters=iters, warmup=warmup)


def graph_model(
    model_or_name: nn.Module | str,
    *,
    depth: int | None = None,
    hardware: Hardware | None = None,
    detail: bool = True,
    **options: Unpack[ModelOptions],
) -> tuple[Graph, Graph | None]:
    """The module graph and (with ``detail``) the operator graph of a model, on one dry run:
    ``prepare(model_or_name, **options).graph(depth=..., hardware=..., detail=...)``.

    >>> module_graph, op_graph = graph_model("resnet18")
    >>> len(module_graph.edges) > 0, op_graph is not None
    (True, True)
    """
    return prepare(model_or_name, **options).graph(depth=depth, hardware=hardware, detail=detail)
