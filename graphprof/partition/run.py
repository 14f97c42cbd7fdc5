"""Run a split for real: ``torch.distributed.pipelining`` on local ``gloo`` processes, one per stage.

Each process gets a copy of the model (pickled to it; the user's model is never touched), splits it with
``pipeline(model, micro-batch inputs, split_spec={unit: SplitPoint.BEGINNING})`` (a ``torch.export``
trace, cut before each split point; its stages run their compiled code, see :func:`_compiled_stages`),
builds its own stage (``Pipe.build_stage``) and runs the
``ScheduleGPipe`` forward (no loss, so no backward) on the whole batch, split into micro-batches. The
processes talk over TCP on 127.0.0.1 only.

Figures, per timed step (after ``warmup`` untimed ones), medians over ``iters`` steps:

* **per stage, pipelined**: the stage module's own forward time per micro-batch while the pipeline runs
  (hooks around the stage's module, so receiving and sending are excluded);
* **per stage, alone**: the same forward on the same micro-batch with the other stages idle (each
  process in turn, between barriers): what the plan's per-stage compute predicts, free of the other
  stages competing for the cores. On a machine with fewer free cores than stages the two differ;
* **end to end**: from a barrier to the last stage's output, for the whole batch; throughput is
  ``batch / step``. GPipe's step takes about ``sum(stage) + (micro-batches - 1) x max(stage)``.

Each stage's process first brings its C heap to the state graphprof's own timings start from
(:func:`graphprof.measure.heap.settle_malloc`): the stage times the plan predicts come from such timings,
and a fresh process that has not freed a large block yet serves every activation of a few MiB from
freshly faulted pages (resnet50 on ``cpu:2`` here: the first stage, whose activations are the largest,
ran 1.17-1.22x its prediction alone without it, 0.92-0.96x with it, for the plan's split and the equal one).

The last stage's output is checked against the unsplit model's output on the same batch (``rtol``,
``atol``). Times here are taken on a shared machine: the processes compete for its cores.
"""

from __future__ import annotations

import contextlib
import copy
import os
import queue
import socket
import statistics
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from graphprof.base.atomic import sigterm_raises
from graphprof.base.inputs import materialize
from graphprof.base.limits import format_bytes, require_count, require_fits
from graphprof.errors import InvalidInputError, MeasurementError
from graphprof.measure.heap import settle_malloc
from graphprof.prepared import PreparedModel

__all__ = ["StageRun", "PipelineRun", "run_split", "step_prediction"]

_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class StageRun:
    """One stage's measured forward per micro-batch (median, seconds), beside its prediction."""

    index: int
    first: str
    measured_s: float
    alone_s: float
    predicted_s: float | None = None

    @property
    def ratio(self) -> float | None:
        """Measured (pipelined) over predicted (1.0: exact)."""
        return None if not self.predicted_s else self.measured_s / self.predicted_s

    @property
    def alone_ratio(self) -> float | None:
        """Measured alone over predicted (1.0: exact)."""
        return None if not self.predicted_s else self.alone_s / self.predicted_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "first": self.first, "measured_s": self.measured_s, "alone_s": self.alone_s,
            "predicted_s": self.predicted_s, "ratio": self.ratio, "alone_ratio": self.alone_ratio,
        }  # fmt: skip


@dataclass(frozen=True)
class PipelineRun:
    """A measured run of one split (see the module docstring)."""

    model_name: str
    split_points: tuple[str, ...]
    batch: int
    micro_batches: int
    threads: int
    iters: int
    stages: tuple[StageRun, ...]
    step_s: float
    step_spread_s: tuple[float, float]
    predicted_step_s: float | None
    max_abs_error: float
    matches: bool
    tolerance: tuple[float, float]
    load: tuple[float, float, float]

    @property
    def throughput(self) -> float:
        """Measured samples per second: the batch over the median step."""
        return self.batch / self.step_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_name, "split_points": list(self.split_points), "batch": self.batch,
            "micro_batches": self.micro_batches, "threads_per_stage": self.threads, "iters": self.iters,
            "stages": [s.to_dict() for s in self.stages], "step_s": self.step_s, "step_min_max_s": list(self.step_spread_s),
            "predicted_step_s": self.predicted_step_s, "throughput_per_s": self.throughput,
            "max_abs_error": self.max_abs_error, "matches_unsplit": self.matches,
            "rtol_atol": list(self.tolerance), "loadavg": list(self.load),
            "measured": "wall-clock on this machine, shared with other work; medians over iters steps",
        }  # fmt: skip


