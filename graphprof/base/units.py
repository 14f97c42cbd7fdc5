"""Byte sizes as graphprof writes them everywhere, reports and messages alike: decimal units (kB = 1000 B).

>>> format_bytes(1536), format_bytes(47_466_000), format_bytes(3 * 2**30)
('1.54 kB', '47.47 MB', '3.22 GB')
"""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(value: float) -> str:
    """Bytes in decimal units: ``1536`` -> ``"1.54 kB"``, ``47_466_000`` -> ``"47.47 MB"``."""
    for factor, suffix in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {suffix}"
    return f"{int(value)} B"
