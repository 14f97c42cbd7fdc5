"""Profile every torchvision model and every packaged YOLO yaml (one scale each); record how each was captured.

    python benchmarks/capture_zoo.py [--filter TEXT] [--all-scales] [--out benchmarks/results/capture_zoo.md]

Writes a Markdown table (model, family, capture method, dry run or real, seconds, MACs, unsupported
ops, error) and prints a summary. The README's list of models that need a fallback comes from here.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import torch

from graphprof import profile_model
from graphprof.models import list_models


def _names(filter_text: str | None, all_scales: bool) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    seen_yaml: set[str] = set()
    for info in list_models(filter_text):
        if info.family == "hf":
            continue
        if info.family == "yolo" and not all_scales:
            # one scale per packaged yaml: the name with its scale letter removed identifies the file
            key = re.sub(r"^(yolov?\d+)[nslmxtbce]", r"\1", info.name)
            if key in seen_yaml:
                continue
            seen_yaml.add(key)
        out.append((info.name, info.family))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--filter", default=None)
    parser.add_argument("--all-scales", action="store_true")
    parser.add_argument("--out", default="benchmarks/results/capture_zoo.md")
    ns = parser.parse_args()
    names = _names(ns.filter, ns.all_scales)
    lines = ["| model | family | capture | run | seconds | MACs | unsupported ops | note |", "|---|---|---|---|---:|---:|---|---|"]
    counts: dict[str, int] = {}
    start_all = time.perf_counter()
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for i, (name, family) in enumerate(names, 1):
        start = time.perf_counter()
        try:
            p = profile_model(name)
            unsupported = ", ".join(f"{u.op} x{u.count}" for u in p.unsupported) or "-"
            failed = "; ".join(f"{m}: {e[:80]}" for m, e in p.capture_attempts)
            row = (name, family, p.capture_method, p.execution, f"{time.perf_counter() - start:.1f}",
                   f"{p.total_macs:,}", unsupported, failed.replace("|", "/"))  # fmt: skip
            counts[p.capture_method] = counts.get(p.capture_method, 0) + 1
        except Exception as exc:  # recorded, the run goes on
            row = (name, family, "FAILED", "-", f"{time.perf_counter() - start:.1f}", "-", "-",
                   f"{type(exc).__name__}: {str(exc)[:160]}".replace("|", "/").replace("\n", " "))  # fmt: skip
            counts["FAILED"] = counts.get("FAILED", 0) + 1
        lines.append("| " + " | ".join(row) + " |")
        print(f"[{i}/{len(names)}] " + " | ".join(row), flush=True)
        out.write_text("\n".join(lines) + "\n")
        torch._dynamo.reset()
    total = time.perf_counter() - start_all
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    lines.insert(0, f"# Capture over the zoo\n\n{len(names)} models in {total:.0f} s; {summary}\n")
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(names)} models in {total:.0f} s; {summary}")


if __name__ == "__main__":
    main()
