"""Device presets for the roofline: peak FLOP/s per dtype and memory bandwidth of real hardware.

This module is data. Each :class:`Hardware` carries the vendor's published figures with the document
they come from. Conventions:

* Peaks are **dense** (no 2:4 structured sparsity): NVIDIA's data-centre datasheets print Tensor Core
  figures *with* sparsity and say in a footnote that dense figures are one half of them; those are halved
  here, and the comment beside each preset shows the printed number.
* ``float32`` is the plain FP32 (CUDA core / SIMD) rate, which is what PyTorch uses for float32 matmuls
  unless TF32 is switched on (``torch.backends.cuda.matmul.allow_tf32``); the TF32 Tensor Core rate is
  listed as ``tf32`` for reference. ``float16``/``bfloat16`` are Tensor Core (matrix) rates with FP32
  accumulation where the vendor distinguishes it, as PyTorch's matmuls accumulate in FP32.
* A dtype a device has no published figure for falls back to its ``float32`` peak, and the roofline says
  so (see :meth:`Hardware.peak_for`).
* Units are the datasheets' own: TFLOP/s (10**12), GB/s (10**9 bytes per second) and memory in GB
  (10**9 bytes: a conservative reading of "80GB", whose HBM is 80 GiB).
* Every fact about a device is on its record: peaks, bandwidth, memory (``memory_gb``, from the same
  documents) and the substrings by which a CUDA device's name is recognised (``device_names``,
  :func:`match_hardware`). The partition planner, the generation estimate and the calibration read them
  from here.

Example::

    >>> h100 = get_hardware("h100")
    >>> round(h100.ridge_point("bfloat16"), 1)   # 989.5e12 FLOP/s / 3.35e12 B/s
    295.4
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from graphprof.base.choices import Lowering
from graphprof.devices.links import Link, Links
from graphprof.devices.local import LOCAL, learned_note, read_local, require_local
from graphprof.devices.table import Calibration, shipped_calibration, with_learned
from graphprof.errors import InvalidInputError

__all__ = [
    "PRECISIONS",
    "Hardware",
    "HARDWARE",
    "get_hardware",
    "local_hardware",
    "read_local_hardware",
    "list_hardware",
    "hardware_aliases",
    "custom_hardware",
    "resolve_hardware",
    "match_hardware",
    "host_memory_bytes",
]

#: The dtypes a preset may list a peak for, in display order (``tf32`` is informational).
PRECISIONS = ("float64", "float32", "tf32", "float16", "bfloat16", "float8")
_FALLBACK = "float32"


@dataclass(frozen=True)
class Hardware:
    """One device: peak arithmetic rate per dtype, DRAM bandwidth and memory, with where the figures come
    from, and how a CUDA device of this kind names itself.

    ``memory_gb`` is ``None`` where nothing says (a custom or calibrated device); ``memory_assumed`` marks a
    figure that is an assumption, not a datasheet's (the generic desktop CPU). ``device_names`` are
    lower-case substrings of ``torch.cuda.get_device_name()`` that mean this device.

    The record is the whole device, read once where it is named (:func:`get_hardware`): with its
    ``calibration`` (the table that predicts times on it: a preset's shipped one, the ``local`` file's with
    what it learned; ``None`` without one), what that calibration ``measured`` (the local file's ``device``:
    type, name, threads, torch) and the ``notes`` every prediction with it carries. Those three are not
    figures of the device: equality, hashing and ``repr`` leave them out.
    """

    name: str
    label: str
    kind: str
    peak_tflops: Mapping[str, float] = field(hash=False)
    bandwidth_gbs: float
    source: str
    memory_gb: float | None = None
    memory_assumed: bool = False
    device_names: tuple[str, ...] = ()
    calibration: Calibration | None = field(default=None, compare=False, repr=False)
    measured: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    notes: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: the links between GPUs of this kind, with their sources (:mod:`graphprof.devices.links`); ``None``: none published
    links: Links | None = field(default=None, compare=False, repr=False)
    #: streaming multiprocessors (NVIDIA GPUs; :data:`_SMS` gives the sources); ``None``: not a figure of this device
    sms: int | None = field(default=None, compare=False, repr=False)
    #: sustained over boost clock of tensor-core work at the power limit (:data:`_SUSTAINED_CLOCK`); ``None``: none published
    sustained_clock: float | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        unknown = set(self.peak_tflops) - set(PRECISIONS)
        if unknown:
            raise InvalidInputError(f"hardware {self.name!r}: unknown precision(s) {sorted(unknown)}")
        if _FALLBACK not in self.peak_tflops:
            raise InvalidInputError(f"hardware {self.name!r} needs a {_FALLBACK} peak")
        if self.bandwidth_gbs <= 0 or any(v <= 0 for v in self.peak_tflops.values()):
            raise InvalidInputError(f"hardware {self.name!r}: peaks and bandwidth must be positive")
        object.__setattr__(self, "peak_tflops", MappingProxyType(dict(self.peak_tflops)))
        if self.measured is not None:
            object.__setattr__(self, "measured", MappingProxyType(dict(self.measured)))

    @property
    def target(self) -> Lowering:
        """``cuda`` for an NVIDIA GPU (costs follow the fused kernels it runs, see :mod:`graphprof.run.lowering`),
        else ``cpu`` (the decomposition the profiling machine runs)."""
        return Lowering.CUDA if self.label.startswith("NVIDIA") else Lowering.CPU

    @property
    def is_gpu(self) -> bool:
        """Whether profiling for this device uses the CUDA lowering."""
        return self.target is Lowering.CUDA

    @property
    def memory_bytes(self) -> int | None:
        """Memory in bytes (GB x 10**9), or ``None`` when the record has no figure."""
        return None if self.memory_gb is None else int(self.memory_gb * 1e9)

    def matches(self, device_name: str) -> bool:
        """Whether a CUDA device called ``device_name`` (``"NVIDIA H100 80GB HBM3"``) is this device."""
        lowered = device_name.lower()
        return any(pattern in lowered for pattern in self.device_names)

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes per second."""
        return self.bandwidth_gbs * 1e9

    def peak_for(self, dtype: str) -> tuple[float, str]:
        """Peak FLOP/s for ``dtype`` and the precision it was read from (``float32`` when not listed)."""
        key = dtype if dtype in self.peak_tflops else _FALLBACK
        return self.peak_tflops[key] * 1e12, key

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype`` (see :meth:`peak_for` for the fallback)."""
        return self.peak_for(dtype)[0]

    def ridge_point(self, dtype: str) -> float:
        """FLOPs per byte above which a kernel is compute-bound on this device: peak / bandwidth."""
        return self.peak_flops(dtype) / self.bandwidth

    def with_overrides(self, *, peak_tflops: float | None = None, bandwidth_gbs: float | None = None) -> Hardware:
        """This device with its peak (every dtype) and/or bandwidth replaced by the given figures."""
        if peak_tflops is None and bandwidth_gbs is None:
            return self
        peaks = dict(self.peak_tflops)
        if peak_tflops is not None:
            peaks = {key: peak_tflops for key in peaks}
        return replace(
            self,
            label=f"{self.label} (custom figures)",
            peak_tflops=peaks,
            bandwidth_gbs=self.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs,
            source=f"{self.source}; overridden on the command line",
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "label": self.label,
            "kind": self.kind,
            "peak_tflops": dict(self.peak_tflops),
            "bandwidth_gbs": self.bandwidth_gbs,
            "source": self.source,
        }


#: Memory (``memory_gb``) comes from the same documents as the peaks: A100 80GB SXM datasheet (80GB HBM2e);
#: H100 datasheet, SXM and PCIe columns (80GB); H200 product page (141GB HBM3e); L4 datasheet (24GB GDDR6);
#: T4 datasheet (16GB GDDR6); Ada whitepaper, RTX 4090 (24GB GDDR6X); Jetson AGX Orin technical brief, 64GB
#: module (64GB LPDDR5, shared by CPU and GPU); Apple newsroom 2021-10-18 (M1 Max "up to 64GB" unified
#: memory, the largest configuration). The generic desktop CPU has no datasheet: 32GB, two 16GB DDR5 DIMMs,
#: is an assumption (``memory_assumed``). ``device_names`` keep the order in which CUDA names were matched
#: before (h200, h100, a100, l4, t4: no name holds two of them); the PCIe H100 is matched as the SXM one.
#: B200, H20 and the AMD Instinct parts (issue 39) follow H200, with their memory from the same documents
#: as their peaks; H20 after H200 (``"h200"`` holds ``"h20"``).

#: Dense TFLOP/s shared by two presets: Hopper SXM (H100 SXM, and H200 SXM on the same compute: the
#: datasheets' sparse figures / 2), and CDNA 3 (MI300X, and MI325X on the same compute).
_HOPPER_SXM_DENSE = (67.0, 67.0, 494.5, 989.5, 989.5, 1979.0)
_CDNA3_DENSE = (81.7, 163.4, 653.7, 1307.4, 1307.4, 2614.9)

# One row per preset, in display order. Peaks are dense TFLOP/s in the order of PRECISIONS (float64, float32,
# tf32, float16, bfloat16, float8); None where the vendor publishes no figure for that precision.
# fmt: off
_TABLE: tuple[tuple[str, str, str, tuple[float | None, ...], float, float, tuple[str, ...], str], ...] = (
    # (name, label, kind, peak TFLOP/s, bandwidth GB/s, memory GB, CUDA device names, source)
    # NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column):
    # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
    # FP64 Tensor Core 19.5, FP32 19.5, TF32 156 (312 sparse), BF16/FP16 312 (624 sparse) TFLOPS; 2,039 GB/s.
    ("a100", "NVIDIA A100 SXM4 80GB", "datacenter GPU", (19.5, 19.5, 156.0, 312.0, 312.0, None), 2039.0, 80.0, ("a100",),
     "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), A100 80GB SXM"),
    # NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column):
    # https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
    # FP64 Tensor Core 67, FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 3,958* TFLOPS (* with sparsity,
    # dense is one half); 3.35 TB/s.
    ("h100", "NVIDIA H100 SXM5 80GB", "datacenter GPU", _HOPPER_SXM_DENSE, 3350.0, 80.0, ("h100",),
     "NVIDIA H100 Tensor Core GPU datasheet (nvidia-tensor-core-gpu-datasheet), H100 SXM; dense = sparse / 2"),
    # Same datasheet, H100 PCIe column: FP64 TC 51, FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026*; 2 TB/s.
    ("h100-pcie", "NVIDIA H100 PCIe 80GB", "datacenter GPU", (51.0, 51.0, 378.0, 756.5, 756.5, 1513.0), 2000.0, 80.0, (),
     "NVIDIA H100 Tensor Core GPU datasheet (nvidia-tensor-core-gpu-datasheet), H100 PCIe; dense = sparse / 2"),
    # NVIDIA H200 Tensor Core GPU datasheet / product page (H200 SXM column):
    # https://www.nvidia.com/en-us/data-center/h200/
    # Same Hopper compute as H100 SXM (FP32 67, BF16/FP16 1,979*, FP8 3,958* TFLOPS); 141 GB HBM3e at 4.8 TB/s.
    ("h200", "NVIDIA H200 SXM 141GB", "datacenter GPU", _HOPPER_SXM_DENSE, 4800.0, 141.0, ("h200",),
     "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), H200 SXM; dense = sparse / 2"),
    # NVIDIA HGX B200 specifications (https://www.nvidia.com/en-us/data-center/hgx/), HGX B200 column, 8 GPUs:
    # FP64/FP64 Tensor 296 TF, FP32 600 TF, TF32 Tensor 18 PF*, FP16/BF16 Tensor 36 PF*, FP8 72 PF*
    # (* with sparsity), 1.4 TB HBM3e at 64 TB/s. Per GPU: FP64 37, FP32 75, TF32 1,125, BF16/FP16 2,250,
    # FP8 4,500 dense TFLOPS (sparse / 8 GPUs / 2); 180 GB at 8 TB/s.
    ("b200", "NVIDIA B200 180GB (HGX)", "datacenter GPU", (37.0, 75.0, 1125.0, 2250.0, 2250.0, 4500.0), 8000.0, 180.0, ("b200",),
     "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx), per GPU = HGX 8-GPU figure / 8; dense = sparse / 2"),
    # NVIDIA H20 (Hopper, export-compliant) product brief, as distributed to partners (no nvidia.com page):
    # FP64 1, FP32 44, TF32 Tensor 74, BF16/FP16 Tensor 148, FP8 Tensor 296 TFLOPS, printed without sparsity;
    # 96 GB HBM3 at 4.0 TB/s. Reported e.g. at https://www.tomshardware.com/news/nvidia-h20-h800-ai-gpu-specs
    # After h200 in this table: "h200" holds "h20", so an H200 is matched first.
    ("h20", "NVIDIA H20 96GB", "datacenter GPU", (1.0, 44.0, 74.0, 148.0, 148.0, 296.0), 4000.0, 96.0, ("h20",),
     "NVIDIA H20 product brief (partner distribution; no public nvidia.com datasheet), dense figures as printed"),
    # AMD Instinct MI300X data sheet:
    # https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf
    # FP64 vector 81.7, FP32 vector 163.4, TF32 matrix 653.7 (1,307.4 sparse), FP16/BF16 matrix 1,307.4
    # (2,614.9 sparse), FP8 2,614.9 (5,229.8 sparse) TFLOPS; 192 GB HBM3 at 5.3 TB/s.
    ("mi300x", "AMD Instinct MI300X 192GB", "datacenter GPU", _CDNA3_DENSE, 5300.0, 192.0, ("mi300x",),
     "AMD Instinct MI300X data sheet (amd-instinct-mi300x-data-sheet.pdf); dense figures (sparse / 2)"),
    # AMD Instinct MI325X data sheet:
    # https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/instinct-mi325x-datasheet.pdf
    # The MI300X's compute (FP64 vector 81.7, FP32 vector 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9
    # dense TFLOPS); 256 GB HBM3E at 6 TB/s.
    ("mi325x", "AMD Instinct MI325X 256GB", "datacenter GPU", _CDNA3_DENSE, 6000.0, 256.0, ("mi325x",),
     "AMD Instinct MI325X data sheet (instinct-mi325x-datasheet.pdf); dense figures (sparse / 2)"),
    # AMD Instinct MI355X product page and data sheet:
    # https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html
    # FP64 vector 78.6, FP32 vector 157.3, FP16/BF16 matrix 2,516.6 (5,033.2 sparse), FP8 5,033.2
    # (10,066.4 sparse) TFLOPS; CDNA 4 lists no TF32 rate; 288 GB HBM3E at 8 TB/s.
    ("mi355x", "AMD Instinct MI355X 288GB", "datacenter GPU", (78.6, 157.3, None, 2516.6, 2516.6, 5033.2), 8000.0, 288.0, ("mi355x",),
     "AMD Instinct MI355X product page and data sheet (amd.com/en/products/accelerators/instinct/mi350/mi355x.html); dense figures"),
    # NVIDIA L4 Tensor Core GPU datasheet:
    # https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet
    # FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485* TFLOPS (* with sparsity); 300 GB/s GDDR6.
    ("l4", "NVIDIA L4 24GB", "inference GPU", (None, 30.3, 60.0, 121.0, 121.0, 242.5), 300.0, 24.0, ("l4",),
     "NVIDIA L4 Tensor Core GPU datasheet (l4-gpu-datasheet); dense = sparse / 2"),
    # NVIDIA T4 Tensor Core GPU datasheet:
    # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf
    # FP32 8.1, mixed precision FP16/FP32 65 TFLOPS (Turing: no sparsity, no BF16); 320 GB/s GDDR6.
    ("t4", "NVIDIA T4 16GB", "inference GPU", (None, 8.1, None, 65.0, None, None), 320.0, 16.0, ("t4",),
     "NVIDIA T4 Tensor Core GPU datasheet (t4-tensor-core-datasheet-951643.pdf)"),
    # NVIDIA Ada Lovelace GPU architecture whitepaper, appendix table "GeForce RTX 4090":
    # https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf
    # FP32 82.6; TF32 Tensor 82.6 (165.2 sparse); FP16/BF16 Tensor with FP32 accumulate 165.2 (330.4 sparse;
    # 330.3 dense with FP16 accumulate, which PyTorch does not use); 1,008 GB/s GDDR6X.
    ("rtx4090", "NVIDIA GeForce RTX 4090", "desktop GPU", (None, 82.6, 82.6, 165.2, 165.2, 330.3), 1008.0, 24.0, (),
     "NVIDIA Ada Lovelace GPU architecture whitepaper (nvidia-ada-gpu-architecture.pdf), RTX 4090, FP32 accumulate"),
    # NVIDIA Jetson AGX Orin Series technical brief v1.2 and Jetson AGX Orin data sheet (64GB module):
    # https://www.nvidia.com/content/dam/en-zz/Solutions/gtcf21/jetson-orin/nvidia-jetson-agx-orin-technical-brief.pdf
    # GPU only (the DLAs are not counted): 2048 CUDA cores, 5.3 FP32 TFLOPS; 64 Tensor Cores, 170 sparse INT8
    # TOPS -> 85 dense INT8 -> 42.5 dense FP16/BF16 TFLOPS (Ampere Tensor Cores: FP16 at half the INT8 rate);
    # 256-bit LPDDR5, 204.8 GB/s.
    ("jetson-orin", "NVIDIA Jetson AGX Orin 64GB", "edge SoC", (None, 5.3, None, 42.5, 42.5, None), 204.8, 64.0, (),
     "NVIDIA Jetson AGX Orin Series technical brief v1.2 (nvidia-jetson-agx-orin-technical-brief.pdf), 64GB, GPU only"),
    # Apple newsroom, 18 Oct 2021, "Introducing M1 Pro and M1 Max" (400GB/s unified memory) and the same-day
    # Apple event (32-core GPU, 10.4 TFLOPS FP32):
    # https://www.apple.com/newsroom/2021/10/introducing-m1-pro-and-m1-max-the-most-powerful-chips-apple-has-ever-built/
    # Apple publishes no FP16/BF16 figure; those fall back to FP32.
    ("apple-m1-max", "Apple M1 Max (32-core GPU)", "laptop SoC", (None, 10.4, None, None, None, None), 400.0, 64.0, (),
     "Apple newsroom 2021-10-18 'Introducing M1 Pro and M1 Max' and Apple event (10.4 TFLOPS, 400GB/s)"),
    # A generic desktop CPU, derived rather than quoted: 8 cores x 4.0 GHz x 2 FMA units x 8 float32 lanes
    # (AVX2) x 2 FLOPs per FMA = 1.024 TFLOP/s (float64: 4 lanes, 0.512); dual-channel DDR5-4800:
    # 2 channels x 8 bytes x 4800 MT/s = 76.8 GB/s. FMA throughput: Intel 64 and IA-32 Architectures
    # Optimization Reference Manual (two FMA ports since Haswell/Zen 2); DDR5 rate: JEDEC JESD79-5.
    # Its memory has no datasheet: an assumption (_MEMORY_ASSUMED).
    ("desktop-cpu", "Generic desktop CPU (8 cores, AVX2, DDR5)", "desktop CPU", (0.512, 1.024, None, None, None, None), 76.8, 32.0, (),
     "derived: 8 x 4.0 GHz x 2 FMA x 8 lanes x 2 FLOPs; 2 x 8 B x 4800 MT/s (Intel optimization manual, JEDEC JESD79-5)"),
)
# fmt: on
_MEMORY_ASSUMED = frozenset({"desktop-cpu"})

_NVLINK4 = Link("nvlink", 450.0, "NVLink 4 through NVSwitch, 900 GB/s per GPU both ways",
                "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: NVLink 900GB/s")  # fmt: skip
_NDR_400 = Link("network", 50.0, "InfiniBand NDR, one 400 Gb/s ConnectX-7 per GPU",
                "NVIDIA DGX H100 datasheet: 8x single-port ConnectX-7 VPI, 400 Gb/s InfiniBand/Ethernet")  # fmt: skip
_XGMI = Link("xgmi", 448.0, "Infinity Fabric (xGMI), 7 links x 128 GB/s both ways, fully connected",
             "AMD Instinct MI300X data sheet: peak Infinity Fabric link bandwidth 128 GB/s, 7 links (896 GB/s)")  # fmt: skip

#: The links between GPUs, per preset (:mod:`graphprof.devices.links`): inside a node, and between nodes where a
#: system datasheet gives the network. One direction = the printed bidirectional figure / 2; Gb/s / 8 = GB/s.
_LINKS: Mapping[str, Links] = MappingProxyType({
    # A100 datasheet: NVLink 600GB/s (SXM); DGX A100 datasheet: 8x single-port ConnectX-6 200 Gb/s HDR
    "a100": Links(
        Link("nvlink", 300.0, "NVLink 3 through NVSwitch, 600 GB/s per GPU both ways",
             "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM: NVLink 600GB/s"),
        Link("network", 25.0, "InfiniBand HDR, one 200 Gb/s ConnectX-6 per GPU",
             "NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 VPI, 200 Gb/s HDR InfiniBand"),
    ),
    "h100": Links(_NVLINK4, _NDR_400),
    # H100 datasheet, PCIe column: NVLink bridge 600GB/s (pairs only), PCIe Gen5 128GB/s: a ring of more than
    # two cards runs over PCIe
    "h100-pcie": Links(Link("pcie", 64.0, "PCIe Gen5 x16, 128 GB/s both ways",
                            "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe: PCIe Gen5 128GB/s")),
    # H200 datasheet: NVLink 900GB/s; DGX H200 datasheet: 8x single-port ConnectX-7, 400 Gb/s
    "h200": Links(
        Link("nvlink", 450.0, "NVLink 4 through NVSwitch, 900 GB/s per GPU both ways",
             "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: NVLink 900GB/s"),
        Link("network", 50.0, "InfiniBand NDR, one 400 Gb/s ConnectX-7 per GPU",
             "NVIDIA DGX H200 datasheet: 8x single-port ConnectX-7 VPI, 400 Gb/s InfiniBand/Ethernet"),
    ),
    # HGX B200: NVLink 5, 1.8 TB/s per GPU; DGX B200 datasheet: 8x single-port ConnectX-7, 400 Gb/s
    "b200": Links(
        Link("nvlink", 900.0, "NVLink 5 through NVSwitch, 1.8 TB/s per GPU both ways",
             "NVIDIA HGX B200 specifications: NVLink 5, 1.8TB/s GPU-to-GPU"),
        Link("network", 50.0, "InfiniBand NDR, one 400 Gb/s ConnectX-7 per GPU",
             "NVIDIA DGX B200 datasheet: 8x single-port ConnectX-7 VPI, 400 Gb/s InfiniBand/Ethernet"),
    ),
    # H20 product brief: NVLink 900GB/s; no system datasheet for its network
    "h20": Links(Link("nvlink", 450.0, "NVLink 4, 900 GB/s per GPU both ways", "NVIDIA H20 product brief: NVLink 900GB/s")),
    "mi300x": Links(_XGMI),
    "mi325x": Links(Link("xgmi", 448.0, _XGMI.label, "AMD Instinct MI325X data sheet: Infinity Fabric 128 GB/s per link, 7 links")),
    # PCIe-only cards: the slot is the link (PCIe Gen4 x16 64 GB/s, Gen3 x16 32 GB/s, both ways)
    "l4": Links(Link("pcie", 32.0, "PCIe Gen4 x16, 64 GB/s both ways", "NVIDIA L4 Tensor Core GPU datasheet: PCIe Gen4 x16 64GB/s")),
    "t4": Links(Link("pcie", 16.0, "PCIe Gen3 x16, 32 GB/s both ways", "NVIDIA T4 Tensor Core GPU datasheet: PCIe Gen3 x16 32GB/s")),
    "rtx4090": Links(Link("pcie", 32.0, "PCIe Gen4 x16, 64 GB/s both ways", "NVIDIA Ada Lovelace GPU architecture whitepaper: RTX 4090, PCIe Gen4 x16, no NVLink")),
})  # fmt: skip

#: Streaming multiprocessors per GPU, from NVIDIA's architecture whitepapers: NVIDIA A100 Tensor Core GPU
#: Architecture (A100: 108 SMs); NVIDIA H100 Tensor Core GPU Architecture (H100 SXM5 132 SMs, H100 PCIe 114; the
#: H200 is the H100 SXM5's GH100 with HBM3e, 132); NVIDIA Blackwell architecture technical brief (B200: 148).
_SMS: Mapping[str, int] = MappingProxyType({"a100": 108, "h100": 132, "h100-pcie": 114, "h200": 132, "b200": 148})
#: Sustained / boost clock of tensor-core work at the power limit: the A100's 1,305 / 1,410 MHz, the clock NVIDIA's
#: published HPL Rpeak uses (https://glennklockwood.com/garden/peak-FLOPS). No such figure is published for the others.
_SUSTAINED_CLOCK: Mapping[str, float] = MappingProxyType({"a100": 1305.0 / 1410.0})

_PRESETS = tuple(
    Hardware(
        name=name,
        label=label,
        kind=kind,
        peak_tflops={key: peak for key, peak in zip(PRECISIONS, peaks, strict=True) if peak is not None},
        bandwidth_gbs=bandwidth_gbs,
        source=source,
        memory_gb=memory_gb,
        memory_assumed=name in _MEMORY_ASSUMED,
        device_names=device_names,
        calibration=shipped_calibration(name),
        links=_LINKS.get(name),
        sms=_SMS.get(name),
        sustained_clock=_SUSTAINED_CLOCK.get(name),
    )
    for name, label, kind, peaks, bandwidth_gbs, memory_gb, device_names, source in _TABLE
)

#: The presets by name, in display order.
HARDWARE: Mapping[str, Hardware] = MappingProxyType({h.name: h for h in _PRESETS})

_ALIASES = {
    "a100-sxm": "a100", "a100-80gb": "a100", "h100-sxm": "h100", "h200-sxm": "h200", "4090": "rtx4090",
    "rtx-4090": "rtx4090", "orin": "jetson-orin", "agx-orin": "jetson-orin", "orin-agx": "jetson-orin", "m1-max": "apple-m1-max", "cpu": "desktop-cpu",
}  # fmt: skip


def list_hardware() -> tuple[Hardware, ...]:
    """Every preset, in display order."""
    return tuple(HARDWARE.values())


def hardware_aliases(name: str) -> tuple[str, ...]:
    """The other names ``--hardware`` and ``--devices`` accept for the preset ``name`` (``orin-agx`` for ``jetson-orin``)."""
    return tuple(alias for alias, target in _ALIASES.items() if target == name)


def get_hardware(name: str) -> Hardware:
    """The preset called ``name`` (case-insensitive; ``_`` and ``-`` alike), or :class:`InvalidInputError`.

    ``"local"`` is the machine ``graphprof calibrate`` measured; without its file, an error says to run it.
    """
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = _ALIASES.get(key, key)
    if key == LOCAL:  # the machine `graphprof calibrate` measured (graphprof.devices.local): its file, read once
        return local_hardware(require_local())
    if key in HARDWARE:
        return HARDWARE[key]
    close = difflib.get_close_matches(key, list(HARDWARE) + list(_ALIASES), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InvalidInputError(f"unknown hardware {name!r}{hint} (presets: {', '.join(HARDWARE)}, local; `graphprof hardware` lists them)")


def local_hardware(data: Mapping[str, Any], path: Path | None = None) -> Hardware:
    """The ``local`` preset from its file's contents, as :func:`graphprof.devices.local.read_local` read them
    from ``path`` (default: :func:`graphprof.devices.local.local_path`): its figures, its calibration with
    the samples learned from the user's runs, what it measured, and the note on damaged learned records."""
    note = learned_note(data, path)
    device = data.get("device")
    busy = device.get("busy") if isinstance(device, Mapping) else None
    busy_note = f"the local calibration is noisy ({busy}): run `graphprof calibrate` again on a quiet machine" if busy else None
    calibration = with_learned(Calibration.from_dict(data["calibration"]), data.get("learned", ()))
    calibration, speed_note = _at_speed_now(calibration, device)
    return Hardware(
        **data["hardware"],
        calibration=calibration,
        measured=device if isinstance(device, Mapping) else None,
        notes=tuple(n for n in (note, busy_note, speed_note) if n),
    )


