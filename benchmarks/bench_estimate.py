"""Check graphprof's lower bound and predicted time against an H100 (run on the GPU machine).

For ten torchvision models at batch 1 and 64 and the LLaMA-shaped decoder (hidden 2048, 16 layers,
32 query / 8 key-value heads, intermediate 8192, vocab 128256, seq 2048, batch 1), all bfloat16, eager,
``inference_mode``:

* graphprof's dry run with ``target="cuda"`` and the ``h100`` preset: bytes, lower bound, predicted time;
* measured kernel time: the sum of CUDA kernel times of one forward under ``torch.profiler``;
* measured eager forward: median wall time of a forward between CUDA events (after warm-up).

Writes ``benchmarks/results/estimate_h100.json`` and ``.md`` and prints the table. Done when the lower
bound never exceeds the kernel time and the predicted time is within 20 % of the eager forward (median
absolute error at batch 64) with no configuration worse than 50 %.

    python benchmarks/bench_estimate.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import graphprof  # noqa: E402
from graphprof.cost.roofline import classify  # noqa: E402
from graphprof.devices.hardware import get_hardware  # noqa: E402

MODELS = (
    "resnet18", "resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "regnet_y_8gf",
    "densenet121", "vit_b_16", "swin_t", "maxvit_t",
)  # fmt: skip
BATCHES = (1, 64)


def llama(device: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=8192, vocab_size=128256, max_position_embeddings=4096,
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 128256, (1, 2048), device=device)
    return model, {"input_ids": ids}


def measure(model: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[float, float]:
    """(sum of kernel times of one forward, median eager forward time), seconds."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        for _ in range(3):
            model(*args, **kwargs)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*args, **kwargs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*args, **kwargs)
            torch.cuda.synchronize()
    kernel_us = sum(e.device_time_total for e in prof.key_averages() if e.device_type.name == "CUDA")
    return kernel_us / 1e6, statistics.median(times)


def one(name: str, batch: int) -> dict[str, Any]:
    h100 = get_hardware("h100")
    if name == "llama":
        meta_model, meta_kwargs = llama("meta")
        profile = graphprof.profile_model(meta_model, example_kwargs=meta_kwargs, dtype="bf16", target="cuda")
        model, kwargs = llama("cuda")
        model = model.to(torch.bfloat16)
        args: tuple = ()
    else:
        import torchvision

        profile = graphprof.profile_model(name, batch_size=batch, dtype="bf16", target="cuda")
        model = torchvision.models.get_model(name).eval().cuda().to(torch.bfloat16)
        size = 224
        args, kwargs = (torch.randn(batch, 3, size, size, device="cuda", dtype=torch.bfloat16),), {}
    roofline = classify(profile, h100)
    kernel_s, eager_s = measure(model, args, kwargs)
    del model
    torch.cuda.empty_cache()
    predicted = roofline.predicted_seconds or 0.0
    return {
        "model": name,
        "batch": batch,
        "macs": profile.total_macs,
        "flops": profile.total_flops,
        "bytes": profile.total_bytes,
        "lower_bound_s": roofline.seconds,
        "predicted_s": predicted,
        "kernel_s": kernel_s,
        "eager_s": eager_s,
        "lower_bound_holds": (roofline.seconds or 0.0) <= kernel_s,
        "predicted_error": (predicted - eager_s) / eager_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="resnet50 and vit_b_16 only, and the LLaMA shape")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_estimate.py needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    models = ("resnet50", "vit_b_16") if args.quick else MODELS
    rows = [one(m, b) for m in models for b in BATCHES] + [one("llama", 1)]
    at64 = [abs(r["predicted_error"]) for r in rows if r["batch"] == 64]
    summary = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "lower_bound_never_above_kernel_time": all(r["lower_bound_holds"] for r in rows),
        "median_abs_predicted_error_batch64": statistics.median(at64) if at64 else None,
        "max_abs_predicted_error": max(abs(r["predicted_error"]) for r in rows),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "estimate_h100.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    lines = [
        f"# graphprof estimates against {summary['device']} (bf16, eager, torch {summary['torch']})",
        "",
        "| model | batch | bytes | lower bound | predicted | kernel time | eager forward | predicted vs eager | bound holds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['bytes'] / 1e9:.2f} GB | {r['lower_bound_s'] * 1e3:.2f} ms | "
            f"{r['predicted_s'] * 1e3:.2f} ms | {r['kernel_s'] * 1e3:.2f} ms | {r['eager_s'] * 1e3:.2f} ms | "
            f"{r['predicted_error']:+.0%} | {'yes' if r['lower_bound_holds'] else 'NO'} |"
        )
    lines += ["", f"Summary: {json.dumps(summary)}", ""]
    (args.out / "estimate_h100.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
