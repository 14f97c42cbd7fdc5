"""The host that measured: CPU model and cores, GPU name and memory, driver, CUDA and torch versions."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import torch

from graphprof.measure.result import Host

__all__ = ["detect_host"]


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


def detect_host(device: torch.device | str = "cpu") -> Host:
    """What this machine is; GPU fields are filled for a CUDA ``device``."""
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
    )
