"""Calibrate graphprof's predicted time for a hardware preset: fit achievable fractions of peak per op class.

Two modes:

* **measure** (on the device): time single kernels over a grid of sizes and the eager per-kernel host
  floor, write the raw records, fit them, and write the table::

      python benchmarks/calibrate.py --preset h100 --measure benchmarks/results/h100_ops_measured.json

* **fit** (anywhere): fit from recorded timings (the team's ``../shared/calibration/h100_ops.json`` or a
  file written by ``--measure``)::

      python benchmarks/calibrate.py --preset h100 --fit ../shared/calibration/h100_ops.json
      python benchmarks/calibrate.py --preset h200 --fit benchmarks/results/h200_ops_measured.json \
          --floors-from benchmarks/results/h200_graphprof_calibrate.json   # the host floor measured beside it

Either way the table lands in ``graphprof/devices/calibration/<preset>.json`` (package data; ``--out`` to write
elsewhere) and the fit's accuracy on its own records is printed and stored in the table.

The model is :mod:`graphprof.devices.predict`'s and the fit :func:`graphprof.calibrate.fit.fit_op_table`, the
same procedure `graphprof calibrate` applies to the local machine's table, here on each record's
back-to-back time (``stream_s``: launches overlapped). ``host_per_kernel_s``, the floor of one eager
kernel inside a model's forward, is measured on the device (a chain of small layers, eager, batch 1);
a file without it uses the one-call time of the one-element add (``median_s``: launch exposed).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphprof.calibrate.fit import fit_op_table, records_from_opbench  # noqa: E402
from graphprof.devices.hardware import get_hardware  # noqa: E402


def with_floors(raw: dict[str, Any], local: Path) -> dict[str, Any]:
    """``raw`` with the per-kernel host floor that ``graphprof calibrate --device cuda`` measured on the same GPU
    (``local``: the preset it wrote; one eager op inside a chain of small layers), where ``raw`` has none."""
    data = json.loads(local.read_text())
    device, own = data.get("device", {}).get("name"), raw.get("device")
    if device != own:
        raise SystemExit(f"--floors-from {local}: measured on {device!r}, the records on {own!r}")
    host = data["calibration"]["host_per_kernel_s"]
    return {**raw, "host_per_kernel_s": raw.get("host_per_kernel_s") or host,
            "host_per_kernel_from": f"graphprof calibrate --device cuda on the same {device} ({local.name})"}  # fmt: skip


def fit(raw: dict[str, Any], preset: str) -> dict[str, Any]:
    """The table of ``preset`` fitted to opbench-style records by graphprof's one fitting procedure."""
    hardware = get_hardware(preset)
    source = f"fitted by graphprof.calibrate.fit from {raw.get('device', '?')} timings (torch {raw.get('torch', '?')})"
    table = fit_op_table(records_from_opbench(raw), hardware, preset=preset, kind="cuda", source=source).to_dict()
    table["device"] = raw.get("device", "")
    table["host_per_kernel_source"] = (
        "measured: eager chain of small layers" + (f", {raw['host_per_kernel_from']}" if raw.get("host_per_kernel_from") else "")
        if raw.get("host_per_kernel_s")
        else "provisional: one eager op call with its launch exposed (median_s of a one-element add)"
    )
    return table


# ---- measuring (on the device) ---------------------------------------------------------------------


def _time(fn: Any) -> tuple[float, float]:
    """(median of single calls between CUDA events, per-call time of a back-to-back stream)."""
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    reps = int(min(200, max(5, 0.02 / max(start.elapsed_time(end) / 1e3, 1e-6))))
    singles = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        singles.append(start.elapsed_time(end) / 1e3)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return statistics.median(singles), start.elapsed_time(end) / 1e3 / reps


