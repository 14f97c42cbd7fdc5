"""The settled C heap (graphprof.measure.heap), read off where a fresh process's blocks come from."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphprof.measure.heap import STEADY_BLOCK_BYTES, glibc

pytestmark = pytest.mark.skipif(
    not glibc() or sys.platform != "linux", reason="glibc's malloc only (other C libraries have no dynamic threshold)"
)

# A fresh process allocates a 16 MiB block and prints whether it lies in the brk heap ("[heap]" in
# /proc/self/maps: the heap, whose freed blocks are re-used) or in a mapping of its own (fresh pages on
# every allocation, given back on free).
_PROBE = """
import sys, torch
from graphprof.measure.heap import settle_malloc
if sys.argv[1] == "settled":
    assert settle_malloc()
block = torch.empty(16 * 2**20, dtype=torch.uint8)
where = block.data_ptr()
for line in open("/proc/self/maps"):
    span, *rest = line.split()
    low, high = (int(v, 16) for v in span.split("-"))
    if low <= where < high:
        print(rest[-1] if len(rest) >= 5 else "anonymous")
"""


def _home_of_a_block(state: str) -> str:
    done = subprocess.run([sys.executable, "-c", _PROBE, state], capture_output=True, text=True, check=True, timeout=120)
    return done.stdout.split()[-1]


def test_settled_heap_serves_a_16_mib_block_from_the_heap() -> None:
    # fresh: the threshold is 128 KiB, so a 16 MiB block gets a mapping of its own
    assert _home_of_a_block("fresh") == "anonymous"
    # settled: the threshold is at its 32 MiB ceiling, so the block comes from the heap, where it is re-used
    assert _home_of_a_block("settled") == "[heap]"


def test_steady_block_fits_under_the_ceiling() -> None:
    # the mapped chunk (request + 16-byte header + up to 64 bytes of alignment, page-rounded) must stay
    # within glibc's 32 MiB ceiling, or its free would not move the threshold at all
    chunk = -(-(STEADY_BLOCK_BYTES + 16 + 64) // 4096) * 4096
    assert 31 * 2**20 < chunk <= 32 * 2**20
