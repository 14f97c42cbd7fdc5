"""Model-level timing: ``benchmark_function`` and the forward / backward / training-step helpers.

The loop follows ``triton.testing.do_bench``: warm-up iterations first (timed, and reported apart as
``first``, since they carry one-off costs such as allocator growth and kernel selection), then timed
iterations, each synchronised; on a GPU with a pair of CUDA events per iteration, on the CPU with
``time.perf_counter``. The loop stops early once the mean is known well enough: after ``min_runs``
iterations, as soon as the standard error of the mean is below ``rtol`` of the mean::

    std / sqrt(n) / mean < rtol        (rtol = 1%: 95% of repeated means within about +-2%)

Times are in milliseconds, as seed 004's ``RuntimeStats`` has them.

>>> import torch
>>> s = benchmark_function(torch.mm, torch.ones(64, 64), torch.ones(64, 64), num_runs=20, warmup_runs=2)
>>> s.num_runs <= 20 and s.min <= s.median <= s.max
True
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from graphprof.errors import InvalidInputError
from graphprof.measure.heap import settle_malloc

__all__ = [
    "NOISY_CV",
    "RuntimeStats",
    "benchmark_function",
    "profile_forward",
    "profile_backward",
    "profile_training_step",
    "ProfilingContext",
    "call_model",
    "default_loss",
    "check_runs",
    "faulted_bytes",
]

#: A timing whose coefficient of variation (std / mean over the timed runs) is above this is a noisy run.
NOISY_CV = 0.10


@dataclass(frozen=True)
class RuntimeStats:
    """Timing of one function over ``num_runs`` steady-state iterations, in milliseconds.

    ``first`` holds the warm-up iterations' times, in order, apart from the statistics; ``timer`` is
    ``"cuda-events"`` or ``"perf_counter"``; ``stopped_early`` says the spread criterion ended the loop
    before ``requested_runs``.
    """

    mean: float
    std: float
    min: float
    max: float
    num_runs: int
    median: float = 0.0
    p20: float = 0.0
    p80: float = 0.0
    first: tuple[float, ...] = ()
    requested_runs: int = 0
    stopped_early: bool = False
    timer: str = "perf_counter"

    @classmethod
    def from_samples(cls, samples: list[float], first: list[float], requested: int, timer: str) -> RuntimeStats:
        ordered = sorted(samples)
        return cls(
            mean=statistics.fmean(samples),
            std=statistics.stdev(samples) if len(samples) > 1 else 0.0,
            min=ordered[0],
            max=ordered[-1],
            num_runs=len(samples),
            median=quantile(ordered, 0.5),
            p20=quantile(ordered, 0.2),
            p80=quantile(ordered, 0.8),
            first=tuple(first),
            requested_runs=requested,
            stopped_early=len(samples) < requested,
            timer=timer,
        )

    @property
    def cv(self) -> float:
        """Coefficient of variation: ``std / mean`` (0.05: a 5% spread; 0 for a zero mean)."""
        return self.std / self.mean if self.mean > 0 else 0.0

    @property
    def noisy(self) -> bool:
        """Whether the spread is over :data:`NOISY_CV`, the threshold the main command flags."""
        return self.cv > NOISY_CV

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": "ms",
            "mean": self.mean,
            "std": self.std,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "p20": self.p20,
            "p80": self.p80,
            "num_runs": self.num_runs,
            "requested_runs": self.requested_runs,
            "stopped_early": self.stopped_early,
            "first_runs": list(self.first),
            "timer": self.timer,
        }


def quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default): ``quantile([1, 2, 3, 4], 0.5) == 2.5``."""
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def check_runs(num_runs: int, warmup_runs: int) -> None:
    """``num_runs`` >= 1 and ``warmup_runs`` >= 0, as integers; else :class:`InvalidInputError`."""
    if isinstance(num_runs, bool) or not isinstance(num_runs, int) or num_runs < 1:
        raise InvalidInputError(f"the number of timed iterations must be a positive integer, got {num_runs!r}")
    if isinstance(warmup_runs, bool) or not isinstance(warmup_runs, int) or warmup_runs < 0:
        raise InvalidInputError(f"the number of warm-up iterations must be 0 or more, got {warmup_runs!r}")


