"""Will it fit: the largest context and batch whose weights, KV cache and activations fit in a device's memory.

Device memory is the datasheet's figure for each preset of :mod:`graphprof.hardware` (the same
documents), in the vendor's units (GB = 10**9 bytes: a conservative reading of "80GB", whose HBM is
80 GiB); a preset not listed here (a custom device, a calibrated ``local`` one) takes ``memory_bytes``
from the caller, or, for a CPU, this machine's physical memory.
"""

from __future__ import annotations

import os
from types import MappingProxyType

from graphprof.generate.result import MemoryFit
from graphprof.hardware import Hardware

__all__ = ["DEVICE_MEMORY_GB", "device_memory", "memory_fit"]

GB = 10**9

#: Memory per preset, GB, from the datasheets :mod:`graphprof.hardware` cites (A100 80GB SXM, H100 SXM /
#: PCIe 80GB, H200 141GB, L4 24GB, T4 16GB, RTX 4090 24GB, Jetson AGX Orin 64GB shared with the CPU,
#: M1 Max up to 64GB unified). The generic desktop CPU has none: the host's memory is used.
DEVICE_MEMORY_GB = MappingProxyType(
    {
        "a100": 80,
        "h100": 80,
        "h100-pcie": 80,
        "h200": 141,
        "l4": 24,
        "t4": 16,
        "rtx4090": 24,
        "jetson-orin": 64,
        "apple-m1-max": 64,
    }
)


def _host_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX host
        return None


def device_memory(hardware: Hardware, memory_bytes: int | None = None) -> tuple[int, str] | None:
    """The device's memory in bytes and where the figure comes from; ``None`` when nothing says."""
    if memory_bytes is not None:
        return memory_bytes, "given"
    if hardware.name in DEVICE_MEMORY_GB:
        return DEVICE_MEMORY_GB[hardware.name] * GB, f"{hardware.label} datasheet"
    if not hardware.is_gpu:
        host = _host_memory()
        if host is not None:
            return host, "this machine's physical memory"
    return None


def memory_fit(
    *,
    capacity: tuple[int, str],
    weight_bytes: int,
    kv_bytes_per_token: int,
    activation_bytes: int,
    activation_tokens: int,
    batch: int,
    final_context: int,
    max_positions: int | None,
) -> MemoryFit:
    """Weights + KV cache + activations against ``capacity`` (see :class:`MemoryFit`).

    >>> f = memory_fit(capacity=(80 * GB, "x"), weight_bytes=16 * GB, kv_bytes_per_token=131072,
    ...                activation_bytes=0, activation_tokens=1, batch=1, final_context=1279, max_positions=None)
    >>> f.max_context                       # (80e9 - 16e9) // 131072
    488281
    """
    per_token = kv_bytes_per_token + -(-activation_bytes // max(activation_tokens, 1))
    free = capacity[0] - weight_bytes
    max_context = max(free // (batch * per_token), 0) if free > 0 else 0
    if max_positions is not None:
        max_context = min(max_context, max_positions)
    max_batch = max(free // (final_context * per_token), 0) if free > 0 else 0
    kv = kv_bytes_per_token * final_context * batch
    return MemoryFit(
        device_memory_bytes=capacity[0],
        memory_source=capacity[1],
        weight_bytes=weight_bytes,
        kv_cache_bytes=kv,
        activation_bytes=activation_bytes,
        activation_bytes_per_token=per_token - kv_bytes_per_token,
        fits=weight_bytes + kv + activation_bytes <= capacity[0],
        max_context=max_context,
        max_positions=max_positions,
        max_batch=max_batch,
    )
