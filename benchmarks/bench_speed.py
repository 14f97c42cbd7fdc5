"""Profiling at the speed of the dispatcher (issue 24): the table of figures and ratios, in one run.

    python benchmarks/bench_speed.py            # every part but the zoo
    python benchmarks/bench_speed.py --zoo      # also the torchvision zoo, one process per model, serial
    python benchmarks/bench_speed.py llama fvcore quantized cli   # chosen parts

Targets (the issue's goals):
- Llama-3-8B config on the meta device, sequence 2048: ``profile_model`` within 1.5x of torch's
  ``FlopCounterMode`` (run under ``FakeTensorMode``, the only way that model runs without weights: its
  mask code calls ``.item()``, which a meta tensor refuses);
- resnet50 batch 32 (one model object with weights): at least 25x faster than fvcore's ``FlopCountAnalysis``;
- ``quantized_resnext101_64x4d``: the count stage never longer than propagate;
- ``graphprof --model yolov8n`` from the command line: at most 2.5 s wall;
- the whole torchvision zoo at defaults, one ``graphprof --model NAME`` process per model, serial: at most 5 min.

Each timed part runs in its own subprocess, so imports and caches of one do not help another. The load
average is printed beside the figures: the machine is small and may be shared.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cost import _best, flop_counter_flops, llama_8b_meta  # noqa: E402  (the same model and timer as the earlier cost benchmark)


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"


def part_llama() -> None:
    import graphprof

    model, ids, _ = llama_8b_meta()

    def flop_counter() -> int:
        return flop_counter_flops(model, ids)

    def graphprof_count() -> int:
        return graphprof.profile_model(model, example_kwargs={"input_ids": ids}).total_flops

    flops, ours = flop_counter(), graphprof_count()  # first calls: imports and caches out of the way
    t_fc, t_gp = _best(flop_counter), _best(graphprof_count)
    print(f"llama-3-8B config, meta, seq 2048: graphprof {t_gp:.3f} s, FlopCounterMode {t_fc:.3f} s, "
          f"ratio {t_gp / t_fc:.2f} (goal <= 1.5); FLOPs {ours:,} vs {flops:,} (matmul-only in torch's count); load {_load()}")  # fmt: skip


def part_fvcore() -> None:
    import torchvision
    from fvcore.nn import FlopCountAnalysis

    import graphprof

    model = torchvision.models.resnet50().eval()
    x = torch.randn(32, 3, 224, 224)

    def fv() -> None:
        analysis = FlopCountAnalysis(model, x)
        analysis.unsupported_ops_warnings(False)
        analysis.uncalled_modules_warnings(False)
        analysis.total()

    graphprof.profile_model(model, example_inputs=(x,))
    t_gp = _best(lambda: graphprof.profile_model(model, example_inputs=(x,)))
    t_fv = _best(fv, repeat=2)
    print(f"resnet50 batch 32, one model object: graphprof {t_gp:.3f} s, fvcore {t_fv:.3f} s, "
          f"fvcore/graphprof {t_fv / t_gp:.1f}x (goal >= 25); load {_load()}")  # fmt: skip


def part_quantized() -> None:
    import graphprof

    start = time.perf_counter()
    p = graphprof.profile_model("quantized_resnext101_64x4d")
    wall = time.perf_counter() - start
    stages = dict(p.timings)
    shown = ", ".join(f"{k} {v:.2f} s" for k, v in p.timings)
    print(f"quantized_resnext101_64x4d: {wall:.2f} s wall ({shown}); count/propagate "
          f"{stages['count'] / stages['propagate']:.2f} (goal <= 1); load {_load()}")  # fmt: skip


def part_cli() -> None:
    command = [sys.executable, "-m", "graphprof_cli.main", "--model", "yolov8n"]
    env = {**os.environ, "YOLO_OFFLINE": "1"}
    subprocess.run(command, env=env, capture_output=True, check=True)  # page cache, ultralytics settings file
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(command, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
    floor = min(_import_only(m) for m in ("torch", "torch, torchvision") for _ in range(1))
    print(f"graphprof --model yolov8n: {min(walls):.2f} s wall (best of 3; goal <= 2.5); "
          f"`import torch, torchvision` alone {floor:.2f} s; load {_load()}")


def _import_only(modules: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {modules}"], check=True)
    return time.perf_counter() - start


def part_zoo() -> None:
    from torchvision.models import list_models

    names = sorted(list_models())
    start = time.perf_counter()
    failed, methods = [], {}
    for name in names:
        run = subprocess.run(
            [sys.executable, "-m", "graphprof_cli.main", "--model", name, "--output", "-", "--format", "json"],
            capture_output=True, text=True,
        )  # fmt: skip
        if run.returncode != 0:
            failed.append(name)
            continue
        import json

        methods[name] = json.loads(run.stdout).get("capture_method", "?")
    wall = time.perf_counter() - start
    counts: dict[str, int] = {}
    for m in methods.values():
        counts[m] = counts.get(m, 0) + 1
    print(f"torchvision zoo, {len(names)} models, a process each, serial: {wall / 60:.1f} min (goal <= 5); "
          f"capture methods {counts}; failed {failed or 'none'}; load {_load()}")
    for name, method in methods.items():
        print(f"    {name}: {method}")


PARTS = {"llama": part_llama, "fvcore": part_fvcore, "quantized": part_quantized, "cli": part_cli, "zoo": part_zoo}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--run"]:
        PARTS[argv[1]]()
        return
    chosen = [a for a in argv if not a.startswith("--")] or ["llama", "fvcore", "quantized", "cli"]
    if "--zoo" in argv and "zoo" not in chosen:
        chosen.append("zoo")
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, {torch.get_num_threads()} threads; load {_load()}")
    for part in chosen:
        subprocess.run([sys.executable, __file__, "--run", part], check=False)


if __name__ == "__main__":
    main(sys.argv[1:])
