"""Measured vs estimated on a GPU: ten torchvision models and a LLaMA-shaped decoder, bf16, batch 1 and 64.

Run on the GPU machine: ``python benchmarks/bench_measure.py [--device cuda] [--iters 30] [--out DIR]``.
Writes ``measure_<device>.md`` (in ``benchmarks/results/`` by default): measured forward (mean ± std),
graphprof's lower bound and predicted time for the preset the GPU matches (``match_hardware``; the
prediction needs the preset's shipped calibration table), per-layer kernel sum against the trace's kernel
busy time, allocator peak (max_memory_allocated, inside the measurement) against graphprof's estimate,
and the overhead of per-layer measurement.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

import graphprof
import graphprof.devices.local
from graphprof.errors import GraphprofError

TORCHVISION = (
    "resnet18", "resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny",
    "vit_b_16", "swin_t", "densenet121", "regnet_y_1_6gf", "vgg16",
)  # fmt: skip


def llama_decoder() -> torch.nn.Module:
    """A LLaMA-shaped decoder (8 layers of a 7B-wide model), built on the meta device; measured after materialising."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=32, vocab_size=32000
    )
    with torch.device("meta"):
        return LlamaForCausalLM(config).eval()


def one(name: str, model: object, batch: int, args: argparse.Namespace) -> str:
    if isinstance(model, torch.nn.Module):
        ids = torch.zeros(batch, 512, dtype=torch.long, device="meta")
        pm = graphprof.prepare(model, example_inputs=(ids,), dtype="bfloat16", model_name=name, target=args.device)
    else:
        pm = graphprof.prepare(name, batch_size=batch, dtype="bfloat16", target=args.device)
    p = pm.profile()
    roof = graphprof.classify(p, args.preset) if args.preset is not None else None
    bound = f"{roof.seconds * 1e3:.3f}" if roof is not None and roof.seconds else "-"
    predicted = f"{roof.predicted_seconds * 1e3:.3f}" if roof is not None and roof.predicted_seconds else "-"
    m = pm.measure(device=args.device, iters=args.iters, warmup=args.warmup, layer_runs=3)
    busy = m.kernel_busy_us
    ratio = f"{m.layer_sum_us / busy:.3f}" if busy else "-"
    est_peak = p.param_bytes + p.buffer_bytes + p.input_bytes + p.peak_activation_bytes
    return (
        f"| {name} | {batch} | {m.forward.mean:.3f} ± {m.forward.std:.3f} | {m.forward.num_runs} | {bound} | {predicted} | "
        f"{m.layer_sum_us / 1e3:.3f} | {busy / 1e3 if busy else float('nan'):.3f} | {ratio} | "
        f"{m.memory.peak_bytes / 2**20:.1f} | {est_peak / 2**20:.1f} | {m.overhead * 100:+.1f}% |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=[*TORCHVISION, "llama"])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    host = graphprof.devices.local.detect_host(args.device)
    from graphprof.devices.hardware import match_hardware

    args.preset = match_hardware(host.gpu) if host.gpu else None
    rows = [
        f"# graphprof --measure on {host.gpu or host.cpu} (driver {host.driver}, CUDA {host.cuda}, torch {host.torch})",
        "",
        "bf16, eval. Per-layer sum = sum of per-layer kernel times (GPU) or self times (CPU); busy = union of kernel intervals.",
        "Measured peak = resident (weights, inputs) + max_memory_allocated above it during one forward; estimate = params + buffers + inputs + peak activations (dry run).",
        "",
        f"Lower bound and predicted: graphprof's roofline for the preset {args.preset.name if args.preset else '(none matched)'}, from the dry run alone,"
        f" costed as the {args.device} device runs it (target={args.device}: fused attention on a GPU).",
        "",
        "| model | batch | forward ms | n | lower bound ms | predicted ms | per-layer sum ms | kernel busy ms | sum/busy | peak MiB measured | peak MiB estimated | overhead |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in args.models:
        for batch in (1, 64):
            try:
                model = llama_decoder() if name == "llama" else None
                rows.append(one("llama-8L" if name == "llama" else name, model, batch, args))
            except (GraphprofError, torch.cuda.OutOfMemoryError) as exc:
                rows.append(f"| {name} | {batch} | failed: {str(exc).splitlines()[0][:120]} |")
            print(rows[-1], flush=True)
            torch.cuda.empty_cache() if torch.cuda.is_available() else None
    slug = re.sub(r"[^a-z0-9]+", "_", (host.gpu or args.device).lower()).strip("_")
    out = args.out / f"measure_{slug}.md"
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