def step_prediction(stage_seconds: Sequence[float], micro_batches: int) -> float:
    """GPipe's forward step from per-micro-batch stage times: the first micro-batch through every stage,
    then one more leaving every slowest-stage time: ``sum + (m - 1) x max``."""
    return sum(stage_seconds) + (micro_batches - 1) * max(stage_seconds)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chunk(value: Any, micro_batches: int) -> Any:
    return torch.utils._pytree.tree_map(lambda t: t.chunk(micro_batches)[0] if isinstance(t, torch.Tensor) else t, value)


@dataclass(frozen=True)
class _Job:
    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    split_points: tuple[str, ...]
    micro_batches: int
    iters: int
    warmup: int
    threads: int
    address: str


def _compiled_stages() -> Any:
    """Stages that run their generated Python code rather than ``torch.fx.Interpreter`` node by node.

    ``pipeline()`` unflattens each stage into ``InterpreterModule``s, which by default interpret their
    graph; torch's own switch (``torch.export.unflatten._disable_interpreter``, private, hence the
    fallback) makes them call the same graph's compiled ``forward``: the same ops, without ~70% of
    Python overhead on a small LLaMA's decoder layers on this CPU (18.0 ms against 10.9 ms per stage).
    """
    try:
        from torch.export.unflatten import _disable_interpreter
    except ImportError:  # pragma: no cover - another torch: the interpreter it is
        return contextlib.nullcontext()
    return _disable_interpreter()


def _alone(module: nn.Module, inputs: tuple[tuple[Any, ...], dict[str, Any]], rank: int, world: int, iters: int) -> float:
    """Median forward of this stage on one micro-batch while the other stages wait at a barrier."""
    import torch.distributed as dist

    times = []
    for turn in range(world):
        dist.barrier()
        if turn == rank:
            module(*inputs[0], **inputs[1])  # warm
            for _ in range(iters):
                start = time.perf_counter()
                module(*inputs[0], **inputs[1])
                times.append(time.perf_counter() - start)
    dist.barrier()
    return statistics.median(times)


def _register_attention(model: Any) -> None:
    """An ``hf:`` model's attention function, registered with transformers in this stage's process too (a
    fresh process knows only transformers' own; the model, pickled to it, names graphprof's)."""
    from graphprof.models.hf_attention import ATTENTION, register_attention

    if getattr(getattr(model, "config", None), "_attn_implementation", None) == ATTENTION:
        register_attention()


def _stage_loop(job: _Job, rank: int, world: int) -> tuple[list[float], list[float], float, Any]:
    """Build this rank's stage and run the schedule; step times, stage forward times (pipelined, alone), the last output."""
    import torch.distributed as dist
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    spec = {name: SplitPoint.BEGINNING for name in job.split_points}
    _register_attention(job.model)
    with _compiled_stages():
        pipe = pipeline(job.model, _chunk(job.args, job.micro_batches), _chunk(job.kwargs, job.micro_batches), split_spec=spec)
    if pipe.num_stages != world:
        raise InvalidInputError(f"the split made {pipe.num_stages} stages, not {world}: a split point is not a module call of the forward")
    stage = pipe.build_stage(rank, torch.device("cpu"))
    forward: list[float] = []
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    module = stage.submod

    def entered(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        forward.append(-time.perf_counter())
        if not seen:
            seen.append((args, kwargs))

    module.register_forward_pre_hook(entered, with_kwargs=True)
    module.register_forward_hook(lambda *_: forward.__setitem__(-1, forward[-1] + time.perf_counter()))
    schedule = ScheduleGPipe(stage, job.micro_batches)
    steps, output = [], None
    with torch.no_grad():
        for i in range(job.warmup + job.iters):
            if i == job.warmup:
                forward.clear()
            dist.barrier()
            start = time.perf_counter()
            output = schedule.step(*job.args, **job.kwargs) if rank == 0 else schedule.step()
            dist.barrier()  # the step ends when the last stage has its output
            if i >= job.warmup:
                steps.append(time.perf_counter() - start)
        pipelined = list(forward)
        alone = _alone(module, seen[0], rank, world, job.iters)
    if rank != world - 1:
        return steps, pipelined, alone, None
    # sent by value (numpy): a tensor on the queue would be shared by file descriptor, gone when this process ends
    return steps, pipelined, alone, _first_tensor(output).detach().numpy()


def _end_with_parent(parent: int) -> None:
    """In a stage's process: end it as soon as ``parent`` is gone (SIGKILL leaves no time to terminate the
    stages), so that no process, and no port it listens on, outlives the run. Linux ends it at once
    (``PR_SET_PDEATHSIG``); everywhere, a daemon thread checks the parent twice a second."""
    import ctypes
    import signal
    import threading

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # gone before the watch began
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="graphprof-parent-watch", daemon=True).start()