def _host_per_kernel() -> float:
    """Eager forward time per kernel of a host-bound chain (batch 1, 3 kernels per block)."""
    import torch
    from torch import nn

    blocks = 200
    chain = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()) for _ in range(blocks)])
    chain = chain.cuda().to(torch.bfloat16).eval()
    x = torch.randn(1, 64, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        for _ in range(3):
            chain(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            t = time.perf_counter()
            chain(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
    return statistics.median(times) / (3 * blocks)


def measure() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    records: list[dict[str, Any]] = []

    def add(op: str, tensors: list[Any], dtype: Any, flops: int, nbytes: int, fn: Any) -> None:
        single, stream = _time(fn)
        shapes = [list(t.shape) for t in tensors]
        records.append(
            {"op": op, "shapes": shapes, "dtype": str(dtype).removeprefix("torch."), "flops": flops,
             "bytes": nbytes, "median_s": single, "stream_s": stream}
        )  # fmt: skip

    def size(*ts: Any) -> int:
        return sum(t.numel() * t.element_size() for t in ts)

    dev = "cuda"
    with torch.inference_mode():
        for dt in (torch.bfloat16, torch.float32):
            one = torch.zeros(1, device=dev, dtype=dt)
            add("add_tiny", [one], dt, 1, 3 * one.element_size(), lambda one=one: one + one)
            for m in (16, 512, 2048, 8192):
                for n in (1024, 4096, 16384):
                    for k in (1024, 4096):
                        a = torch.randn(m, k, device=dev, dtype=dt)
                        b = torch.randn(k, n, device=dev, dtype=dt)
                        add("mm", [a, b], dt, 2 * m * n * k, size(a, b) + m * n * a.element_size(), lambda a=a, b=b: a @ b)
            for batch, heads, seq, dim, causal in (
                (1, 12, 197, 64, False), (64, 12, 197, 64, False), (8, 16, 1024, 64, False),
                (1, 32, 2048, 64, True), (1, 32, 2048, 128, True), (1, 32, 8192, 128, True),
            ):  # fmt: skip
                q = torch.randn(batch, heads, seq, dim, device=dev, dtype=dt)
                op = "sdpa_causal" if causal else "sdpa"
                add(op, [q, q, q], dt, 4 * batch * heads * seq * seq * dim, 4 * size(q),
                    lambda q=q, causal=causal: F.scaled_dot_product_attention(q, q, q, is_causal=causal))  # fmt: skip
            for shape, weight, groups in (
                ((1, 64, 56, 56), (64, 64, 3, 3), 1), ((64, 64, 56, 56), (64, 64, 3, 3), 1),
                ((64, 256, 56, 56), (64, 256, 1, 1), 1), ((64, 512, 7, 7), (512, 512, 3, 3), 1),
                ((64, 3, 224, 224), (64, 3, 7, 7), 1), ((64, 96, 56, 56), (96, 1, 3, 3), 96),
                ((1, 32, 112, 112), (32, 1, 3, 3), 32),
            ):  # fmt: skip
                x = torch.randn(shape, device=dev, dtype=dt).to(memory_format=torch.channels_last)
                w = torch.randn(weight, device=dev, dtype=dt).to(memory_format=torch.channels_last)
                pad = weight[-1] // 2
                y = F.conv2d(x, w, padding=pad, groups=groups)
                flops = 2 * y.numel() * weight[1] * weight[2] * weight[3]
                add("conv2d_dw" if groups > 1 else "conv2d", [x, w], dt, flops, size(x, w, y),
                    lambda x=x, w=w, pad=pad, groups=groups: F.conv2d(x, w, padding=pad, groups=groups))  # fmt: skip
            for numel in (4096, 1 << 20, 1 << 24, 1 << 27):
                x = torch.randn(numel, device=dev, dtype=dt)
                add("add", [x, x], dt, numel, 3 * size(x), lambda x=x: x + x)
                add("gelu", [x], dt, 8 * numel, 2 * size(x), lambda x=x: F.gelu(x))
                rows = x.view(-1, 1024) if numel >= 1024 else x.view(1, -1)
                add("softmax", [rows], dt, 5 * numel, 2 * size(x), lambda rows=rows: rows.softmax(-1))
                add("layer_norm", [rows], dt, 8 * numel, 2 * size(x),
                    lambda rows=rows: F.layer_norm(rows, rows.shape[-1:]))  # fmt: skip
                add("sum", [rows], dt, numel, size(x), lambda rows=rows: rows.sum(-1))
            for shape in ((1, 64, 56, 56), (64, 256, 56, 56)):
                x = torch.randn(shape, device=dev, dtype=dt)
                add("max_pool2d", [x], dt, 9 * x.numel() // 4, size(x) + size(x) // 4,
                    lambda x=x: F.max_pool2d(x, 3, 2, 1))  # fmt: skip
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "tf32": False,
        "host_per_kernel_s": _host_per_kernel(),
        "records": records,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="h100", help="hardware preset the table is for (default h100)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--fit", type=Path, metavar="RECORDS.json", help="fit from recorded timings")
    mode.add_argument("--measure", type=Path, metavar="RECORDS.json", help="measure on this GPU, save the records, fit")
    parser.add_argument(
        "--floors-from",
        type=Path,
        default=None,
        metavar="LOCAL.json",
        help="take the per-kernel host floor from a `graphprof calibrate --device cuda` preset of the same GPU",
    )
    parser.add_argument("--out", type=Path, default=None, help="table path (default graphprof/devices/calibration/<preset>.json)")
    args = parser.parse_args(argv)
    if args.measure is not None:
        raw = measure()
        args.measure.parent.mkdir(parents=True, exist_ok=True)
        args.measure.write_text(json.dumps(raw, indent=1) + "\n")
    else:
        raw = json.loads(args.fit.read_text())
    if args.floors_from is not None:
        raw = with_floors(raw, args.floors_from)
    table = fit(raw, args.preset)
    out = args.out or ROOT / "graphprof" / "devices" / "calibration" / f"{args.preset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n")
    acc = table["accuracy"]
    print(f"wrote {out}")
    for line in acc["dropped"]:
        print(f"dropped {line}")
    print(
        f"fit on {acc['records']} records: median |error| {acc['median_abs_error']:.1%}, "
        f"90th percentile {acc['p90_abs_error']:.1%}, max {acc['max_abs_error']:.1%} ({acc['worst']})"
    )
    for klass, err in acc["per_class_median_abs_error"].items():
        print(f"  {klass:15s} median |error| {err:.1%}")
    if not math.isfinite(acc["max_abs_error"]):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
