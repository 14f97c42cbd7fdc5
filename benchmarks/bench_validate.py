"""Cross-check graphprof against fvcore (or torch's FlopCounterMode) over the model zoo; write a Markdown report.

    python benchmarks/bench_validate.py                      # the zoo below, against fvcore, 2 jobs
    python benchmarks/bench_validate.py --against torch
    python benchmarks/bench_validate.py --models resnet18,vit_b_16 --jobs 1

The zoo: every torchvision classification model at its published evaluation size, every size of YOLOv8
and YOLO11 (detection, 640x640) and the built-in LLaMA config (``hf:llama``, 1x128 tokens), all at batch
1. Writes ``benchmarks/results/validate_<reference>.md`` (summary, run time, the table) and ``.json``
(every model's per-group comparison); prints one line per model as it finishes. No assertion: the
figures go in the issue notes.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import torch

from graphprof.base.atomic import write_atomic
from graphprof.crosscheck import CrossCheck, Status, iter_crosschecks
from graphprof.models import list_models
from graphprof.render import format_count
from graphprof.render.crosscheck import describe, render_json, render_markdown, summarize

RESULTS = Path(__file__).resolve().parent / "results"
YOLO = [f"yolov8{s}" for s in "nsmlx"] + [f"yolo11{s}" for s in "nsmlx"]
LLAMA = ["hf:llama"]


def zoo() -> list[str]:
    classification = [m.name for m in list_models() if m.family == "classification"]
    return classification + YOLO + LLAMA


def _line(result: CrossCheck, tolerance: float, done: int, total: int, elapsed: float) -> str:
    head = f"[{done}/{total} {elapsed / 60:5.1f} min] {result.model:28s} {result.seconds:6.1f}s  "
    if result.error is not None:
        return head + f"FAILED: {result.error}"
    causes = "; ".join(describe(e, result) for e in result.explanations()) or "-"
    return head + (
        f"{result.status(tolerance).value:9s} graphprof {format_count(result.graphprof_count):>8s} "
        f"{result.reference} {format_count(result.reference_count):>8s} acc {result.accuracy or 0:7.3f}% "
        f"after {result.accuracy_explained or 0:7.3f}%  {causes}"
    )


def _summary(results: list[CrossCheck], tolerance: float, seconds: float, jobs: int) -> str:
    s = summarize(results, tolerance)
    checked = [r for r in results if r.error is None]
    classification = [r for r in checked if r.family == "classification"]
    within = [r for r in checked if r.status(tolerance) is Status.AGREES]
    explained = [r for r in checked if r.status(tolerance) is Status.EXPLAINED]
    differs = [r for r in checked if r.status(tolerance) is Status.DIFFERS]
    reference = results[0].reference if results else "fvcore"
    lines = [
        f"# graphprof vs {reference}: the model zoo",
        "",
        f"- Run: {datetime.datetime.now().isoformat(timespec='seconds')}, {seconds / 60:.1f} min wall time for "
        f"{len(results)} models, {jobs} worker process(es) on {os.cpu_count()} CPU cores "
        f"({platform.machine()}, shared with other work); torch {torch.__version__}.",
        f"- Unit: {checked[0].unit if checked else '-'}. Inputs: each model's default input at batch 1.",
        f"- Tolerance: {tolerance:g}% of the reference's count, after the explained differences.",
        f"- **{len(within)} of {len(checked)}** models agree within {tolerance:g}% outright; "
        f"**{len(explained)}** more agree once the ops {reference} leaves out are counted; "
        f"**{len(differs)}** differ; {s['failed']} failed.",
        f"- torchvision classification: {sum(r.status(tolerance) is Status.AGREES for r in classification)} of "
        f"{len(classification)} within {tolerance:g}% outright, "
        f"{sum(r.status(tolerance) is Status.EXPLAINED for r in classification)} explained, "
        f"{sum(r.status(tolerance) is Status.DIFFERS for r in classification)} differ.",
    ]
    if explained or differs:
        lines += ["", "Exceptions:", ""]
        for r in explained + differs:
            causes = "; ".join(describe(e, r) for e in r.explanations())
            lines.append(f"- {r.model} ({r.status(tolerance).value}, accuracy {r.accuracy:.2f}%): {causes}")
    failed = [r for r in results if r.error is not None]
    if failed:
        lines += ["", "Failed:", ""] + [f"- {r.model}: {r.error}" for r in failed]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated models (default: the zoo)")
    parser.add_argument("--against", default="fvcore", choices=("fvcore", "torch"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.5, help="percent (default 0.5)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    options = parser.parse_args(argv)

    models = [m.strip() for m in options.models.split(",")] if options.models else zoo()
    options.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results: dict[int, CrossCheck] = {}
    for index, result in iter_crosschecks(models, against=options.against, jobs=options.jobs):
        results[index] = result
        print(_line(result, options.tolerance, len(results), len(models), time.perf_counter() - start), flush=True)
    seconds = time.perf_counter() - start
    ordered = [results[i] for i in range(len(models))]

    stem = options.out / f"validate_{options.against}"
    report = _summary(ordered, options.tolerance, seconds, options.jobs) + "\n" + render_markdown(ordered, options.tolerance)
    write_atomic(stem.with_suffix(".md"), report)
    write_atomic(stem.with_suffix(".json"), render_json(ordered, options.tolerance))
    print(f"wrote {stem.with_suffix('.md')} and {stem.with_suffix('.json')} in {seconds / 60:.1f} min")


if __name__ == "__main__":
    main(sys.argv[1:])
