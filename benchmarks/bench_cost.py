"""Speed and memory of the cost model (issue: exact cost model). Prints figures and ratios.

    python benchmarks/bench_cost.py            # all parts
    python benchmarks/bench_cost.py batch      # resnet50 batch 1 vs 64, and vs fvcore at batch 32
    python benchmarks/bench_cost.py llama [--capture default|eager|dynamo]   # Llama-3-8B-shaped model on meta
    python benchmarks/bench_cost.py stages     # where time goes: resnet50, yolov8n, the LLaMA

Each part that reports a peak RSS runs in a fresh subprocess, so one part's memory does not count
against another. Targets: batch 64 within 1.5x of batch 1; at least 5x faster than fvcore at batch 32;
the LLaMA within 2x of FlopCounterMode, peak RSS < 2 GiB, MACs within 0.5% of the analytic count.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from typing import Any

import torch

CAPTURES = {"default": None, "eager": ("eager",), "dynamo": ("dynamo.export",)}

LLAMA_8B = dict(
    hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
    intermediate_size=14336, vocab_size=128256,
)  # fmt: skip


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def part_batch() -> None:
    import torchvision

    import graphprof

    graphprof.profile_model("resnet50")  # imports and first-call set-up out of the way
    t1 = _best(lambda: graphprof.profile_model("resnet50", batch_size=1))
    t64 = _best(lambda: graphprof.profile_model("resnet50", batch_size=64))
    print(f"resnet50 profile_model: batch 1 {t1:.3f}s, batch 64 {t64:.3f}s, ratio {t64 / t1:.2f} (target <= 1.5)")

    from fvcore.nn import FlopCountAnalysis

    model = torchvision.models.resnet50().eval()
    x = torch.randn(32, 3, 224, 224)
    t_gp = _best(lambda: graphprof.profile_model(model, example_inputs=(x,)), repeat=2)

    def fv() -> None:
        analysis = FlopCountAnalysis(model, x)
        analysis.unsupported_ops_warnings(False)
        analysis.uncalled_modules_warnings(False)
        analysis.total()

    t_fv = _best(fv, repeat=2)
    print(f"resnet50 batch 32 (same model object): graphprof {t_gp:.3f}s, fvcore FlopCountAnalysis {t_fv:.3f}s, "
          f"fvcore/graphprof {t_fv / t_gp:.1f}x (target >= 5)")  # fmt: skip


def llama_8b_meta(tokens: int = 2048) -> tuple[Any, Any, Any]:
    """``(model, input ids, config)``: the Llama-3-8B shape on the meta device, sequence ``tokens``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**LLAMA_8B, use_cache=False, attn_implementation="sdpa")
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg).eval()
    return model, torch.randint(0, cfg.vocab_size, (1, tokens), device="meta"), cfg


def flop_counter_flops(model: Any, ids: Any) -> int:
    """torch's ``FlopCounterMode`` total for one forward under ``FakeTensorMode`` (the model asks for
    ``.item()`` in its mask code, which a meta tensor refuses)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode, torch.no_grad():
        fake_ids = mode.from_tensor(ids)
        with FlopCounterMode(display=False) as counter:
            model(input_ids=fake_ids)
    return int(counter.get_total_flops())


def _llama(capture: str) -> None:
    import graphprof

    model, ids, cfg = llama_8b_meta()

    def flop_counter() -> int:
        return flop_counter_flops(model, ids) // 2

    flop_counter()
    start = time.perf_counter()
    fc_macs = flop_counter()
    t_fc = time.perf_counter() - start
    start = time.perf_counter()
    p = graphprof.profile_model(model, example_kwargs={"input_ids": ids}, methods=CAPTURES[capture])
    t_gp = time.perf_counter() - start
    h, kv, tokens = cfg.hidden_size, cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads), 2048
    weights = cfg.num_hidden_layers * (2 * h * h + 2 * h * kv + 3 * h * cfg.intermediate_size) + h * cfg.vocab_size
    attention = cfg.num_hidden_layers * 2 * cfg.num_attention_heads * tokens * tokens * (h // cfg.num_attention_heads)
    analytic = tokens * weights + attention
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    stages = ", ".join(f"{k} {v:.2f}s" for k, v in p.timings)
    print(f"llama-8B shape, seq 2048, capture={capture} ({p.capture_method}): graphprof {t_gp:.2f}s, "
          f"FlopCounterMode {t_fc:.2f}s, ratio {t_gp / t_fc:.2f} (target <= 2); peak RSS {rss:.2f} GiB (target < 2)")  # fmt: skip
    print(f"    MACs {p.total_macs:,}; analytic {analytic:,}; diff {100 * (p.total_macs - analytic) / analytic:+.4f}%; "
          f"FlopCounterMode/2 {fc_macs:,}; stages: {stages}")  # fmt: skip


def part_stages() -> None:
    import graphprof
    from graphprof.render import render_report

    graphprof.profile_model("resnet18")
    for name in ("resnet50", "yolov8n"):
        p = graphprof.profile_model(name)
        from rich.console import Console

        start = time.perf_counter()
        Console(width=100, file=open("/dev/null", "w")).print(render_report(p))
        render = time.perf_counter() - start
        stages = ", ".join(f"{k} {v:.3f}s" for k, v in p.timings)
        print(f"{name} ({p.capture_method}, {p.execution}): {stages}, render {render:.3f}s")


def main(argv: list[str]) -> None:
    parts = [a for a in argv if not a.startswith("--")] or ["batch", "stages", "llama"]
    capture = argv[argv.index("--capture") + 1] if "--capture" in argv else None
    for part in parts:
        if part == "llama" and capture is None:
            for choice in ("default", "dynamo"):
                subprocess.run([sys.executable, __file__, "llama-run", "--capture", choice], check=False)
        elif part == "llama":
            subprocess.run([sys.executable, __file__, "llama-run", "--capture", capture], check=False)
        elif part == "llama-run":
            _llama(capture or "default")
        elif part == "batch":
            part_batch()
        elif part == "stages":
            part_stages()


if __name__ == "__main__":
    main(sys.argv[1:])