def _at_speed_now(calibration: Calibration, device: object) -> tuple[Calibration, str | None]:
    """``calibration`` scaled to this machine's speed now, where the calibration timed the probe
    (:mod:`graphprof.devices.probe`, ``device.probe_s``), with a note; as it is otherwise."""
    then = device.get("probe_s") if isinstance(device, Mapping) else None
    if (
        not isinstance(device, Mapping)
        or not isinstance(then, (int, float))
        or isinstance(then, bool)
        or then <= 0
        or calibration.op_model is None
    ):
        return calibration, None
    from graphprof.devices.probe import READINGS, SPEED_LIMITS, band_of, probe_now, speed_factor_beyond

    band = band_of(_readings(device, "probes_s") + _readings(device, "fresh_probes_s"))
    now = probe_now()
    factor = speed_factor_beyond(float(then), now, band)
    if factor is None:
        return calibration, (f"the speed probe ran {now * 1e3:.2f} ms now against {then * 1e3:.2f} ms when calibrated, outside "
                             f"{SPEED_LIMITS[0]}-{SPEED_LIMITS[1]}x: predictions not scaled; run `graphprof calibrate` again")  # fmt: skip
    within = f" (its readings spanned {band[0] * 1e3:.2f}-{band[1] * 1e3:.2f} ms)" if band is not None else ""
    return replace(calibration, speed=factor), (
        f"predicted at this machine's speed now: the speed probe ran {now * 1e3:.2f} ms (the median of {READINGS} readings) "
        f"against {then * 1e3:.2f} ms when calibrated (the speed its table stands at){within}, so the calibration's times are scaled by {factor:.2f}"
    )


