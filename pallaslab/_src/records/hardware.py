"""Published figures for the chips kernels are written for: a small, sourced table.

Used for occupancy (registers, shared memory, warps per SM), working-set checks
(shared memory, VMEM) and rooflines (peak FLOP/s and memory bandwidth). Figures are
per GPU or per TPU chip, dense (no structured sparsity: NVIDIA's datasheets print
tensor-core peaks with 2:4 sparsity, twice the dense ones), from the sources named in
each entry (the addresses are in the comments above the tables). A figure no vendor
publishes is listed in `UNPUBLISHED` with where it comes from instead.
`tests/test_hardware_sources.py` holds a second copy of every figure, typed from the
sources with the words they print, and checks this table against it. No JAX here.
"""

from __future__ import annotations

import dataclasses

KiB = 1024
MiB = 1024 * KiB


@dataclasses.dataclass(frozen=True)
class Gpu:
    """An NVIDIA GPU.

    Attributes:
        name: Short name ("H100").
        full_name: Product name and memory variant.
        device_kind: The name the CUDA driver reports for it (`cudaDeviceProp::name`,
            `nvidia-smi`), which JAX's devices give as `device_kind`.
        compute_capability: (major, minor), e.g. (9, 0) for sm_90.
        sms: Streaming multiprocessors.
        registers_per_sm: 32-bit registers per SM.
        max_registers_per_thread: Registers one thread may use.
        max_threads_per_sm: Resident threads per SM.
        max_blocks_per_sm: Resident thread blocks (CTAs) per SM.
        shared_memory_per_sm: Shared memory an SM can give to blocks, bytes.
        max_shared_memory_per_block: Shared memory one block may opt in to, bytes.
        reserved_shared_memory_per_block: Shared memory the system reserves per block.
        l2_bytes: L2 cache size.
        memory_bytes: Device memory.
        memory_bandwidth: Bytes per second, device memory.
        bf16_flops: Dense BF16 tensor-core FLOP/s (FP32 accumulate).
        fp32_flops: FP32 (non-tensor) FLOP/s.
        source: Where the figures come from.
    """

    name: str
    full_name: str
    device_kind: str
    compute_capability: tuple[int, int]
    sms: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_memory_per_sm: int
    max_shared_memory_per_block: int
    reserved_shared_memory_per_block: int
    l2_bytes: int
    memory_bytes: int
    memory_bandwidth: float
    bf16_flops: float
    fp32_flops: float
    source: str

    @property
    def arch(self) -> str:
        """The PTX/SASS target, e.g. "sm_90"."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def max_warps_per_sm(self) -> int:
        """Resident warps per SM."""
        return self.max_threads_per_sm // 32


@dataclasses.dataclass(frozen=True)
class Tpu:
    """A Google TPU chip.

    Attributes:
        name: Generation as pallaslab targets name it ("v5e").
        full_name: Product name.
        device_kind: The device kind JAX's TPU devices report (what Pallas' `tpu_info`
            knows the chip by).
        tensor_cores: TensorCores per chip.
        vmem_per_core: Vector memory per TensorCore, bytes.
        smem_per_core: Scalar memory per TensorCore, bytes.
        memory_bytes: HBM per chip.
        memory_bandwidth: HBM bytes per second, per chip.
        bf16_flops: Peak BF16 FLOP/s per chip.
        mxu_size: Systolic array size (128 or 256).
        default_scoped_vmem: The scoped VMEM a kernel may allocate unless its
            `pltpu.CompilerParams(vmem_limit_bytes=...)` says otherwise (libtpu's
            `--xla_tpu_scoped_vmem_limit_kib` default).
        source: Where the figures come from.
    """

    name: str
    full_name: str
    device_kind: str
    tensor_cores: int
    vmem_per_core: int
    smem_per_core: int
    memory_bytes: int
    memory_bandwidth: float
    bf16_flops: float
    mxu_size: int
    default_scoped_vmem: int
    source: str


_CUDA_GUIDE = "CUDA C++ Programming Guide, 'Compute Capabilities' table"

# Sources (the tests quote each figure from them):
# - CUDA C++ Programming Guide, "Technical Specifications per Compute Capability":
#   https://docs.nvidia.com/cuda/cuda-c-programming-guide/#features-and-technical-specifications
#   (registers, threads, blocks and shared memory per SM; KB there is 1024 bytes).
# - A100: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
#   and the Ampere whitepaper (SMs, L2):
#   https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf
# - H100: https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
#   and the Hopper whitepaper (SMs, L2, 66.9 / 989.4 TFLOPS):
#   https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper
# - H200: https://www.nvidia.com/en-us/data-center/h200/
# - B200: the HGX B200 column of https://www.nvidia.com/en-us/data-center/hgx/ (per GPU)
# - L4: https://resources.nvidia.com/en-us-gpu-resources/l4-tensor-datasheet
# - RTX 4090: https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf
# - Device kinds: the product name the CUDA driver reports (cudaDeviceProp::name, as
#   `nvidia-smi --query-gpu=name` prints it), which JAX's GPU devices give as
#   `device_kind`; JAX's own code matches them by prefix ("NVIDIA H100", "NVIDIA B200" ...
#   in jax/_src/pallas/triton/gpu_info.py) and its Mosaic GPU interpret tests trace for
#   "NVIDIA H100 80GB HBM3". The xla-gpu target descriptions carry the same names.

GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        Gpu(
            "A100",
            "NVIDIA A100 SXM4 80GB",
            "NVIDIA A100-SXM4-80GB",
            (8, 0),
            sms=108,
            registers_per_sm=65536,
            max_registers_per_thread=255,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            shared_memory_per_sm=164 * KiB,
            max_shared_memory_per_block=163 * KiB,
            reserved_shared_memory_per_block=1 * KiB,
            l2_bytes=40 * MiB,
            memory_bytes=80 * 1000**3,
            memory_bandwidth=2.039e12,
            bf16_flops=312e12,
            fp32_flops=19.5e12,
            source=f"NVIDIA A100 datasheet (2021); {_CUDA_GUIDE} (cc 8.0)",
        ),
        Gpu(
            "H100",
            "NVIDIA H100 SXM5 80GB",
            "NVIDIA H100 80GB HBM3",
            (9, 0),
            sms=132,
            registers_per_sm=65536,
            max_registers_per_thread=255,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            shared_memory_per_sm=228 * KiB,
            max_shared_memory_per_block=227 * KiB,
            reserved_shared_memory_per_block=1 * KiB,
            l2_bytes=50 * MiB,
            memory_bytes=80 * 1000**3,
            memory_bandwidth=3.35e12,
            bf16_flops=989.4e12,
            fp32_flops=66.9e12,
            source=f"NVIDIA H100 Tensor Core GPU datasheet (SXM5); {_CUDA_GUIDE} (cc 9.0)",
        ),
        Gpu(
            "H200",
            "NVIDIA H200 SXM 141GB",
            "NVIDIA H200",
            (9, 0),
            sms=132,
            registers_per_sm=65536,
            max_registers_per_thread=255,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            shared_memory_per_sm=228 * KiB,
            max_shared_memory_per_block=227 * KiB,
            reserved_shared_memory_per_block=1 * KiB,
            l2_bytes=50 * MiB,
            memory_bytes=141 * 1000**3,
            memory_bandwidth=4.8e12,
            bf16_flops=989.4e12,
            fp32_flops=66.9e12,
            source=f"NVIDIA H200 Tensor Core GPU datasheet (SXM); {_CUDA_GUIDE} (cc 9.0)",
        ),
        Gpu(
            "B200",
            "NVIDIA B200 (HGX) 180GB",
            "NVIDIA B200",
            (10, 0),
            sms=148,
            registers_per_sm=65536,
            max_registers_per_thread=255,
            max_threads_per_sm=2048,
            max_blocks_per_sm=32,
            shared_memory_per_sm=228 * KiB,
            max_shared_memory_per_block=227 * KiB,
            reserved_shared_memory_per_block=1 * KiB,
            l2_bytes=126 * MiB,
            memory_bytes=180 * 1000**3,
            memory_bandwidth=7.7e12,
            bf16_flops=2.25e15,
            fp32_flops=75e12,
            source=f"NVIDIA HGX B200 / DGX B200 datasheets (per GPU); {_CUDA_GUIDE} (cc 10.0)",
        ),
        Gpu(
            "L4",
            "NVIDIA L4 24GB",
            "NVIDIA L4",
            (8, 9),
            sms=58,
            registers_per_sm=65536,
            max_registers_per_thread=255,
            max_threads_per_sm=1536,
            max_blocks_per_sm=24,
            shared_memory_per_sm=100 * KiB,
            max_shared_memory_per_block=99 * KiB,
            reserved_shared_memory_per_block=1 * KiB,
            l2_bytes=48 * MiB,
            memory_bytes=24 * 1000**3,
            memory_bandwidth=300e9,
            bf16_flops=121e12,
            fp32_flops=30.3e12,
            source=f"NVIDIA L4 Tensor Core GPU datasheet; {_CUDA_GUIDE} (cc 8.9)",
        ),
        Gpu(
            "RTX 4090",
            "NVIDIA GeForce RTX 4090 24GB",
            "NVIDIA GeForce RTX 4090",
            (8, 9),
            sms=128,
            registers_per_sm=65536,
            max_registers_per_thread=255,
            max_threads_per_sm=1536,
            max_blocks_per_sm=24,
            shared_memory_per_sm=100 * KiB,
            max_shared_memory_per_block=99 * KiB,
            reserved_shared_memory_per_block=1 * KiB,
            l2_bytes=72 * MiB,
            memory_bytes=24 * 1000**3,
            memory_bandwidth=1.008e12,
            bf16_flops=165.2e12,
            fp32_flops=82.6e12,
            source=f"NVIDIA Ada Lovelace architecture whitepaper (v2.1), Table 2; {_CUDA_GUIDE}",
        ),
    )
}

_TPU_DOCS = "Google Cloud TPU documentation (System architecture, per-version pages)"

# Sources: https://cloud.google.com/tpu/docs/v4, /v5e, /v5p, /v6e and /tpu7x (TensorCores,
# HBM, bandwidth, bf16 peak; Google writes GB for the GiB its own JAX counts), Google's
# Ironwood announcement (7x bandwidth), and JAX's TPU hardware reference for what the
# Cloud pages leave out, VMEM, SMEM and MXU columns per TensorCore:
# https://docs.jax.dev/en/latest/pallas/tpu/hardware.html (jax/_src/pallas/mosaic/tpu_info.py).
# Default scoped VMEM (no vendor page prints it): libtpu's own out-of-memory messages, "Scoped
# allocation with size ... and limit 16.00M" (v5e, v5p) and "limit 32.00M" (v6e, 7x), with
# libtpu 0.0.52; v4's kernels may fill its 16 MiB (a 15 MiB kernel compiles). Public reports:
# vllm-project/tpu-inference PR 3407 and 3194 ("the default 32MiB scoped-vmem limit", v6e
# and 7x). See `UNPUBLISHED`.

TPUS: dict[str, Tpu] = {
    t.name: t
    for t in (
        Tpu(
            "v4",
            "Cloud TPU v4",
            "TPU v4",
            tensor_cores=2,
            vmem_per_core=16 * MiB,
            smem_per_core=1 * MiB,
            memory_bytes=32 * 1024**3,
            memory_bandwidth=1.2e12,
            bf16_flops=275e12,
            mxu_size=128,
            default_scoped_vmem=16 * MiB,
            source=_TPU_DOCS,
        ),
        Tpu(
            "v5e",
            "Cloud TPU v5e",
            "TPU v5 lite",
            tensor_cores=1,
            vmem_per_core=128 * MiB,
            smem_per_core=1 * MiB,
            memory_bytes=16 * 1024**3,
            memory_bandwidth=819e9,
            bf16_flops=197e12,
            mxu_size=128,
            default_scoped_vmem=16 * MiB,
            source=_TPU_DOCS,
        ),
        Tpu(
            "v5p",
            "Cloud TPU v5p",
            "TPU v5",
            tensor_cores=2,
            vmem_per_core=64 * MiB,
            smem_per_core=1 * MiB,
            memory_bytes=95 * 1024**3,
            memory_bandwidth=2.765e12,
            bf16_flops=459e12,
            mxu_size=128,
            default_scoped_vmem=16 * MiB,
            source=_TPU_DOCS,
        ),
        Tpu(
            "v6e",
            "Cloud TPU v6e (Trillium)",
            "TPU v6 lite",
            tensor_cores=1,
            vmem_per_core=128 * MiB,
            smem_per_core=1 * MiB,
            memory_bytes=32 * 1024**3,
            # "HBM bandwidth per chip: 1638 GBps" (the v6e page; 1.64e12 before).
            memory_bandwidth=1.638e12,
            bf16_flops=918e12,
            mxu_size=256,
            default_scoped_vmem=32 * MiB,
            source=_TPU_DOCS,
        ),
        Tpu(
            "7x",
            "TPU7x (Ironwood)",
            "TPU7x",
            tensor_cores=2,
            vmem_per_core=64 * MiB,
            smem_per_core=1 * MiB,
            memory_bytes=192 * 1024**3,
            memory_bandwidth=7.37e12,
            bf16_flops=2.307e15,
            mxu_size=256,
            default_scoped_vmem=32 * MiB,
            source=f"{_TPU_DOCS}; Google Cloud blog 'Ironwood' (Apr 2025): 4614 FP8 TFLOPS",
        ),
    )
}


# Figures of the tables above that no vendor publishes, per chip and field: where each
# comes from instead. The tests check that every other figure matches a published one.
_SCOPED = (
    "not in Google's TPU pages: libtpu's own default, as its out-of-memory message prints "
    "it (libtpu 0.0.52, compile-only)"
)
UNPUBLISHED: dict[str, dict[str, str]] = {
    **{chip: {"default_scoped_vmem": _SCOPED} for chip in ("v4", "v5e", "v5p", "v6e", "7x")},
    "H200": {
        "sms": "not in the H200's datasheet; an H200 is a GH100 like the H100 SXM5 (the "
        "same published FP32 and tensor-core peaks): the H100 SXM5's 132",
        "l2_bytes": "not in the H200's datasheet: the H100 SXM5's 50 MB (same GH100)",
    },
    "B200": {
        "sms": "not in NVIDIA's B200 datasheets: 148, as B200 devices report it; with 128 "
        "FP32 lanes per SM at 1.98 GHz it gives the published 75 TFLOPS FP32",
        "l2_bytes": "not in NVIDIA's B200 datasheets or Blackwell brief: 126 MiB, as B200 "
        "devices report it",
    },
    "L4": {
        "sms": "not in the L4's datasheet: 58, as L4 devices report it; with 128 FP32 lanes "
        "per Ada SM at 2.04 GHz it gives the published 30.3 TFLOPS FP32",
        "l2_bytes": "not in the L4's datasheet: 48 MB, the AD104's",
    },
}


def gpu(name: str) -> Gpu:
    """The GPU named `name` (case-insensitive; "4090" finds the RTX 4090).

    Raises:
        KeyError: Naming the GPUs in the table, if there is no such GPU.
    """
    wanted = name.lower().replace(" ", "")
    for key, entry in GPUS.items():
        if wanted in (key.lower().replace(" ", ""), entry.arch) or key.lower().endswith(wanted):
            return entry
    raise KeyError(f"no GPU {name!r} in pallaslab's table; known: {', '.join(GPUS)}")


def gpu_of_device_kind(device_kind: str) -> Gpu | None:
    """The GPU of the table a device reporting `device_kind` is, if any.

    An exact name first ("NVIDIA H100 80GB HBM3"), then the chip's name as a word of it
    ("NVIDIA H100 PCIe" is an H100; "NVIDIA H100" is not an H200).
    """
    for entry in GPUS.values():
        if entry.device_kind == device_kind:
            return entry
    words = device_kind.replace("-", " ").split()
    for entry in GPUS.values():
        if entry.name.split()[-1] in words:
            return entry
    return None


def tpu(name: str) -> Tpu:
    """The TPU generation named `name` ("v5e", "v5litepod", "7x" ...).

    Raises:
        KeyError: Naming the generations in the table, if there is no such TPU.
    """
    wanted = name.lower().removeprefix("tpu").strip(" _-")
    aliases = {"v5lite": "v5e", "v5litepod": "v5e", "v6lite": "v6e", "ironwood": "7x", "v7x": "7x"}
    wanted = aliases.get(wanted, wanted)
    if wanted in TPUS:
        return TPUS[wanted]
    raise KeyError(f"no TPU {name!r} in pallaslab's table; known: {', '.join(TPUS)}")
