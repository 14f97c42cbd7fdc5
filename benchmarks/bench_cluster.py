"""Issue 51's benchmark: predicted training throughput of sharded steps against published runs of a public framework.

Run::

    python benchmarks/bench_cluster.py            # every configuration (a few minutes on 2 cores)
    python benchmarks/bench_cluster.py --only 1,3 # some of them

What a user runs for each configuration, verbatim on the command line::

    graphprof shard --model hf:llama-3-8b fsdp:8 --hardware h100 --dtype bf16 --batch-size 2 --seq-len 8192 \\
        --checkpoint selective [--compile]

(here through the library call it makes, :func:`graphprof.sharding.shard_profile`), on a device described by its
datasheet. For each configuration it prints the published figure with its source, the prediction (tokens/s per
GPU, with the step's 80% interval), the breakdown (compute, recompute, exposed communication, optimizer,
host, and the three estimates of :mod:`graphprof.sharding.physics`: attention backward, comm SM contention,
sustained clock) and the signed error ``predicted / published - 1``; then the median |error|, the signed median and
the worst. **Nothing is fitted to these figures**: kernels come from the shipped H100 op table
(``graphprof/devices/calibration/h100.json``, fitted to single kernels), a device without a table takes its
datasheet figures with the H100's efficiencies (:mod:`graphprof.devices.derived`), links come from datasheets
and collectives from NCCL's own cost model (:mod:`graphprof.devices.links`).

Sources (only bf16 runs are used; Float8 runs are left out, as graphprof prices bf16 kernels):

* [TT-H100] torchtitan ``docs/performance.md`` (https://github.com/pytorch/torchtitan/blob/main/docs/performance.md),
  "Table 1" and "Table 3": Llama 3.1 8B, FSDP on 8 and 128 H100s, local batch 2, selective activation
  checkpointing, eager and ``torch.compile``. Their platform (same document): Grand Teton, H100 **96GB HBM2e at
  2.4 TB/s**, 8 GPUs a host with NVLink, 400 Gb/s RDMA per GPU, **500 W power limit** (of 700 W). The device
  below is the H100 preset with that memory bandwidth (its kernel model derived from the H100 table); the
  500 W limit, which lowers sustained clocks, is not modelled. Sequence length 8192 (torchtitan's Llama 3 8B
  configuration, ``train_configs/llama3_8b.toml``; the same document calls Llama 3's default 8192).
* [TT-A100] torchtitan ``docs/performance.md`` at commit 041336434916bdc0f88c1f89fda176fd3c2092e4 (the
  earlier version of the same page): Llama 3 8B and 70B, Llama 2 13B and 70B, FSDP2 on 64 A100 80GB, local
  batch 1 or 2; Llama 3 at sequence 8192, Llama 2 at 4096 ("the default sequence length in Llama 2 is 4096
  which is halved compared with Llama 3"); eager (torchtitan's default then). The network of that cluster is
  not stated: the a100 preset's (one 200 Gb/s HDR port per GPU, DGX A100) is assumed.

Decode (``graphprof generate --model hf:llama-3-8b --hardware h100 --prompt-len 8 --new-tokens 200 --compile``), batch 1,
bf16, against torchao's ``generate.py`` benchmark (gpt-fast's model, ``torch.compile(mode="reduce-overhead")``: CUDA
graphs), published as tokens/s of one sequence (``1 / TPOT``):

* [AO-H100] torchao ``torchao/quantization/README.md``, "CUDA backend | NVIDIA-H100 GPU": Llama-3.1-8B, Base (bfloat16),
  126.90 tok/s (7.88 ms a token).
* [AO-A100] torchao ``torchao/sparsity/README.md``, "LLama3" (run on an A100-80GB): Llama-3-8B, Base (bfloat16), 95.64 tok/s
  (10.46 ms a token).

The published MFU of [TT-A100] (58.2% for 8B) counts attention over the full square; the prediction's
``mfu_full_square`` is printed beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphprof.devices.hardware import Hardware, get_hardware  # noqa: E402
from graphprof.sharding import StepOptions, shard_profile  # noqa: E402

TT_H100 = "torchtitan docs/performance.md (main), Grand Teton H100 96GB HBM2e 500W"
TT_A100 = "torchtitan docs/performance.md @0413364 (64 A100 80GB)"
LLAMA2_13B = ("hf:llama?hidden_size=5120&intermediate_size=13824&num_hidden_layers=40&num_attention_heads=40"
              "&num_key_value_heads=40&vocab_size=32000&max_position_embeddings=4096")  # fmt: skip
LLAMA2_70B = ("hf:llama?hidden_size=8192&intermediate_size=28672&num_hidden_layers=80&num_attention_heads=64"
              "&num_key_value_heads=8&vocab_size=32000&max_position_embeddings=4096")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Case:
    """One published run: model, sharding, per-rank batch and sequence, checkpointing, regime, device, figure."""

    label: str
    model: str
    shard: str
    batch: int
    seq: int
    checkpoint: str
    compiled: bool
    device: str
    published_tps: float
    source: str
    published_mfu: float | None = None


CASES = (
    Case("Llama 3.1 8B, FSDP 8, bs 2, SAC", "hf:llama-3-8b", "fsdp:8", 2, 8192, "selective", False, "h100-tt", 5762, TT_H100 + ", Table 1"),
    Case("Llama 3.1 8B, FSDP 8, bs 2, SAC, compile", "hf:llama-3-8b", "fsdp:8", 2, 8192, "selective", True, "h100-tt", 6667, TT_H100 + ", Table 1"),
    Case("Llama 3.1 8B, FSDP 128, bs 2, SAC", "hf:llama-3-8b", "fsdp:128", 2, 8192, "selective", False, "h100-tt", 5605, TT_H100 + ", Table 3"),
    Case("Llama 3.1 8B, FSDP 128, bs 2, SAC, compile", "hf:llama-3-8b", "fsdp:128", 2, 8192, "selective", True, "h100-tt", 6514, TT_H100 + ", Table 3"),
    Case("Llama 3 8B, FSDP 64, bs 1, SAC (op)", "hf:llama-3-8b", "fsdp:64", 1, 8192, "selective", False, "a100", 2973, TT_A100 + ", Llama 3 table", 0.582),
    Case("Llama 3 70B, FSDP 64, bs 1, full AC", "hf:llama-3-70b", "fsdp:64", 1, 8192, "full", False, "a100", 331, TT_A100 + ", Llama 3 table", 0.517),
    Case("Llama 2 13B, FSDP 64, bs 2, no AC", LLAMA2_13B, "fsdp:64", 2, 4096, "none", False, "a100", 2162, TT_A100 + ", Llama 2 table", 0.611),
    Case("Llama 2 13B, FSDP 64, bs 2, SAC (op)", LLAMA2_13B, "fsdp:64", 2, 4096, "selective", False, "a100", 1904, TT_A100 + ", Llama 2 table", 0.538),
    Case("Llama 2 70B, FSDP 64, bs 1, SAC (op)", LLAMA2_70B, "fsdp:64", 1, 4096, "selective", False, "a100", 355, TT_A100 + ", Llama 2 table", 0.508),
    Case("Llama 2 70B, FSDP 64, bs 2, full AC", LLAMA2_70B, "fsdp:64", 2, 4096, "full", False, "a100", 353, TT_A100 + ", Llama 2 table", 0.505),
)  # fmt: skip


def device(name: str) -> Hardware:
    """``h100-tt``: torchtitan's H100 as its page describes it (2.4 TB/s HBM2e, 96 GB), no measured table of its
    own (so derived from the H100's); any other name is a preset."""
    if name != "h100-tt":
        return get_hardware(name)
    return dataclasses.replace(
        get_hardware("h100"), name="h100-96gb-hbm2e", label="NVIDIA H100 96GB HBM2e (Grand Teton, as torchtitan describes it)",
        bandwidth_gbs=2400.0, memory_gb=96.0, calibration=None, source="torchtitan docs/performance.md: 96GB HBM2e, 2.4 TB/sec",
    )  # fmt: skip


def run(case: Case) -> dict[str, float]:
    timing = StepOptions(checkpoint=case.checkpoint, compiled=case.compiled, gpus_per_node=8)
    started = time.perf_counter()
    p = shard_profile(case.model, case.shard, hardware=device(case.device), timing=timing, dtype="bfloat16",
                      batch_size=case.batch, seq_len=case.seq)  # fmt: skip
    wall = time.perf_counter() - started
    step = p.step
    assert step is not None
    error = step.tokens_per_s_per_gpu / case.published_tps - 1.0
    b = step.breakdown
    print(f"\n{case.label}  [{case.source}]")
    print(f"  graphprof shard --model {case.model} {case.shard} --batch-size {case.batch} --seq-len {case.seq} "
          f"--checkpoint {case.checkpoint}{' --compile' if case.compiled else ''} on {step.device}")  # fmt: skip
    low, high = step.tokens_per_step / step.high_s, step.tokens_per_step / step.low_s
    print(f"  published {case.published_tps:,.0f} tok/s/GPU | predicted {step.tokens_per_s_per_gpu:,.0f} (80%: {low:,.0f}-{high:,.0f}) "
          f"| error {error:+.1%}")  # fmt: skip
    mfu = "" if case.published_mfu is None else f" (published {case.published_mfu:.1%})"
    print(f"  step {step.time_s * 1e3:,.0f} ms: compute {b.compute_s * 1e3:,.0f}, recompute {b.recompute_s * 1e3:,.0f}, "
          f"exposed comm {b.communication_s * 1e3:,.0f} (of {step.communication_total_s * 1e3:,.0f}), optimizer {b.optimizer_s * 1e3:,.1f}, "
          f"host {b.host_s * 1e3:,.1f}; estimates: attention backward {b.attention_backward_s * 1e3:,.0f}, comm SM contention "
          f"{b.sm_contention_s * 1e3:,.0f}, sustained clock {b.sustained_clock_s * 1e3:,.0f} ms | MFU {step.mfu:.1%}, full-square {step.mfu_full_square:.1%}{mfu}, HFU {step.hfu:.1%}")  # fmt: skip
    print(f"  priced in {wall:.1f} s (load {os.getloadavg()[0]:.2f})")
    return {"error": error, "wall": wall}


@dataclasses.dataclass(frozen=True)
class DecodeCase:
    """One published batch-1 compiled decode: model, device, tokens/s of the sequence, source."""

    label: str
    model: str
    device: str
    published_tps: float
    source: str


DECODE = (
    DecodeCase("Llama 3.1 8B decode, batch 1, compiled", "hf:llama-3-8b", "h100", 126.90,
               "[AO-H100] torchao torchao/quantization/README.md, CUDA backend | NVIDIA-H100"),
    DecodeCase("Llama 3 8B decode, batch 1, compiled", "hf:llama-3-8b", "a100", 95.64,
               "[AO-A100] torchao torchao/sparsity/README.md, LLama3 (A100-80GB)"),
)  # fmt: skip


def run_decode(case: DecodeCase) -> float:
    from graphprof.generate import profile_generation

    started = time.perf_counter()
    r = profile_generation(case.model, prompt_len=8, new_tokens=200, hardware=case.device, compiled=True)
    regimes = r.regimes
    assert regimes is not None and regimes.compiled.tpot_s is not None and regimes.eager.tpot_s is not None
    predicted = 1.0 / regimes.compiled.tpot_s
    error = predicted / case.published_tps - 1.0
    print(f"\n{case.label}  [{case.source}]")
    print(f"  graphprof generate --model {case.model} --hardware {case.device} --prompt-len 8 --new-tokens 200 --compile")
    print(f"  published {case.published_tps:.2f} tok/s ({1e3 / case.published_tps:.2f} ms) | predicted compiled {predicted:.2f} tok/s "
          f"({regimes.compiled.tpot_s * 1e3:.2f} ms, {regimes.compiled.kernels_per_step} kernels) | error {error:+.1%}")  # fmt: skip
    print(
        f"  eager {regimes.eager.tpot_s * 1e3:.2f} ms a token ({regimes.eager.kernels_per_step} kernels) | priced in {time.perf_counter() - started:.1f} s"
    )
    return error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated 1-based case numbers")
    parser.add_argument("--decode-only", action="store_true", help="only the batch-1 decode cases")
    parser.add_argument("--training-only", action="store_true", help="only the training cases")
    args = parser.parse_args()
    if not args.training_only:
        decode = [run_decode(case) for case in DECODE]
        print("\ndecode summary: " + "; ".join(f"{e:+.1%} {c.label} ({c.device})" for c, e in zip(DECODE, decode, strict=True)))
    if args.decode_only:
        return
    chosen = [CASES[int(i) - 1] for i in args.only.split(",")] if args.only else list(CASES)
    print(f"load before: {os.getloadavg()[0]:.2f} (1-minute), {os.cpu_count()} CPUs")
    results = [run(case) for case in chosen]
    errors = [r["error"] for r in results]
    print("\nsummary (predicted tokens/s per GPU / published - 1):")
    for case, e in zip(chosen, errors, strict=True):
        print(f"  {e:+7.1%}  {case.label} ({case.device})")
    print(f"median |error| {statistics.median(abs(e) for e in errors):.1%}; signed median {statistics.median(errors):+.1%}; "
          f"worst {max(errors, key=abs):+.1%}; within 15%: {sum(abs(e) <= 0.15 for e in errors)}/{len(errors)}")  # fmt: skip


if __name__ == "__main__":
    main()
