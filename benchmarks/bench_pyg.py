"""``pyg:gps`` at 10,000 nodes (average degree 5), as a dry run: how long graphprof takes, and what it counts.

    python benchmarks/bench_pyg.py [--nodes 10000] [--avg-degree 5]

Runs in a fresh interpreter (``import graphprof`` included in the figure, since a user pays it) and
prints one Markdown table: wall seconds of the whole ``profile_model`` and its stages (resolve,
capture, count...), the MACs and FLOPs, the attention's share, the unsupported ops (there must be none),
and the machine's load (``/proc/loadavg``): the machine is shared, so the time is noisy. Nothing is
computed for real: global attention over 10k nodes would be 10^8 scores per head per layer; the dry
run only propagates shapes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_RUN = """
import json, sys, time
t0 = time.perf_counter()
import graphprof
from graphprof.gnn.components import component_costs
t1 = time.perf_counter()
pm = graphprof.prepare(sys.argv[1])
p = pm.profile()
t2 = time.perf_counter()
costs = component_costs(p, pm.model)
print(json.dumps({
    "import_s": t1 - t0, "profile_s": t2 - t1, "timings": [list(t) for t in p.timings],
    "macs": p.total_macs, "flops": p.total_flops, "attention_flops": costs.flops("attention"),
    "mpnn_flops": costs.flops("mpnn"), "unsupported": [u.op for u in p.unsupported], "capture": p.capture_method,
    "params": p.total_params,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--avg-degree", type=float, default=5.0)
    options = parser.parse_args()
    spec = f"pyg:gps?num_nodes={options.nodes}&avg_degree={options.avg_degree:g}"
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    out = subprocess.run(
        [sys.executable, "-c", _RUN, spec], capture_output=True, text=True, check=True, cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'cli'}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    r = json.loads(out.stdout.strip().splitlines()[-1])
    stages = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in r["timings"])
    print("| model | nodes | edges | params | MACs | FLOPs | attention share | unsupported | capture | import | dry run | stages | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| `{spec}` | {options.nodes:,} | {round(options.nodes * options.avg_degree):,} | {r['params']:,} | {r['macs']:,} | "
        f"{r['flops']:,} | {r['attention_flops'] / r['flops']:.1%} | {', '.join(r['unsupported']) or 'none'} | {r['capture']} | "
        f"{r['import_s']:.2f} s | {r['profile_s']:.2f} s | {stages} | {' '.join(load)} |"
    )


if __name__ == "__main__":
    main()