def _worker(rank: int, world: int, job: _Job, results: Any, parent: int) -> None:
    """One process: join the group, run its stage, put ``(rank, steps, forward, output)`` or an error."""
    import torch.distributed as dist

    _end_with_parent(parent)
    torch.set_num_threads(job.threads)
    settle_malloc()  # the heap as graphprof's own timings leave it, which the plan's measured or predicted stage times assume
    try:
        dist.init_process_group("gloo", init_method=job.address, rank=rank, world_size=world)
        try:
            results.put((rank, *_stage_loop(job, rank, world)))
        finally:
            dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it as one line
        results.put((rank, "error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)))


def _collect(processes: Sequence[Any], results: Any, world: int) -> dict[int, tuple[Any, ...]]:
    got: dict[int, tuple[Any, ...]] = {}
    deadline = time.monotonic() + _TIMEOUT_S
    while len(got) < world:
        try:
            item = results.get(timeout=1.0)
        except queue.Empty:
            if time.monotonic() > deadline or any(p.exitcode not in (None, 0) for p in processes):
                break
            continue
        if item[1] == "error":
            raise MeasurementError(_root_cause(item, results))
        got[item[0]] = item
    if len(got) < world:
        codes = {i: p.exitcode for i, p in enumerate(processes)}
        raise MeasurementError(f"pipeline run did not finish (process exit codes {codes})")
    return got


def _root_cause(first: tuple[Any, ...], results: Any) -> str:
    """One line for the failure: a stage's own error rather than its peers' broken connections."""
    errors = [first]
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            item = results.get(timeout=0.5)
        except queue.Empty:
            continue
        if item[1] == "error":
            errors.append(item)
    own = [e for e in errors if "Connection reset" not in e[2] and "Connection closed" not in e[2]] or errors
    rank, _, message = own[0][:3]
    return f"pipeline stage {rank} failed: {' '.join(message.split())[:400]}"


def _spawn(job: _Job, world: int) -> dict[int, tuple[Any, ...]]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    processes = [ctx.Process(target=_worker, args=(rank, world, job, results, os.getpid()), daemon=True) for rank in range(world)]
    with sigterm_raises("the pipeline run was ended by SIGTERM", MeasurementError):  # SIGTERM: the stages end first
        for p in processes:
            p.start()
        try:
            return _collect(processes, results, world)
        except BaseException:  # Ctrl-C, SIGTERM or a stage's failure: end every stage now, not after a join's timeout
            for p in processes:
                if p.pid is not None:
                    p.terminate()
            raise
        finally:
            for p in processes:
                if p.pid is not None:
                    p.join(timeout=30)
                    if p.is_alive():
                        p.kill()
                        p.join(timeout=5)


def _first_tensor(value: Any) -> torch.Tensor:
    for leaf in tree_leaves(value if not hasattr(value, "to_tuple") else value.to_tuple()):
        if isinstance(leaf, torch.Tensor):
            return leaf
    raise MeasurementError("the model's output holds no tensor to compare")


#: The most micro-batches one step of a run may hold (a pipeline of that depth is already all fill).
MAX_MICRO_BATCHES = 1024


def check_run_options(*, micro_batches: int, iters: int, threads: int, stages: int = 1) -> None:
    """Refuse a run this machine cannot hold: every figure a whole number, and the processes (one per
    stage) and the threads in each no more than its cores (``os.cpu_count()``)."""
    cores = os.cpu_count() or 1
    require_count(micro_batches, "micro-batches", high=MAX_MICRO_BATCHES)
    require_count(iters, "iterations", high=10**6)
    require_count(threads, "threads per process", high=cores)
    if stages > cores:
        raise InvalidInputError(
            f"the plan has {stages} stages, one process each, and this machine has {cores} cores; name fewer cpu devices"
        )


#: Copies of the weights one stage's process holds at its peak: the model unpickled, and the exported
#: program ``pipeline()`` traces and splits it into (its stage modules carry the weights again).
_COPIES_PER_STAGE = 2


def _require_copies_fit(model: nn.Module, stages: int) -> None:
    """Before any process starts: every stage's process holds the whole model while it traces it (and the
    parent its own copy and the user's), so a large model over a few stages is refused while it would not fit
    (``hf:t5-base`` over two stages went past 6 GB)."""
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()) if not t.is_meta)
    need = weights * (stages * _COPIES_PER_STAGE + 2)
    require_fits(need, f"--run over {stages} stages, each process tracing the whole model ({format_bytes(weights)} of weights)")


