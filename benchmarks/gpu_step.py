"""A real one-GPU bf16 training step and a real decode, timed on a lent GPU, for holding `graphprof shard` and
`graphprof generate`'s predictions against (issue 51). Needs torch and transformers only (not graphprof):

    python3 benchmarks/gpu_step.py train --shape 1b --batch 4 --seq 2048 [--compile] [--checkpoint full]
    python3 benchmarks/gpu_step.py decode --shape 8b --prompt 1024 --new 256 [--compile]

Each run appends one JSON line to ``--out`` (default ``$OUT/gpu_step.jsonl``).

* **train**: a llama-shaped ``LlamaForCausalLM`` (random weights, float32 parameters) under FSDP2 on a one-rank
  NCCL group, with torchtitan's defaults (``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32)``,
  one ``fully_shard`` per decoder layer and one at the root), the loss as torchtitan computes it
  (``cross_entropy(logits.flatten(0, 1).float(), labels)``), AdamW (its default implementation on CUDA).
  ``--compile`` compiles each decoder layer (torchtitan's per-block compile). ``--checkpoint full``
  recomputes each decoder layer in the backward. Timed: warm-up steps, then each step between two
  synchronisations (``zero_grad``, forward, loss, backward, ``optimizer.step``).
* **decode**: bf16 weights, batch 1, ``generate`` greedy with exactly ``--new`` tokens; a streamer stamps
  the time of each token after a synchronisation, and the time per output token is the median gap after
  the first token. Eager: the dynamic cache. ``--compile``: the static cache with ``forward`` compiled in
  ``reduce-overhead`` mode (CUDA graphs): by default ``generate``'s own compile of its decoding forward (the static
  cache turns it on), or ``--compile-how manual`` as transformers' older inference guide wrote it; two warm-up
  generations.

The shapes (``SHAPES``) are the configs graphprof reads for the same models (``hf:`` specs), so the
prediction and the measurement build the same model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

#: Llama-3 shapes (vocabulary 128,256, GQA with 8 KV heads, RoPE base 500,000). 1b and 3b: Llama-3.2-1B/3B
#: (tied embeddings); 8b: Meta-Llama-3-8B (graphprof's catalogue entry ``hf:llama-3-8b``).
_BASE = {"model_type": "llama", "vocab_size": 128256, "num_key_value_heads": 8, "rope_theta": 500000.0,
         "rms_norm_eps": 1e-05, "max_position_embeddings": 8192}  # fmt: skip
SHAPES: dict[str, dict[str, Any]] = {
    "1b": {**_BASE, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "tie_word_embeddings": True},
    "3b": {**_BASE, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28, "num_attention_heads": 24, "tie_word_embeddings": True},
    "8b": {**_BASE, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "tie_word_embeddings": False},
}  # fmt: skip


def graphprof_spec(shape: str) -> str:
    """The ``hf:`` spec graphprof builds the same model from."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "tie_word_embeddings")
    config = SHAPES[shape]
    return "hf:llama-3-8b?" + "&".join(f"{k}={str(config[k]).lower()}" for k in keys)


def _model(shape: str, dtype: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{k: v for k, v in SHAPES[shape].items() if k != "model_type"})
    config._attn_implementation = "sdpa"
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(before)
    return model


def _group() -> None:
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1)


def _wrap(model: Any, compile_blocks: bool, checkpoint: str) -> Any:
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if checkpoint == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        if compile_blocks:
            layer.compile()
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def _synced(fn: Any) -> float:
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def train(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    _group()
    model = _wrap(_model(args.shape, torch.float32), args.compile, args.checkpoint)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = SHAPES[args.shape]["vocab_size"]
    ids = torch.randint(0, vocab, (args.batch, args.seq + 1), device="cuda")
    inputs, labels = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        logits = model(input_ids=inputs, use_cache=False).logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        loss.backward()
        optimizer.step()

    t0 = time.perf_counter()
    warm = [_synced(step) for _ in range(args.warmup)]
    torch.cuda.reset_peak_memory_stats()
    times = [_synced(step) for _ in range(args.iters)]
    params = sum(p.numel() for p in model.parameters())
    kernels = _profiled(step) if args.profile else None
    return {"job": "train", "shape": args.shape, "spec": graphprof_spec(args.shape), "batch": args.batch, "seq": args.seq,
            "compile": args.compile, "checkpoint": args.checkpoint, "params": params, "tokens_per_step": args.batch * args.seq,
            "step_s_median": statistics.median(times), "step_s_min": min(times), "step_s_max": max(times), "steps_s": times,
            "warmup_s": warm, "setup_and_warmup_s": time.perf_counter() - t0,
            "tokens_per_s": args.batch * args.seq / statistics.median(times),
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(), **({"kernels": kernels} if kernels else {})}  # fmt: skip


#: Kernel classes by name (first match wins), for the profiled step's summary.
_CLASSES = (
    ("nccl", ("nccl",)),
    ("attention", ("flash", "fmha", "attention", "cudnn_sdpa")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "sm90_", "cublas", "wgmma")),
    ("optimizer", ("multi_tensor_apply", "adam")),
    ("copy_cast", ("copy", "cast", "fill", "memcpy", "memset", "cat")),
    ("reduction_norm", ("reduce", "norm", "softmax", "nll", "cross_entropy", "sum")),
    ("elementwise", ("elementwise", "vectorized", "triton", "unrolled", "index", "embedding", "gather", "scatter")),
)