def _readings(device: Mapping[str, Any], key: str) -> list[float]:
    """The probe readings a local file's ``device`` keeps under ``key`` (none where it keeps none)."""
    found = device.get(key)
    return [float(r) for r in found if isinstance(r, (int, float)) and not isinstance(r, bool)] if isinstance(found, list) else []


def read_local_hardware(path: Path | None = None) -> Hardware | None:
    """The ``local`` preset as its file holds it, or ``None`` without a file: not checked current, for a
    caller that judges a calibration of another thread count itself (the partition planner); ``--hardware
    local`` is :func:`get_hardware`, which refuses a stale file."""
    data = read_local(path)
    return None if data is None else local_hardware(data, path)


def _check_figure(label: str, value: object) -> None:
    """A device figure must be a positive, finite number: NaN, infinity, zero and negatives are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{label} must be a positive finite number, got {value!r}")


def custom_hardware(peak_tflops: float, bandwidth_gbs: float, name: str = "custom") -> Hardware:
    """A device given by its figures alone: one peak for every dtype, and a bandwidth."""
    _check_figure("peak_tflops", peak_tflops)
    _check_figure("bandwidth_gbs", bandwidth_gbs)
    return Hardware(
        name=name,
        label=f"custom device ({peak_tflops:g} TFLOP/s, {bandwidth_gbs:g} GB/s)",
        kind="custom",
        peak_tflops={key: peak_tflops for key in PRECISIONS},
        bandwidth_gbs=bandwidth_gbs,
        source="given on the command line",
    )


def resolve_hardware(name: str | None = None, *, peak_tflops: float | None = None, bandwidth_gbs: float | None = None) -> Hardware | None:
    """The device the options describe: a preset (optionally with figures overridden), a custom device, or none.

    ``resolve_hardware()`` is ``None`` (the roofline then uses the seeds' fixed threshold);
    ``resolve_hardware("h100")`` the preset; ``resolve_hardware(peak_tflops=100, bandwidth_gbs=1000)`` a
    custom device, which needs both figures.
    """
    for label, value in (("--peak-tflops (peak_tflops)", peak_tflops), ("--bandwidth-gbs (bandwidth_gbs)", bandwidth_gbs)):
        if value is not None:
            _check_figure(label, value)
    if name is not None:
        return get_hardware(name).with_overrides(peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
    if peak_tflops is None and bandwidth_gbs is None:
        return None
    if peak_tflops is None or bandwidth_gbs is None:
        raise InvalidInputError("a custom device needs both --peak-tflops and --bandwidth-gbs (or a --hardware preset)")
    return custom_hardware(peak_tflops, bandwidth_gbs)


def match_hardware(device_name: str) -> Hardware | None:
    """The preset a CUDA device called ``device_name`` is (by its ``device_names``), or ``None``.

    >>> match_hardware("NVIDIA H100 80GB HBM3").name, match_hardware("NVIDIA GeForce GTX 1080") is None
    ('h100', True)
    """
    return next((h for h in _PRESETS if h.matches(device_name)), None)


def host_memory_bytes() -> int | None:
    """This machine's physical memory in bytes (``os.sysconf``); ``None`` on a host that does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX host
        return None
