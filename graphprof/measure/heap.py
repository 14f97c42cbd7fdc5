"""The C heap brought to one known state before a CPU timing, so that a time does not depend on what the
process allocated before.

glibc's ``malloc`` serves a block above its *mmap threshold* from fresh pages (``mmap``) and gives it back
on free; below, from the heap, where a freed block is re-used. The threshold starts at 128 KiB and is
*dynamic*: each free of a mapped block larger than the threshold, up to 32 MiB (``DEFAULT_MMAP_THRESHOLD_MAX``
on 64-bit), raises it to that block's size, and the heap's trim threshold to twice that. So the same
forward runs at two speeds, depending on the process's history: in a fresh process, activations of a
few MiB come from the kernel's zeroed pages on every call (page faults on first touch), and once any
block near 32 MiB has been freed they are re-used. Measured on this 2-core machine, timm's
``mixer_s16_224`` at batch 8, fp32, 2 threads: 440-460 ms a forward in a fresh process, 360-380 ms after
one 31 MiB block was allocated and freed (three fresh processes each).

:func:`settle_malloc` allocates and frees one untouched block just under the maximum: the thresholds reach
their ceiling, which no later free lowers, so every timing after it (graphprof's own, a calibration's, a
fresh ``graphprof --measure`` process's) starts from the same thresholds. What the heap then does below
them, growing and trimming with the forward's live blocks, is the forward's own and is measured with it.
It costs one ``mmap`` and one ``munmap`` of pages never touched; the process's thresholds stay raised, as
any program that once frees a large tensor leaves them. Other C libraries (musl, macOS) have no such
threshold: the call is skipped. (Not the console script's ``graphprof_cli.process.settle_heap``, which
freezes Python's objects out of the garbage collector's walk.)
"""

from __future__ import annotations

import functools
import os

import torch

__all__ = ["STEADY_BLOCK_BYTES", "glibc", "keep_heap", "settle_malloc"]

#: A block whose mapped chunk (request, header and alignment, page-rounded) stays within glibc's
#: 32 MiB ceiling on the dynamic threshold, yet lies above every smaller threshold.
STEADY_BLOCK_BYTES = 32 * 2**20 - 4 * 4096


@functools.cache
def glibc() -> bool:
    """Whether this process's C library is glibc (whose malloc has the dynamic threshold)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError, AttributeError):
        return False


def settle_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds to their ceiling (see the module docstring); whether it did."""
    if not glibc():
        return False
    block = torch.empty(STEADY_BLOCK_BYTES, dtype=torch.uint8)
    del block
    return True


def keep_heap() -> bool:
    """Have glibc keep every block in its heap for the rest of the process: nothing mapped (``M_MMAP_MAX`` 0) and
    nothing given back (``M_TRIM_THRESHOLD`` 1 GiB), so that once the heap has grown to a forward's peak, later
    forwards fault no page; whether it did (glibc only). For a process of its own that measures what faults cost
    (:mod:`graphprof.calibrate.fresh_faults`): it changes the process's allocator for good."""
    if not glibc():
        return False
    import ctypes

    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(-4, 0)) and bool(libc.mallopt(-1, 2**30))  # M_MMAP_MAX, M_TRIM_THRESHOLD