def _tensor_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tree_leaves(value) if isinstance(t, torch.Tensor))


def run_split(
    prepared: PreparedModel,
    split_points: Sequence[str],
    *,
    micro_batches: int = 4,
    iters: int = 5,
    warmup: int = 1,
    threads: int = 1,
    predicted: Sequence[float] | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-4,
) -> PipelineRun:
    """Run ``prepared`` split before each of ``split_points`` (one process per stage); see the module docstring.

    The whole batch is ``micro_batches`` times the prepared batch; ``predicted`` are the plan's
    per-stage seconds per micro-batch (compute only) to set beside the measured ones.
    """
    if prepared.device.type != "cpu":
        raise InvalidInputError(f"running a split needs the model's weights on the CPU; {prepared.name} is on {prepared.device.type}")
    check_run_options(micro_batches=micro_batches, iters=iters, threads=threads, stages=len(split_points) + 1)
    batch = micro_batches * _batch_of(prepared)
    args, kwargs = prepared.inputs(batch_size=batch)
    require_fits(_tensor_bytes((args, kwargs)), f"--micro-batches {micro_batches}: a batch of {batch}")
    _require_copies_fit(prepared.model, len(split_points) + 1)
    args, kwargs = materialize(args, torch.device("cpu")), materialize(kwargs, torch.device("cpu"))
    # the stages get a copy: torch.multiprocessing moves a tensor it sends into shared memory, where the
    # stages' own updates (a train-mode BatchNorm's running statistics) would reach the user's model
    model = copy.deepcopy(prepared.model)
    with torch.no_grad():
        model.eval()
        reference = _first_tensor(model(*args, **kwargs))
    job = _Job(model, args, kwargs, tuple(split_points), micro_batches, iters, warmup, threads, f"tcp://127.0.0.1:{_free_port()}")
    got = _spawn(job, len(split_points) + 1)
    return _report(prepared.name, job, got, reference, predicted, batch, (rtol, atol))


def _batch_of(prepared: PreparedModel) -> int:
    first = next((t for t in tree_leaves((prepared.args, prepared.kwargs)) if isinstance(t, torch.Tensor)), None)
    return int(first.shape[0]) if first is not None and first.dim() else 1


def _report(
    name: str,
    job: _Job,
    got: dict[int, tuple[Any, ...]],
    reference: torch.Tensor,
    predicted: Sequence[float] | None,
    batch: int,
    tol: tuple[float, float],
) -> PipelineRun:
    world = len(got)
    output = torch.from_numpy(got[world - 1][4])
    error = float((output.float() - reference.float()).abs().max()) if output.shape == reference.shape else float("inf")
    matches = output.shape == reference.shape and bool(torch.allclose(output, reference, rtol=tol[0], atol=tol[1]))
    steps = [max(got[r][1][i] for r in range(world)) for i in range(job.iters)]
    firsts = ("(start)", *job.split_points)
    stages = tuple(
        StageRun(r, firsts[r], statistics.median(got[r][2]), got[r][3], None if predicted is None else predicted[r]) for r in range(world)
    )
    predicted_step = step_prediction(predicted, job.micro_batches) if predicted is not None else None
    return PipelineRun(
        name, job.split_points, batch, job.micro_batches, job.threads, job.iters, stages, statistics.median(steps),
        (min(steps), max(steps)), predicted_step, error, matches, tol, os.getloadavg(),
    )  # fmt: skip
