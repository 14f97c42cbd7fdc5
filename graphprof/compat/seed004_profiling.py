"""Seed 004's profiling API for graph transformers, on graphprof's measurement and counting.

Units are the seed's: times in milliseconds (:class:`~graphprof.measure.RuntimeStats`), memory in MB
(2**20 bytes: :attr:`MemoryStats.peak_mb`), FLOPs as integers. Nothing here prints.

>>> profiler = RuntimeProfiler(model, "cpu", num_runs=20)                 # doctest: +SKIP
>>> results = profiler.profile_all(batch, optimizer=optimizer)            # doctest: +SKIP
>>> results["forward"].mean, results["backward"].std                      # doctest: +SKIP

A ``batch`` is whatever the model takes as one argument (a PyG ``Data``/``Batch`` for a model whose
``forward(data)`` accepts it, as ``pyg:`` models do), a tuple of arguments, or a dict of keywords.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import torch
from torch import nn

from graphprof.base.limits import require_count
from graphprof.errors import InvalidInputError
from graphprof.gnn.estimate import FLOPsEstimator, check_sparse_ratio
from graphprof.gnn.scaling import GraphScalingResult, ModelSource, run_graph_scaling
from graphprof.measure.memory import get_memory_breakdown, memory_stats, peak_during, reset_resident_peak, resident_now, resident_peak
from graphprof.measure.result import MemoryStats
from graphprof.measure.run import resolve_device
from graphprof.measure.timing import (
    RuntimeStats,
    benchmark_function,
    call_model,
    default_loss,
    profile_backward,
    profile_forward,
    profile_training_step,
)
from graphprof.models.graphs import DEFAULT_DEGREE, generate_graphs

__all__ = [
    "RuntimeProfiler",
    "MemoryProfiler",
    "reset_memory_stats",
    "get_peak_memory",
    "profile_memory_usage",
    "set_seed",
    "estimate_attention_memory",
    "estimate_pe_storage",
    "profile_pe_computation",
    "run_node_scaling",
    "run_layer_scaling",
    "run_pe_scaling",
    "generate_scaling_graphs",
    "profile_report",
]

_MB = 2**20


def _on(batch: Any, device: torch.device | None) -> Any:
    """``batch`` on ``device`` (a tensor, a PyG ``Data``, a tuple or dict of them); unchanged without a device."""
    if device is None:
        return batch
    if isinstance(batch, (tuple, list)):
        return type(batch)(_on(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _on(v, device) for k, v in batch.items()}
    to = getattr(batch, "to", None)
    return to(device) if callable(to) else batch


class RuntimeProfiler:
    """Forward, backward and training-step times of one model (seed 004), in ms, mean ± std.

    ``device`` picks the timer (CUDA events on ``"cuda"``) and where each batch is moved; the model is
    not moved. Each method leaves the model as found (mode, gradients, and for the training step its
    weights and the optimizer's state).
    """

    def __init__(self, model: nn.Module, device: torch.device | str | None = None, num_runs: int = 100, warmup_runs: int = 10) -> None:
        self.model = model
        self.device = None if device is None else _torch_device(device)
        self.num_runs = require_count(num_runs, "num_runs", high=_MOST)
        self.warmup_runs = require_count(warmup_runs, "warmup_runs", low=0, high=_MOST)

    def _options(self) -> dict[str, Any]:
        return {"num_runs": self.num_runs, "warmup_runs": self.warmup_runs, **({"device": self.device} if self.device is not None else {})}

    def profile_forward(self, batch: Any) -> RuntimeStats:
        return profile_forward(self.model, _on(batch, self.device), **self._options())

    def profile_backward(self, batch: Any, loss_fn: Callable[..., torch.Tensor] | None = None) -> RuntimeStats:
        return profile_backward(self.model, _on(batch, self.device), loss_fn=loss_fn, **self._options())

    def profile_training_step(
        self, batch: Any, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., torch.Tensor] | None = None
    ) -> RuntimeStats:
        return profile_training_step(self.model, _on(batch, self.device), optimizer, loss_fn, **self._options())

    def profile_all(
        self, batch: Any, optimizer: torch.optim.Optimizer | None = None, loss_fn: Callable[..., torch.Tensor] | None = None
    ) -> dict[str, RuntimeStats]:
        """``{"forward", "backward"}`` and, with an optimizer, ``"training_step"``."""
        results = {"forward": self.profile_forward(batch), "backward": self.profile_backward(batch, loss_fn)}
        if optimizer is not None:
            results["training_step"] = self.profile_training_step(batch, optimizer, loss_fn)
        return results


#: The largest size or count the seed's API takes (beyond it an estimate is meaningless and a run endless).
_MOST = 2**53


def _torch_device(device: object) -> torch.device:
    """``device`` as a :class:`torch.device`; a name torch does not know, or CUDA without a GPU, is
    :class:`InvalidInputError` (:func:`graphprof.measure.run.resolve_device`)."""
    if not isinstance(device, (str, torch.device)):
        raise InvalidInputError(f"device must be a name such as 'cpu' or 'cuda', or a torch.device, not {type(device).__name__}")
    return resolve_device(device)


def _device(model: nn.Module, device: torch.device | str | None) -> torch.device:
    if device is not None:
        return _torch_device(device)
    return next((p.device for p in model.parameters()), torch.device("cpu"))


class MemoryProfiler:
    """Peak memory of a forward, a backward or a training step (seed 004), as :class:`MemoryStats` (``peak_mb``).

    As in the seed, the peak counts everything allocated on the device at the step's peak, the weights
    and the batch among them: what was live before the step (CUDA: ``memory_allocated``; CPU:
    :func:`~graphprof.measure.memory.live_cpu_bytes`) plus the most the step added on top (CUDA: the
    allocator's ``max_memory_allocated``; CPU: ``torch.profiler``'s allocator events of this thread).

    On the CPU the figure is a lower bound of what the forward holds: it sees only what PyTorch's CPU
    allocator hands out on the calling thread, so memory a kernel takes elsewhere (oneDNN's scratch
    buffers, allocations on intra-op worker threads) is missed, and a forward's own transients can be
    undercounted (issue 54 measured 12.15 MB here against 24.43 MB counted with every allocation). On CUDA
    ``max_memory_allocated`` sees every allocation through the caching allocator.
    """

    def __init__(self, model: nn.Module, device: torch.device | str | None = None) -> None:
        self.model = model
        self.device = _device(model, device)

    def _stats(self, fn: Callable[[], Any]) -> MemoryStats:
        return _measured(fn, self.device)

    def profile_forward(self, batch: Any) -> MemoryStats:
        data = _on(batch, self.device)

        def forward() -> None:
            with torch.no_grad():
                call_model(self.model, data)

        return self._stats(forward)

    def profile_training_step(self, batch: Any, optimizer: torch.optim.Optimizer | None = None) -> MemoryStats:
        """Forward and backward (and ``optimizer.step()`` on a copy of the model when given)."""
        data = _on(batch, self.device)
        breakdown = get_memory_breakdown(self.model, data, self.device, train=True, optimizer=optimizer)
        if self.device.type == "cpu":  # MemTracker's peak counts the weights, as the seed's does
            _note_cpu_peak(breakdown.peak)
        return MemoryStats(
            peak_bytes=breakdown.peak,
            allocated_bytes=memory_stats(self.device).allocated_bytes,
            reserved_bytes=None,
            device=str(self.device),
        )

    def profile_backward(self, batch: Any) -> MemoryStats:
        data = _on(batch, self.device)
        saved = {p: p.grad for p in self.model.parameters()}

        def step() -> None:
            default_loss(call_model(self.model, data)).backward()

        try:
            return self._stats(step)
        finally:
            for p, g in saved.items():
                p.grad = g


#: The CPU's peak since :func:`reset_memory_stats`, in bytes, process-wide as CUDA's counter is: the CPU
#: allocator keeps none, so the seed's functions keep this one (raised by each query and each measured
#: step), with what was live and resident at the reset (``live``, ``resident``: see :func:`get_peak_memory`).
_CPU_PEAK: dict[str, int | None] = {"bytes": 0, "live": None, "resident": None}


def _note_cpu_peak(peak: int) -> int:
    highest = max(_CPU_PEAK["bytes"] or 0, peak)
    _CPU_PEAK["bytes"] = highest
    return highest


def _cpu_transient_peak(live_now: int) -> int:
    """What was live at the reset plus the most resident memory the process gained since, less what the
    process keeps now beside its tensors and did not keep then (the interpreter's own growth): a tensor
    made and freed between the reset and now is in it (0 before any reset, or off Linux)."""
    live, resident, peak, now = _CPU_PEAK["live"], _CPU_PEAK["resident"], resident_peak(), resident_now()
    if live is None or resident is None or peak is None or now is None:
        return 0
    other_growth = max(0, (now - live_now) - (resident - live))
    return live + max(0, peak - resident - other_growth)


def _measured(fn: Callable[[], Any], device: torch.device) -> MemoryStats:
    """``fn()``'s peak as the seed means it: live before, plus the most ``fn`` added on top."""
    before = memory_stats(device).allocated_bytes
    added, reserved = peak_during(fn, device)
    peak = before + added
    if device.type == "cpu":
        _note_cpu_peak(peak)
    now = memory_stats(device)
    return MemoryStats(peak_bytes=peak, allocated_bytes=now.allocated_bytes, reserved_bytes=reserved, device=str(device))


def reset_memory_stats(device: torch.device | str | None = None) -> None:
    """Reset the peak counter to what is allocated now: CUDA's (every device when ``device`` is None) and
    the CPU's (this module's, as the CPU allocator keeps none)."""
    if device is None or _torch_device(device).type == "cpu":
        live = memory_stats("cpu").allocated_bytes
        _CPU_PEAK.update(bytes=live, live=live, resident=reset_resident_peak())
    if not torch.cuda.is_available():
        return
    if device is None:
        for index in range(torch.cuda.device_count()):
            torch.cuda.reset_peak_memory_stats(index)
    elif _torch_device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(_torch_device(device))


def get_peak_memory(device: torch.device | str | None = None) -> float:
    """The peak allocated memory since the last :func:`reset_memory_stats`, in MB. CUDA: the allocator's
    ``max_memory_allocated``. CPU: the highest of what is allocated now, the peaks of the steps measured
    since (:class:`MemoryProfiler`, :func:`profile_memory_usage`) and, as on CUDA, the transients: what was
    live at the reset plus the most resident memory the process gained since (the kernel's peak,
    :func:`graphprof.measure.memory.resident_peak`; Linux), so ``x = torch.ones(2**25); del x`` counts its 128 MB."""
    dev = _torch_device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    peak = memory_stats(dev).peak_bytes  # on the CPU: what is live now
    return (_note_cpu_peak(max(peak, _cpu_transient_peak(peak))) if dev.type == "cpu" else peak) / _MB


def profile_memory_usage(fn: Callable[..., Any], *args: Any, device: torch.device | str | None = None, **kwargs: Any) -> MemoryStats:
    """Peak memory while ``fn(*args, **kwargs)`` runs on ``device`` (CPU by default), as
    :class:`MemoryStats`: what was live before plus the most ``fn`` added (see :class:`MemoryProfiler`)."""
    dev = _torch_device(device) if device is not None else torch.device("cpu")
    return _measured(lambda: fn(*args, **kwargs), dev)


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, torch (CPU and every CUDA device) and numpy when installed (seed 004).

    This sets global state on purpose: it is what the caller asks for."""
    seed = require_count(seed, "seed", low=0, high=2**32 - 1)  # numpy's range; a string or a float is refused
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with torch's usual installs
        return
    np.random.seed(seed)


def estimate_attention_memory(num_nodes: int, num_heads: int, hidden_dim: int, batch_size: int = 1, dtype_bytes: int = 4) -> float:
    """MB of one dense attention layer's tensors: scores and softmax (2 x B h N²) and Q, K, V, output (4 x B N d).

    >>> round(estimate_attention_memory(1000, 8, 256), 2)   # (2*8*1000**2 + 4*1000*256) * 4 / 2**20 = 68,096,000 B
    64.94
    """
    num_nodes, num_heads, hidden_dim = (
        require_count(v, k, low=0, high=_MOST) for k, v in (("num_nodes", num_nodes), ("num_heads", num_heads), ("hidden_dim", hidden_dim))
    )
    batch_size, dtype_bytes = (require_count(batch_size, "batch_size", high=_MOST), require_count(dtype_bytes, "dtype_bytes", high=16))
    elements = 2 * batch_size * num_heads * num_nodes**2 + 4 * batch_size * num_nodes * hidden_dim
    return elements * dtype_bytes / _MB


def estimate_pe_storage(
    num_nodes: int, node_pe_dim: int, relative_pe_buckets: int = 0, sparse_ratio: float = 1.0, dtype_bytes: int = 4
) -> dict[str, float]:
    """MB of positional encodings: per node (N x dim), relative per pair (dense N² x buckets, or the
    ``sparse_ratio`` share of pairs, each with its buckets and two int64 indices), and the total stored.

    >>> s = estimate_pe_storage(1000, 32, 16, 0.1)
    >>> round(s["node_pe"], 4), round(s["relative_pe_dense"], 2), round(s["relative_pe_sparse"], 2)
    (0.1221, 61.04, 7.63)
    """
    num_nodes, node_pe_dim, relative_pe_buckets = (
        require_count(v, k, low=0, high=_MOST)
        for k, v in (("num_nodes", num_nodes), ("node_pe_dim", node_pe_dim), ("relative_pe_buckets", relative_pe_buckets))
    )
    sparse_ratio, dtype_bytes = check_sparse_ratio(sparse_ratio), require_count(dtype_bytes, "dtype_bytes", high=16)
    pairs = num_nodes * num_nodes
    node = num_nodes * node_pe_dim * dtype_bytes / _MB
    dense = pairs * relative_pe_buckets * dtype_bytes / _MB
    sparse = pairs * sparse_ratio * (relative_pe_buckets * dtype_bytes + 16) / _MB if relative_pe_buckets else 0.0
    return {"node_pe": node, "relative_pe_dense": dense, "relative_pe_sparse": sparse, "total": node + sparse}


def profile_pe_computation(pe_transform: Callable[[Any], Any], data: Any, num_runs: int = 10, warmup_runs: int = 1) -> RuntimeStats:
    """Time a PE precompute (a PyG transform such as ``AddLaplacianEigenvectorPE``) on copies of ``data``, in ms."""
    copy = getattr(data, "clone", None)
    if not callable(copy):
        raise InvalidInputError(f"profile_pe_computation needs a PyG Data (with .clone()), got {type(data).__name__}")
    return benchmark_function(pe_transform, num_runs=num_runs, warmup_runs=warmup_runs, setup=lambda: (copy(),), min_runs=num_runs)


def run_node_scaling(
    model_factory: ModelSource,
    num_nodes_list: Sequence[int] = (100, 500, 1000, 2000, 5000),
    avg_degree: float = DEFAULT_DEGREE,
    device: torch.device | str | None = None,
    *,
    measure: bool = True,
    num_runs: int = 10,
    **options: Any,
) -> GraphScalingResult:
    """The model of ``model_factory()`` on graphs of each size: counts per component and, with
    ``measure`` (the default, as the seed), the forward on the CPU, mean ± std ms per point."""
    _cpu_only(device)
    return run_graph_scaling(
        model_factory, "num_nodes", list(num_nodes_list), avg_degree=avg_degree, measure=measure, num_runs=num_runs, **options
    )


def run_layer_scaling(
    model_factory: ModelSource,
    num_layers_list: Sequence[int] = (2, 4, 6, 8, 12, 16),
    num_nodes: int = 500,
    device: torch.device | str | None = None,
    *,
    measure: bool = True,
    num_runs: int = 10,
    **options: Any,
) -> GraphScalingResult:
    """``model_factory(num_layers=L)`` for each depth, on one graph of ``num_nodes`` nodes."""
    _cpu_only(device)
    return run_graph_scaling(
        model_factory, "num_layers", list(num_layers_list), num_nodes=num_nodes, measure=measure, num_runs=num_runs, **options
    )


def run_pe_scaling(
    model_factory: ModelSource,
    pe_configs: Sequence[dict[str, Any]] = ({"name": "lap", "dim": 16}, {"name": "rwse", "dim": 16}, {"name": "none", "dim": 0}),
    num_nodes: int = 500,
    device: torch.device | str | None = None,
    *,
    measure: bool = True,
    num_runs: int = 10,
    **options: Any,
) -> dict[str, GraphScalingResult]:
    """One result per PE configuration: ``model_factory(pe_dim=dim)`` on a graph carrying a ``dim``-wide PE.

    The PE values are random (its precompute is timed apart, by :func:`profile_pe_computation`): the
    model's cost depends on the PE's width, not on how it was computed."""
    _cpu_only(device)
    results = {}
    for config in pe_configs:
        name, dim = str(config.get("name", "pe")), int(config.get("dim", 0))
        results[name] = run_graph_scaling(
            model_factory, "pe_dim", [dim], num_nodes=num_nodes, measure=measure, num_runs=num_runs, **options
        )
    return results


def _cpu_only(device: torch.device | str | None) -> None:
    if device is not None and _torch_device(device).type != "cpu":
        raise InvalidInputError(f"graph scaling measures on the CPU here; got device {device!r} (a GPU run: graphprof sweep --measure)")


def generate_scaling_graphs(
    num_nodes_list: Sequence[int], avg_degree: float = DEFAULT_DEGREE, feature_dim: int = 16, seed: int = 42
) -> list[Any]:
    """One synthetic PyG ``Data`` per node count (:func:`graphprof.models.graphs.random_graph`, deterministic)."""
    return [g.to_data() for g in generate_graphs(num_nodes_list, avg_degree=avg_degree, feature_dim=feature_dim, seed=seed)]


def _hardware() -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    info: dict[str, Any] = {"cuda_available": cuda, "gpu_name": None, "gpu_memory_gb": None}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        info.update(gpu_name=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 2))
    return info


def _stats(s: RuntimeStats) -> dict[str, Any]:
    return {"mean": s.mean, "std": s.std, "min": s.min, "max": s.max, "num_runs": s.num_runs, "unit": "ms"}


def profile_report(
    model: nn.Module,
    batch: Any,
    device: torch.device | str | None = None,
    *,
    profiles: Sequence[str] = ("runtime", "memory", "flops"),
    optimizer: torch.optim.Optimizer | None = None,
    num_runs: int = 20,
    num_nodes: int | None = None,
    num_edges: int | None = None,
) -> dict[str, Any]:
    """The seed's JSON report (timestamp, hardware, model_info, runtime, memory, flops with breakdown);
    ``flops`` also carries graphprof's count of the same model per component beside the estimate."""
    if device is not None:
        device = _torch_device(device)  # an unknown device, or CUDA without a GPU, before any work
    params = list(model.parameters())
    report: dict[str, Any] = {
        "timestamp": datetime.now().isoformat(timespec="seconds"),
        "hardware": _hardware(),
        "model_info": {
            "total_parameters": sum(p.numel() for p in params),
            "parameter_memory_mb": sum(p.numel() * p.element_size() for p in params) / _MB,
        },
    }
    if "runtime" in profiles:
        runtime = RuntimeProfiler(model, device, num_runs=num_runs, warmup_runs=2).profile_all(batch, optimizer=optimizer)
        report["runtime"] = {k: _stats(v) for k, v in runtime.items()}
    if "memory" in profiles:
        peak = MemoryProfiler(model, device).profile_forward(batch)
        breakdown = get_memory_breakdown(model, _on(batch, _device(model, device)), device, train=True)
        report["memory"] = {
            "peak_mb": peak.peak_mb, "device": peak.device,
            "breakdown": {k: breakdown[k] for k in ("parameters", "activations", "gradients")},  # MB already
        }  # fmt: skip
    if "flops" in profiles:
        report["flops"] = _flops_section(model, batch, num_nodes, num_edges)
    return report


def _flops_section(model: nn.Module, batch: Any, num_nodes: int | None, num_edges: int | None) -> dict[str, Any]:
    from graphprof.gnn.compare import compare_estimate
    from graphprof.models.graphs import graph_args
    from graphprof.profile import profile_model

    args, kwargs = graph_args(batch)
    n = num_nodes if num_nodes is not None else int(args[0].shape[0])
    e = num_edges if num_edges is not None else int(args[1].shape[1])
    estimate = FLOPsEstimator(model).estimate(n, e)
    profile = profile_model(model, example_inputs=args, example_kwargs=kwargs)
    comparison = compare_estimate(profile, model, estimate, n, e)
    return {
        "total_gflops": estimate.total / 1e9,
        "breakdown": {k: v / 1e9 for k, v in estimate.breakdown.items()},
        "estimate_note": "the seed's formulas from hyperparameters (an estimate)",
        "counted_total_gflops": comparison.counted_total / 1e9,
        "counted_breakdown": {r.component: r.counted_flops / 1e9 for r in comparison.rows},
        "unsupported_ops": [u.op for u in profile.unsupported],
        "reasons": {r.component: r.reason for r in comparison.rows},
    }