def _class_of(name: str) -> str:
    low = name.lower()
    return next((klass for klass, keys in _CLASSES if any(k in low for k in keys)), "other")


def _profiled(step: Any) -> dict[str, Any]:
    """One step under torch.profiler: its wall time, the device time of its kernels by class, and the largest kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall = _synced(step)
    by_class: dict[str, list[float]] = {}
    rows = []
    for event in prof.key_averages():
        device_us = getattr(event, "self_device_time_total", 0.0) or 0.0
        if device_us <= 0 or event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        klass = _class_of(event.key)
        total = by_class.setdefault(klass, [0.0, 0])
        total[0] += device_us / 1e6
        total[1] += event.count
        rows.append((device_us / 1e6, event.count, klass, event.key[:120]))
    rows.sort(reverse=True)
    busy = sum(v[0] for v in by_class.values())
    return {"profiled_wall_s": wall, "kernel_s": busy, "classes": {k: {"s": v[0], "count": v[1]} for k, v in sorted(by_class.items())},
            "top": [{"s": s_, "count": c, "class": k, "name": n} for s_, c, k, n in rows[:40]]}  # fmt: skip


class _Clock:
    """A generate streamer that stamps each token (after a synchronisation)."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def put(self, value: Any) -> None:
        import torch

        torch.cuda.synchronize()
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass


def _generate(model: Any, ids: Any, new: int) -> list[float]:
    import torch

    clock = _Clock()
    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                       do_sample=False, streamer=clock, pad_token_id=0)  # fmt: skip
    gaps = [b - a for a, b in zip(clock.stamps[1:], clock.stamps[2:], strict=False)]
    return gaps if gaps else [float("nan")]


def decode(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    model = _model(args.shape, torch.bfloat16).eval()
    ids = torch.randint(0, SHAPES[args.shape]["vocab_size"], (1, args.prompt), device="cuda")
    t0 = time.perf_counter()
    how = "eager, dynamic cache"
    if args.compile:
        model.generation_config.cache_implementation = "static"
        how = "static cache, generate's own compile of the decoding forward (its compile_config)"
        if args.compile_how != "auto":  # ours: forward compiled in reduce-overhead mode (CUDA graphs)
            if args.compile_how == "no-trees":  # the older CUDA-graph wrapper, which does not police outputs reused across runs
                torch._inductor.config.triton.cudagraph_trees = False
            if hasattr(model.generation_config, "disable_compile"):
                model.generation_config.disable_compile = True
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
            how = f"static cache, forward compiled (reduce-overhead: CUDA graphs{', trees off' if args.compile_how == 'no-trees' else ''})"
        elif hasattr(model.generation_config, "compile_config"):
            how += f": {model.generation_config.compile_config!r}"[:300]
    warm = [statistics.median(_generate(model, ids, args.new)) for _ in range(2 if args.compile else 1)]
    gaps = _generate(model, ids, args.new)
    return {"job": "decode", "shape": args.shape, "spec": graphprof_spec(args.shape), "prompt": args.prompt, "new": args.new,
            "compile": args.compile, "how": how, "compile_how": args.compile_how if args.compile else None, "tpot_s_median": statistics.median(gaps), "tpot_s_mean": statistics.fmean(gaps),
            "tpot_s_p10": sorted(gaps)[len(gaps) // 10], "tpot_s_p90": sorted(gaps)[9 * len(gaps) // 10],
            "warmup_tpot_s": warm, "setup_and_warmup_s": time.perf_counter() - t0}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="job", required=True)
    t = sub.add_parser("train")
    t.add_argument("--shape", choices=sorted(SHAPES), default="1b")
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--seq", type=int, default=2048)
    t.add_argument("--compile", action="store_true")
    t.add_argument("--checkpoint", choices=("none", "full"), default="none")
    t.add_argument("--warmup", type=int, default=3)
    t.add_argument("--iters", type=int, default=10)
    t.add_argument("--profile", action="store_true", help="and one more step under torch.profiler: kernel time by class")
    d = sub.add_parser("decode")
    d.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    d.add_argument("--prompt", type=int, default=1024)
    d.add_argument("--new", type=int, default=256)
    d.add_argument("--compile", action="store_true")
    d.add_argument(
        "--compile-how",
        choices=("auto", "manual", "no-trees"),
        default="auto",
        help="auto: generate compiles its decoding forward itself (static cache); manual: torch.compile(forward, "
        "mode='reduce-overhead'); no-trees: manual with CUDA-graph trees off",
    )
    for p in (t, d):
        p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "gpu_step.jsonl")
        p.add_argument("--spec", action="store_true", help="print the graphprof spec of --shape and exit")
    args = parser.parse_args(argv)
    if args.spec:
        print(graphprof_spec(args.shape))
        return 0
    try:
        row = train(args) if args.job == "train" else decode(args)
    except Exception as exc:  # noqa: BLE001 - one failed configuration is reported, the script's others still run
        row = {"job": args.job, "shape": args.shape, "compile": args.compile, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
    print(json.dumps({k: v for k, v in row.items() if k not in ("steps_s",)}), flush=True)
    with args.out.open("a") as f:
        f.write(json.dumps(row) + "\n")
    return 1 if "error" in row else 0


if __name__ == "__main__":
    sys.exit(main())
