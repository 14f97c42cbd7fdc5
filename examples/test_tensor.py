"""Seed 000's ``test_tensor.py``: the ResNet18 walk-through, with graphprof's Profiler.

python examples/test_tensor.py [out_dir]
"""

from __future__ import annotations

import torch
import torchvision
from _common import out_dir

from graphprof.compat.seed000 import Profiler  # in place of: from utils.profiler import Profiler

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torchvision.models.resnet18().eval().to(device)
prof = Profiler(model, granularity="module", auto_profile=False, capture_ops=False)

x = torch.randn(1, 3, 64, 64, device=device)  # the seed uses 224 x 224; 64 x 64 keeps the example quick
base = out_dir() / "resnet18_profile"

# Pass 1: module-level graph
prof.profile_once(x)
prof.export(base, module_include_edges=True, include_stats=True, overwrite_module=True)

# Optional Pass 2: operator-level detail graph
prof.profile_detail(x)
prof.export(base, detail_include_edges=True, include_stats=True, overwrite_module=False)

print("==== Module Graph Stats ====")
prof.graph.stats()
if prof.detail_graph:
    print("==== Detail Graph Stats ====")
    prof.detail_graph.stats()

# Normal inference works as usual
_ = prof(x)
print(f"wrote {base}_module.txt and {base}_detail.txt")
