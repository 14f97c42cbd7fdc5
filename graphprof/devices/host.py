"""The host that measured: CPU model and cores, torch's threads, the load, GPU name and memory, driver,
CUDA and torch versions."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Host", "detect_host", "load_average"]


@dataclass(frozen=True)
class Host:
    """The machine that measured: CPU model and cores, GPU name and memory, driver, CUDA and torch versions."""

    cpu: str
    cores: int | None
    platform: str
    torch: str
    gpu: str | None = None
    gpu_memory_bytes: int | None = None
    driver: str | None = None
    cuda: str | None = None
    #: torch's intra-op threads when the host was read (``torch.get_num_threads()``)
    threads: int | None = None
    #: the 1, 5 and 15 minute load averages (``/proc/loadavg``), ``None`` where the system has none
    loadavg: tuple[float, float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "cores": self.cores,
            "platform": self.platform,
            "torch": self.torch,
            "gpu": self.gpu,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "driver": self.driver,
            "cuda": self.cuda,
            "threads": self.threads,
            "loadavg": None if self.loadavg is None else list(self.loadavg),
        }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s, else the platform's)."""
    return _cpu_model()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi`` (torch does not expose it), or ``None``."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages (``os.getloadavg``, ``/proc/loadavg`` on Linux), or ``None``."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):  # Windows has none
        return None
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def detect_host(device: torch.device | str = "cpu") -> Host:
    """What this machine is, with torch's threads and the load now; GPU fields are filled for a CUDA ``device``."""
    dev = torch.device(device)
    gpu = memory = driver = cuda = None
    if dev.type == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(dev)
        gpu, memory, driver, cuda = props.name, int(props.total_memory), _driver(), torch.version.cuda
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else os.cpu_count()
    return Host(
        cpu=_cpu_model(),
        cores=cores,
        platform=platform.platform(),
        torch=torch.__version__,
        gpu=gpu,
        gpu_memory_bytes=memory,
        driver=driver,
        cuda=cuda,
        threads=torch.get_num_threads(),
        loadavg=load_average(),
    )