def _uses_cuda(device: torch.device | str | None) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def benchmark_function(
    fn: Callable[..., Any],
    *args: Any,
    num_runs: int = 100,
    warmup_runs: int = 10,
    device: torch.device | str | None = None,
    min_runs: int = 10,
    rtol: float = 0.01,
    setup: Callable[[], Any] | None = None,
    **kwargs: Any,
) -> RuntimeStats:
    """Time ``fn(*args, **kwargs)``: ``warmup_runs`` warm-up calls, then up to ``num_runs`` timed ones.

    ``device`` picks the timer (CUDA events on ``"cuda"``; ``perf_counter`` otherwise, after a
    synchronise when CUDA is initialised). ``setup``, when given, runs untimed before each call and its
    result replaces ``args`` (``fn(*setup())``): the backward helper builds its graph there. On the CPU the
    C heap is first brought to its steady state (:func:`graphprof.measure.heap.settle_malloc`), so that the
    time does not depend on what the process allocated before.
    """
    check_runs(num_runs, warmup_runs)
    cuda = _uses_cuda(device)
    if not cuda:
        settle_malloc()
    sync: Callable[[], None] = torch.cuda.synchronize if (cuda or torch.cuda.is_initialized()) else (lambda: None)
    min_runs = min(max(min_runs, 2), num_runs)

    def once() -> float:
        call_args = setup() if setup is not None else args
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sync()
            start.record()
            fn(*call_args, **kwargs)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        sync()
        t = time.perf_counter()
        fn(*call_args, **kwargs)
        sync()
        return (time.perf_counter() - t) * 1e3

    first = [once() for _ in range(warmup_runs)]
    samples: list[float] = []
    while len(samples) < num_runs:
        samples.append(once())
        n = len(samples)
        if n >= min_runs and n < num_runs:
            mean = statistics.fmean(samples)
            if mean > 0 and statistics.stdev(samples) / math.sqrt(n) / mean < rtol:
                break
    return RuntimeStats.from_samples(samples, first, num_runs, "cuda-events" if cuda else "perf_counter")


# ---- calling a model with a batch, and a loss -----------------------------------------------------------


def call_model(model: nn.Module, batch: Any) -> Any:
    """``model(**batch)`` for a dict, ``model(*batch)`` for a tuple or list, else ``model(batch)``."""
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def default_loss(output: Any, target: Any = None) -> torch.Tensor:
    """Sum of every floating-point output that requires grad (the run loop's backward seed, as a loss)."""
    leaves = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not leaves:
        raise InvalidInputError("no output of the model requires grad, so there is no backward pass to time")
    return sum((t.float().sum() for t in leaves), torch.zeros((), device=leaves[0].device))


def _loss(model: nn.Module, batch: Any, loss_fn: Callable[..., torch.Tensor] | None, target: Any) -> torch.Tensor:
    out = call_model(model, batch)
    if loss_fn is None:
        return default_loss(out)
    if target is None:
        first = next(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
        target = torch.zeros_like(first)
        out = first
    return loss_fn(out, target)


@contextlib.contextmanager
def _grads_kept(model: nn.Module) -> Iterator[None]:
    """Put every parameter's ``.grad`` back as it was (the helpers below leave the model as found)."""
    saved = {p: p.grad for p in model.parameters()}
    try:
        yield
    finally:
        for p, g in saved.items():
            p.grad = g


def _device_of(model: nn.Module) -> torch.device:
    return next((t.device for t in model.parameters()), torch.device("cpu"))


def faulted_bytes(fn: Any) -> float:
    """Bytes of fresh pages the process faulted in while ``fn()`` ran (minor faults x the page size); 0 where
    the platform does not count them (no ``resource`` module)."""
    try:
        import resource
    except ImportError:  # Windows
        fn()
        return 0.0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) * resource.getpagesize()


def profile_forward(
    model: nn.Module,
    batch: Any,
    num_runs: int = 100,
    warmup_runs: int = 10,
    *,
    grad: bool = False,
    faults: list[float] | None = None,
    **options: Any,
) -> RuntimeStats:
    """Time ``model(batch)`` under ``torch.no_grad()`` (seed 004), or with autograd recording when
    ``grad`` (the forward of a training step). ``options`` go to :func:`benchmark_function`. ``faults``, when
    given, receives the bytes of fresh pages each call faulted in (:func:`faulted_bytes`; warm-up calls first):
    one ``getrusage`` on each side of a call, inside the timed span (about a microsecond)."""
    options.setdefault("device", _device_of(model))
    mode = torch.enable_grad if grad else torch.no_grad

    def call() -> None:
        with mode():
            call_model(model, batch)

    def forward() -> None:
        if faults is None:
            call()
        else:
            faults.append(faulted_bytes(call))

    return benchmark_function(forward, num_runs=num_runs, warmup_runs=warmup_runs, **options)


