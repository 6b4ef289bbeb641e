"""Which target and which chip a kernel is written for, when the user names neither.

A Triton kernel's first IR is Triton IR and its chip a GPU (the H100 unless a
target names an architecture); a TPU kernel's are Mosaic TPU and the default TPU
generation. `diff` and `hints` read their figures against these.
"""

from __future__ import annotations

import re

from pallaslab._src.geometry.merit import Chip
from pallaslab._src.geometry.tilemap import schedule_of
from pallaslab._src.records import Kernel, hardware
from pallaslab._src.records.targets import DEFAULT_TPU_CHIP, parse_target

#: The GPU figures are read against when nothing names one.
DEFAULT_GPU = "H100"
# What GPU-style bodies do and TPU ones rarely do: masked loads and stores (printed
# `x <- a[:128] mask=m`) and atomics. A kernel doing them without compiler params is
# taken as written for a GPU.
_GPU_PRIMITIVES = re.compile(r"\smask=|= atomic_\w+\[")


def written_for_gpu(kernel: Kernel, backend: str = "") -> bool:
    """Whether a kernel runs on GPUs: its backend, its primitives, else the platform."""
    return triton_style(kernel) or schedule_of(kernel, backend) == "gpu"


def triton_style(kernel: Kernel) -> bool:
    """Whether the Triton backend runs the kernel: its params, or Triton-only primitives.

    Triton kernels read their BlockSpec blocks straight from global memory (a block
    is a window, not a copy in shared memory).
    """
    if kernel.backend or kernel.kind != "pallas_call" or kernel.dimension_semantics:
        return kernel.backend == "triton"
    return bool(_GPU_PRIMITIVES.search(kernel.jaxpr))


def kernel_family(kernel: Kernel) -> str:
    """The chips a kernel is written for: "gpu", "tpu", or "" when it does not say.

    Its compiler params or mesh say (Triton and Mosaic GPU params, `plgpu.kernel`, a
    GPU mesh: "gpu"; `pltpu.CompilerParams`, dimension semantics, a TPU mesh:
    "tpu"), else GPU-only primitives (masked loads, atomics). A plain `pallas_call`
    without them runs on either.
    """
    if kernel.kind == "plgpu.kernel" or kernel.backend in ("triton", "mosaic_gpu"):
        return "gpu"
    if kernel.backend == "mosaic_tpu" or kernel.dimension_semantics:
        return "tpu"
    return "gpu" if triton_style(kernel) else ""


def natural_target(kernel: Kernel, backend: str = "", chip: Chip | None = None) -> str:
    """The target a kernel is written for: its backend's first IR.

    Triton kernels: "triton" (TTIR); Mosaic GPU kernels: "mosaic-gpu"; TPU kernels:
    "mosaic-tpu:<chip>". A kernel without compiler params is a Triton kernel when it
    uses Triton-only primitives (masked loads, atomics); else it is written for the
    chip asked for, or the backend at hand (`grid.schedule_of`: the TPU's unless
    on a GPU, where JAX's default is Mosaic GPU).
    """
    tpu_chip = chip.name if isinstance(chip, hardware.Tpu) else DEFAULT_TPU_CHIP
    if kernel.kind == "plgpu.kernel" or kernel.backend == "mosaic_gpu":
        return "mosaic-gpu"
    if triton_style(kernel):
        return "triton"
    if kernel.backend == "mosaic_tpu":
        return f"mosaic-tpu:{tpu_chip}"
    gpu = isinstance(chip, hardware.Gpu) or (chip is None and written_for_gpu(kernel, backend))
    if gpu:
        # Without compiler params JAX lowers for GPUs with Mosaic GPU by default, on a
        # GPU; a CPU-only user picking a GPU gets Triton IR, which takes more kernels.
        return "mosaic-gpu" if backend in ("gpu", "cuda") else "triton"
    return f"mosaic-tpu:{tpu_chip}"


def chip_for(kernel: Kernel, target: str, backend: str = "") -> Chip:
    """The chip a target means: sm_90 is an H100, mosaic-tpu:v6e a v6e.

    Targets that name no chip (TTIR, Mosaic GPU) take the H100 for GPU kernels and
    the default TPU generation for TPU kernels.
    """
    parsed = parse_target(target)
    if parsed.arch.startswith("sm_"):
        for gpu in hardware.GPUS.values():
            if gpu.arch == parsed.arch:
                return gpu
        return hardware.gpu(DEFAULT_GPU)
    if parsed.kind in ("mosaic-tpu", "tpu-compile"):
        return hardware.tpu(parsed.arch)
    if parsed.kind in ("triton", "mosaic-gpu"):
        return hardware.gpu(DEFAULT_GPU)
    if written_for_gpu(kernel, backend):
        return hardware.gpu(DEFAULT_GPU)
    return hardware.tpu(DEFAULT_TPU_CHIP)
