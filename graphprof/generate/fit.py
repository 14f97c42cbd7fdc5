"""Will it fit: the largest context and batch whose weights, KV cache and activations fit in a device's memory.

Device memory is the preset's own figure (:attr:`graphprof.devices.hardware.Hardware.memory_gb`, from its
datasheet, in the vendor's GB = 10**9 bytes); a device without one (a custom device, a calibrated
``local`` one) takes ``memory_bytes`` from the caller, or, for a CPU (the generic desktop CPU too, whose
figure is only an assumption), this machine's physical memory.
"""

from __future__ import annotations

from graphprof.devices.hardware import Hardware, host_memory_bytes
from graphprof.generate.result import MemoryFit

__all__ = ["device_memory", "memory_fit"]

GB = 10**9


def device_memory(hardware: Hardware, memory_bytes: int | None = None) -> tuple[int, str] | None:
    """The device's memory in bytes and where the figure comes from; ``None`` when nothing says."""
    if memory_bytes is not None:
        return memory_bytes, "given"
    if hardware.memory_bytes is not None and not hardware.memory_assumed:
        return hardware.memory_bytes, f"{hardware.label} datasheet"
    if not hardware.is_gpu:
        host = host_memory_bytes()
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