def profile_backward(
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    num_runs: int = 100,
    warmup_runs: int = 10,
    target: Any = None,
    **options: Any,
) -> RuntimeStats:
    """Time ``loss.backward()`` alone; the forward and the loss run untimed before each call.

    ``loss_fn(output, target)`` (``target`` defaults to zeros like the first output; an
    ``nn.MSELoss()`` works as is); with no ``loss_fn`` the loss is the sum of the outputs.
    Gradients are put back as they were afterwards.
    """
    options.setdefault("device", _device_of(model))
    with _grads_kept(model):
        return benchmark_function(
            lambda loss: loss.backward(),
            num_runs=num_runs,
            warmup_runs=warmup_runs,
            setup=lambda: (_loss(model, batch, loss_fn, target),),
            **options,
        )


def profile_training_step(
    model: nn.Module,
    batch: Any,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    num_runs: int = 100,
    warmup_runs: int = 10,
    target: Any = None,
    restore: bool = True,
    **options: Any,
) -> RuntimeStats:
    """Time a whole step: ``zero_grad``, forward, loss, backward, ``optimizer.step()``.

    With ``restore`` (the default) the parameters, buffers and optimizer state are copied first and put
    back afterwards, so the model is left as found (at the cost of one copy of them).
    """
    options.setdefault("device", _device_of(model))
    saved_state = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()} if restore else None
    saved_opt = copy.deepcopy(optimizer.state_dict()) if restore else None

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        _loss(model, batch, loss_fn, target).backward()
        optimizer.step()

    try:
        with _grads_kept(model):
            return benchmark_function(step, num_runs=num_runs, warmup_runs=warmup_runs, **options)
    finally:
        if saved_state is not None and saved_opt is not None:
            with torch.no_grad():
                for k, v in model.state_dict(keep_vars=True).items():
                    v.copy_(saved_state[k])
            optimizer.load_state_dict(saved_opt)


# ---- ProfilingContext -------------------------------------------------------------------------------------


class ProfilingContext:
    """Reproducible conditions for a measurement, all restored on exit (seed 004).

    On entry: ``eval_mode`` puts every module in eval mode; ``disable_dropout`` sets every dropout's
    ``p`` to 0 (so a train-mode run is deterministic too); ``seed`` seeds ``torch`` (CPU and CUDA) and
    ``random``; ``deterministic`` asks for deterministic cuDNN without autotuning. On exit the modules'
    training flags, the dropout probabilities, the RNG states and the cuDNN flags are put back.

    >>> m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    >>> with ProfilingContext(m, seed=0):
    ...     (m.training, m[1].p)
    (False, 0.0)
    >>> (m.training, m[1].p)
    (True, 0.5)
    """

    def __init__(
        self, model: nn.Module, disable_dropout: bool = True, eval_mode: bool = True, seed: int | None = None, deterministic: bool = False
    ) -> None:
        self.model = model
        self.disable_dropout = disable_dropout
        self.eval_mode = eval_mode
        self.seed = seed
        self.deterministic = deterministic
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> ProfilingContext:
        dropouts = [m for m in self.model.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
        self._saved = {
            "modes": {m: m.training for m in self.model.modules()},
            "dropout": {m: m.p for m in dropouts},
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
            "random": random.getstate(),
            "cudnn": (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic),
        }
        if self.eval_mode:
            self.model.eval()
        if self.disable_dropout:
            for m in dropouts:
                m.p = 0.0
        if self.seed is not None:
            torch.manual_seed(self.seed)  # seeds every CUDA device too
            random.seed(self.seed)
        if self.deterministic:
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
        return self

    def __exit__(self, *exc: object) -> None:
        saved = self._saved
        for m, training in saved["modes"].items():
            m.training = training
        for m, p in saved["dropout"].items():
            m.p = p
        torch.set_rng_state(saved["torch_rng"])
        if saved["cuda_rng"] is not None:
            torch.cuda.set_rng_state_all(saved["cuda_rng"])
        random.setstate(saved["random"])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved["cudnn"]
