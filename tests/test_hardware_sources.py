"""pallaslab's chip figures against the vendors' published ones, typed here a second time.

`hardware.py` and the xla-gpu target descriptions (`gpu_target_configs/`) are pallaslab's
copies of published figures; the tests that use them read them back, so a figure set
wrong there (a typo, a sparse tensor-core peak taken for a dense one, GB for GiB) passed
every one of them. This file is an independent copy: each figure with the words the
vendor prints and the page it prints them on, converted here by hand to the units the
code uses, and compared within the rounding of the published figure (half a unit of
its last digit). A figure no vendor publishes is in `UNPUBLISHED` below, with what it
is instead; `hardware.UNPUBLISHED` must say the same, and every other field of every
chip must have a published figure here.

Units as the vendors use them: NVIDIA's CUDA guide writes KB for 1024 bytes (its own
CCCL headers spell 164 KB as `164 * 1024`); NVIDIA's datasheets write GB and TB/s for
powers of ten; Google's TPU pages write GB (and, on newer pages, GiB) for the GiB its
own JAX counts (`hbm_capacity_bytes=17_200_000_000` for the v5e's "16 GB").
"""

from __future__ import annotations

import dataclasses

import pytest

from pallaslab._src.core import gpu_target_config
from pallaslab._src.records import hardware

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
K = 1024  # the CUDA guide's "64 K" registers


@dataclasses.dataclass(frozen=True)
class Published:
    """One figure as published.

    Attributes:
        value: The figure in the code's units (bytes, FLOP/s, bytes/s, counts).
        quote: The words and number as the source prints them.
        url: Where.
        rounding: Half a unit of the last published digit, in the code's units.
    """

    value: float
    quote: str
    url: str
    rounding: float = 0.0

    def admits(self, ours: float) -> bool:
        return abs(ours - self.value) <= self.rounding + 1e-9 * abs(self.value)


# --- Sources -------------------------------------------------------------------------

CUDA_GUIDE = (
    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/"
    "#features-and-technical-specifications-technical-specifications-per-compute-capability"
)
CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus"
A100_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
AMPERE_WHITEPAPER = (
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
    "nvidia-ampere-architecture-whitepaper.pdf"
)
H100_DATASHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
HOPPER_WHITEPAPER = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
HGX_PAGE = "https://www.nvidia.com/en-us/data-center/hgx/"
L4_DATASHEET = "https://resources.nvidia.com/en-us-gpu-resources/l4-tensor-datasheet"
ADA_WHITEPAPER = (
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
)
TPU_V4 = "https://cloud.google.com/tpu/docs/v4"
TPU_V5E = "https://cloud.google.com/tpu/docs/v5e"
TPU_V5P = "https://cloud.google.com/tpu/docs/v5p"
TPU_V6E = "https://cloud.google.com/tpu/docs/v6e"
TPU_7X = "https://cloud.google.com/tpu/docs/tpu7x"
IRONWOOD_BLOG = "https://blog.google/products/google-cloud/ironwood-tpu-age-of-inference/"
# JAX's TPU hardware reference renders jax/_src/pallas/mosaic/tpu_info.py: the figures
# Google's Cloud pages leave out (VMEM, SMEM, MXU columns), per TensorCore.
JAX_TPU_REFERENCE = "https://docs.jax.dev/en/latest/pallas/tpu/hardware.html"


def P(value, quote, url, rounding=0.0):
    return Published(float(value), quote, url, float(rounding))


# --- What the CUDA guide publishes per compute capability ----------------------------


def _per_capability(threads, blocks, shared_kb, block_kb):
    cc = "compute capability {}"
    return {
        "registers_per_sm": P(
            64 * K, "Maximum number of 32-bit registers per SM: 64 K", CUDA_GUIDE
        ),
        "max_registers_per_thread": P(
            255, "Maximum number of 32-bit registers per thread: 255", CUDA_GUIDE
        ),
        "max_threads_per_sm": P(
            threads, f"Maximum number of resident threads per SM: {threads} ({cc})", CUDA_GUIDE
        ),
        "max_blocks_per_sm": P(
            blocks, f"Maximum number of resident blocks per SM: {blocks} ({cc})", CUDA_GUIDE
        ),
        "shared_memory_per_sm": P(
            shared_kb * KiB,
            f"Maximum amount of shared memory per SM: {shared_kb} KB ({cc})",
            CUDA_GUIDE,
        ),
        "max_shared_memory_per_block": P(
            block_kb * KiB,
            f"Maximum amount of shared memory per thread block: {block_kb} KB ({cc})",
            CUDA_GUIDE,
        ),
        "reserved_shared_memory_per_block": P(
            1 * KiB,
            "shared memory per SM less per block: 1 KB reserved for the system per block",
            CUDA_GUIDE,
        ),
    }


CAPABILITY = {
    (8, 0): _per_capability(2048, 32, 164, 163),
    (8, 9): _per_capability(1536, 24, 100, 99),
    (9, 0): _per_capability(2048, 32, 228, 227),
    (10, 0): _per_capability(2048, 32, 228, 227),
}


def _gpu(capability, url_of_capability, **figures):
    published = {
        # As a number: 8.9 is 89 (compared with the table's (8, 9) the same way).
        "compute_capability": P(
            10 * capability[0] + capability[1],
            f"compute capability {capability[0]}.{capability[1]}",
            url_of_capability,
        ),
        **{
            k: dataclasses.replace(v, quote=v.quote.format(f"{capability[0]}.{capability[1]}"))
            for k, v in CAPABILITY[capability].items()
        },
        **figures,
    }
    return capability, published


T = 1e12
GPU_PUBLISHED = {
    "A100": _gpu(
        (8, 0),
        CUDA_GPUS,
        sms=P(108, "SMs: 108 (A100 SXM4)", AMPERE_WHITEPAPER),
        l2_bytes=P(40960 * KiB, "L2 Cache Size: 40960 KB", AMPERE_WHITEPAPER),
        memory_bytes=P(80e9, "GPU Memory: 80GB HBM2e (A100 80GB SXM)", A100_DATASHEET, 0.5e9),
        memory_bandwidth=P(
            2039e9, "GPU Memory Bandwidth: 2,039GB/s (A100 80GB SXM)", A100_DATASHEET, 0.5e9
        ),
        bf16_flops=P(
            312 * T, "BFLOAT16 Tensor Core: 312 TFLOPS | 624 TFLOPS*", A100_DATASHEET, 0.5 * T
        ),
        fp32_flops=P(19.5 * T, "FP32: 19.5 TFLOPS", A100_DATASHEET, 0.05 * T),
    ),
    "H100": _gpu(
        (9, 0),
        CUDA_GPUS,
        sms=P(132, "SMs: 132 (H100 SXM5)", HOPPER_WHITEPAPER),
        l2_bytes=P(50 * MiB, "L2 Cache Size: 50 MB (H100 SXM5)", HOPPER_WHITEPAPER),
        memory_bytes=P(80e9, "GPU memory: 80GB (H100 SXM)", H100_DATASHEET, 0.5e9),
        memory_bandwidth=P(
            3.35e12, "GPU memory bandwidth: 3.35TB/s (H100 SXM)", H100_DATASHEET, 0.005e12
        ),
        # The datasheet: "BF16 Tensor Core 1,979 teraFLOPS*" (*with sparsity), i.e.
        # 989.5 dense; the whitepaper prints the dense figure to a tenth.
        bf16_flops=P(
            989.4 * T,
            "Peak BF16 Tensor TFLOPS with FP32 Accumulate: 989.4/1978.9",
            HOPPER_WHITEPAPER,
            0.05 * T,
        ),
        fp32_flops=P(
            66.9 * T, "Peak FP32 TFLOPS (non-Tensor): 66.9 (H100 SXM5)", HOPPER_WHITEPAPER, 0.05 * T
        ),
    ),
    "H200": _gpu(
        (9, 0),
        CUDA_GPUS,
        memory_bytes=P(141e9, "GPU Memory: 141GB (H200 SXM)", H200_PAGE, 0.5e9),
        memory_bandwidth=P(4.8e12, "GPU Memory Bandwidth: 4.8TB/s (H200 SXM)", H200_PAGE, 0.05e12),
        bf16_flops=P(
            1979 / 2 * T, "BFLOAT16 Tensor Core: 1,979 TFLOPS (with sparsity)", H200_PAGE, 0.25 * T
        ),
        fp32_flops=P(67 * T, "FP32: 67 TFLOPS (H200 SXM)", H200_PAGE, 0.5 * T),
    ),
    "B200": _gpu(
        (10, 0),
        CUDA_GPUS,
        memory_bytes=P(180e9, "GPU memory: 180 GB HBM3E (HGX B200, per GPU)", HGX_PAGE, 0.5e9),
        memory_bandwidth=P(7.7e12, "bandwidth: 7.7 TB/s (HGX B200, per GPU)", HGX_PAGE, 0.05e12),
        bf16_flops=P(
            4.5e15 / 2,
            "FP16/BF16 Tensor Core: 4.5 PFLOPS* (with sparsity, per GPU)",
            HGX_PAGE,
            0.025e15,
        ),
        fp32_flops=P(75 * T, "FP32: 75 TFLOPS (HGX B200, per GPU)", HGX_PAGE, 0.5 * T),
    ),
    "L4": _gpu(
        (8, 9),
        CUDA_GPUS,
        memory_bytes=P(24e9, "GPU memory: 24GB", L4_DATASHEET, 0.5e9),
        memory_bandwidth=P(300e9, "GPU memory bandwidth: 300GB/s", L4_DATASHEET, 0.5e9),
        bf16_flops=P(
            242 / 2 * T, "BF16 Tensor Core: 242 teraFLOPS* (with sparsity)", L4_DATASHEET, 0.25 * T
        ),
        fp32_flops=P(30.3 * T, "FP32: 30.3 teraFLOPS", L4_DATASHEET, 0.05 * T),
    ),
    "RTX 4090": _gpu(
        (8, 9),
        CUDA_GPUS,
        sms=P(128, "SMs: 128 (GeForce RTX 4090, Appendix A)", ADA_WHITEPAPER),
        l2_bytes=P(73728 * KiB, "L2 Cache Size: 73728 KB", ADA_WHITEPAPER),
        memory_bytes=P(24e9, "Memory Size: 24 GB GDDR6X", ADA_WHITEPAPER, 0.5e9),
        memory_bandwidth=P(1008e9, "Memory Bandwidth: 1008 GB/sec", ADA_WHITEPAPER, 0.5e9),
        bf16_flops=P(
            165.2 * T,
            "Peak BF16 Tensor TFLOPS with FP32 Accumulate: 165.2/330.4",
            ADA_WHITEPAPER,
            0.05 * T,
        ),
        fp32_flops=P(82.6 * T, "Peak FP32 TFLOPS (non-Tensor): 82.6", ADA_WHITEPAPER, 0.05 * T),
    ),
}

# Figures the vendors do not publish, and what hardware.py uses instead (see there).
UNPUBLISHED = {
    **{chip: {"default_scoped_vmem"} for chip in ("v4", "v5e", "v5p", "v6e", "7x")},
    "H200": {"sms", "l2_bytes"},
    "B200": {"sms", "l2_bytes"},
    "L4": {"sms", "l2_bytes"},
}


def _tpu(tensor_cores, vmem_mib, mxu, **figures):
    return {
        "tensor_cores": tensor_cores,
        "vmem_per_core": P(
            vmem_mib * MiB, f"VMEM Capacity: {vmem_mib} MiB (per TensorCore)", JAX_TPU_REFERENCE
        ),
        "smem_per_core": P(1 * MiB, "SMEM Capacity: 1 MiB (per TensorCore)", JAX_TPU_REFERENCE),
        "mxu_size": mxu,
        **figures,
    }


TPU_PUBLISHED = {
    "v4": _tpu(
        P(2, "Each TPU v4 chip contains two TensorCores.", TPU_V4),
        16,
        P(128, "MXU columns: 128 (generations before 6)", JAX_TPU_REFERENCE),
        memory_bytes=P(32 * GiB, "HBM2 capacity and bandwidth: 32 GiB, 1200 GBps", TPU_V4),
        memory_bandwidth=P(1200e9, "HBM2 capacity and bandwidth: 32 GiB, 1200 GBps", TPU_V4, 0.5e9),
        bf16_flops=P(
            275 * T, "Peak compute per chip: 275 teraflops (bf16 or int8)", TPU_V4, 0.5 * T
        ),
    ),
    "v5e": _tpu(
        P(1, "Each v5e chip contains one TensorCore.", TPU_V5E),
        128,
        P(128, "MXU columns: 128 (generations before 6)", JAX_TPU_REFERENCE),
        # "16 GB" is 16 GiB: JAX's tpu_info has hbm_capacity_bytes=17_200_000_000.
        memory_bytes=P(16 * GiB, "HBM2 capacity and bandwidth: 16 GB, 819 GBps", TPU_V5E),
        memory_bandwidth=P(819e9, "HBM2 capacity and bandwidth: 16 GB, 819 GBps", TPU_V5E, 0.5e9),
        bf16_flops=P(197 * T, "Peak compute per chip (bf16): 197 TFLOPs", TPU_V5E, 0.5 * T),
    ),
    "v5p": _tpu(
        P(2, "Number of TensorCores per chip: 2", TPU_V5P),
        64,
        P(128, "MXU columns: 128 (generations before 6)", JAX_TPU_REFERENCE),
        memory_bytes=P(95 * GiB, "HBM capacity per chip (GiB): 95", TPU_V5P),
        memory_bandwidth=P(2765e9, "HBM bandwidth per chip (GBps): 2765", TPU_V5P, 0.5e9),
        bf16_flops=P(459 * T, "Peak compute per chip (BF16) (TFLOPs): 459", TPU_V5P, 0.5 * T),
    ),
    "v6e": _tpu(
        P(1, "Each v6e chip contains one TensorCore", TPU_V6E),
        128,
        P(256, "Each TensorCore contains two 256x256 matrix-multiply units (MXU)", TPU_V6E),
        memory_bytes=P(32 * GiB, "HBM capacity per chip (GiB): 32 (v6e column)", TPU_7X),
        memory_bandwidth=P(1638e9, "HBM bandwidth per chip: 1638 GBps", TPU_V6E, 0.5e9),
        bf16_flops=P(918 * T, "Peak compute per chip (bf16): 918 TFLOPs", TPU_V6E, 0.5 * T),
    ),
    "7x": _tpu(
        P(2, "Each TPU7x chip contains two TensorCores and four SparseCores.", TPU_7X),
        64,
        P(256, "MXU columns: 256 (TPU7x)", JAX_TPU_REFERENCE),
        memory_bytes=P(192 * GiB, "HBM capacity per chip (GiB): 192", TPU_7X),
        memory_bandwidth=P(7.37e12, "HBM bandwidth: 7.37 TB/s per chip", IRONWOOD_BLOG, 0.005e12),
        bf16_flops=P(2307 * T, "Peak compute per chip (BF16) (TFLOPs): 2307", TPU_7X, 0.5 * T),
    ),
}

GPU_NON_FIGURES = {"name", "full_name", "device_kind", "source"}
TPU_NON_FIGURES = {"name", "full_name", "device_kind", "source"}

# The names devices report, typed from where they are printed: the CUDA driver's
# product name (`nvidia-smi --query-gpu=name`, `cudaDeviceProp::name`), which JAX gives
# as `device.device_kind`; for TPUs, what JAX's `tpu_info` matches each generation by.
NVIDIA_SMI = "https://docs.nvidia.com/deploy/nvidia-smi/index.html (name: the product name)"
JAX_GPU_INFO = "https://github.com/jax-ml/jax/blob/main/jax/_src/pallas/triton/gpu_info.py"
JAX_MGPU_INTERPRET_TEST = (
    "https://github.com/jax-ml/jax/blob/main/tests/pallas/gpu_pallas_interpret_test.py"
)
JAX_TPU_INFO = "https://github.com/jax-ml/jax/blob/main/jax/_src/tpu_info.py"
DEVICE_KINDS = {
    "A100": ("NVIDIA A100-SXM4-80GB", "name: NVIDIA A100-SXM4-80GB (80GB SXM4)", NVIDIA_SMI),
    "H100": (
        "NVIDIA H100 80GB HBM3",
        'AbstractDevice(device_kind="NVIDIA H100 80GB HBM3") (an H100 SXM5)',
        JAX_MGPU_INTERPRET_TEST,
    ),
    "H200": ("NVIDIA H200", 'H200 = "NVIDIA H200"', JAX_GPU_INFO),
    "B200": ("NVIDIA B200", 'B200 = "NVIDIA B200"', JAX_GPU_INFO),
    "L4": ("NVIDIA L4", 'L4 = "NVIDIA L4"', JAX_GPU_INFO),
    "RTX 4090": ("NVIDIA GeForce RTX 4090", 'RTX_4090 = "NVIDIA GeForce RTX 4090"', JAX_GPU_INFO),
}
TPU_DEVICE_KINDS = {
    "v4": ("TPU v4", '"TPU v4": ChipVersion.TPU_V4', JAX_TPU_INFO),
    "v5e": ("TPU v5 lite", '"TPU v5 lite": ChipVersion.TPU_V5E', JAX_TPU_INFO),
    "v5p": ("TPU v5", '"TPU v5": ChipVersion.TPU_V5P', JAX_TPU_INFO),
    "v6e": ("TPU v6 lite", '"TPU v6 lite": ChipVersion.TPU_V6E', JAX_TPU_INFO),
    "7x": ("TPU7x", '"TPU7x": ChipVersion.TPU_7X', JAX_TPU_INFO),
}


# --- The table against the published figures ------------------------------------------


def test_every_chip_of_the_table_has_published_figures_here():
    assert set(hardware.GPUS) == set(GPU_PUBLISHED)
    assert set(hardware.TPUS) == set(TPU_PUBLISHED)


@pytest.mark.parametrize("chip", sorted(GPU_PUBLISHED))
def test_gpu_figures_are_the_published_ones(chip):
    capability, published = GPU_PUBLISHED[chip]
    gpu = hardware.gpu(chip)
    assert gpu.name == chip and gpu.compute_capability == capability
    fields = {f.name for f in dataclasses.fields(gpu)} - GPU_NON_FIGURES
    unpublished = UNPUBLISHED.get(chip, set())
    # Every figure is either published (and compared) or said to be unpublished.
    assert fields == set(published) | unpublished, fields ^ (set(published) | unpublished)
    ours = {name: getattr(gpu, name) for name in published}
    ours["compute_capability"] = 10 * gpu.compute_capability[0] + gpu.compute_capability[1]
    wrong = {
        name: (ours[name], figure.quote, figure.url)
        for name, figure in published.items()
        if not figure.admits(ours[name])
    }
    assert wrong == {}


@pytest.mark.parametrize("chip", sorted(TPU_PUBLISHED))
def test_tpu_figures_are_the_published_ones(chip):
    published = TPU_PUBLISHED[chip]
    tpu = hardware.tpu(chip)
    fields = {f.name for f in dataclasses.fields(tpu)} - TPU_NON_FIGURES
    assert fields == set(published) | UNPUBLISHED.get(chip, set())
    wrong = {
        name: (getattr(tpu, name), figure.quote, figure.url)
        for name, figure in published.items()
        if not figure.admits(getattr(tpu, name))
    }
    assert wrong == {}


# The default scoped VMEM limit (what a Pallas kernel may allocate without
# `vmem_limit_bytes`): no Google page prints it. What libtpu prints when a kernel goes
# over it, and where others quote it. `test_fit.py` reads it from libtpu itself.
VLLM_TPU_3407 = "https://github.com/vllm-project/tpu-inference/pull/3407"
VLLM_TPU_3194 = "https://github.com/vllm-project/tpu-inference/pull/3194"
LIBTPU_MESSAGE = "libtpu 0.0.52, compile-only, CompileTimeScopedVmemOom"
DEFAULT_SCOPED_VMEM = {
    "v4": P(
        16 * MiB, "a 15 MiB kernel compiles; 48 MiB: 'Used 48.00M of 16.00M vmem'", LIBTPU_MESSAGE
    ),
    "v5e": P(16 * MiB, "Scoped allocation with size 24.00M and limit 16.00M", LIBTPU_MESSAGE),
    "v5p": P(16 * MiB, "Scoped allocation with size 48.00M and limit 16.00M", LIBTPU_MESSAGE),
    "v6e": P(32 * MiB, "the default 32MiB scoped-vmem limit (tpu6e and tpu7x)", VLLM_TPU_3407),
    "7x": P(
        32 * MiB,
        "XLA's 32 MiB default (--xla_tpu_scoped_vmem_limit_kib), 33.56M vs 32.00M",
        VLLM_TPU_3194,
    ),
}


@pytest.mark.parametrize("chip", sorted(DEFAULT_SCOPED_VMEM))
def test_default_scoped_vmem_is_what_libtpu_and_its_users_say(chip):
    assert DEFAULT_SCOPED_VMEM[chip].admits(hardware.tpu(chip).default_scoped_vmem)
    assert hardware.tpu(chip).default_scoped_vmem <= hardware.tpu(chip).vmem_per_core


@pytest.mark.parametrize("chip", sorted(DEVICE_KINDS))
def test_gpu_device_kinds_are_the_reported_names(chip):
    kind, _quote, _url = DEVICE_KINDS[chip]
    assert hardware.gpu(chip).device_kind == kind
    # A device reporting the name is found in the table; so is a variant naming the chip.
    assert hardware.gpu_of_device_kind(kind) is hardware.gpu(chip)
    assert hardware.gpu_of_device_kind(kind + " PCIe") is hardware.gpu(chip)


def test_a_device_kind_names_its_own_chip_only():
    assert hardware.gpu_of_device_kind("NVIDIA H100 PCIe").name == "H100"
    assert hardware.gpu_of_device_kind("NVIDIA L40") is None  # not an L4
    assert hardware.gpu_of_device_kind("cpu") is None


@pytest.mark.parametrize("chip", sorted(TPU_DEVICE_KINDS))
def test_tpu_device_kinds_are_the_ones_jax_knows(chip):
    assert hardware.tpu(chip).device_kind == TPU_DEVICE_KINDS[chip][0]


def test_the_table_says_which_figures_are_unpublished():
    assert {chip: set(fields) for chip, fields in hardware.UNPUBLISHED.items()} == UNPUBLISHED
    for reasons in hardware.UNPUBLISHED.values():
        assert all(reason.startswith("not in ") for reason in reasons.values())


def test_unpublished_sm_counts_agree_with_the_published_fp32_peaks():
    # An SM count NVIDIA does not print must still give the FP32 peak it does print:
    # SMs x 128 FP32 lanes (Hopper, Blackwell, Ada) x 2 (an FMA) x the boost clock.
    boost_ghz = {"H200": 1.98, "B200": 1.98, "L4": 2.04}
    for chip, ghz in boost_ghz.items():
        _, published = GPU_PUBLISHED[chip]
        fp32 = hardware.gpu(chip).sms * 128 * 2 * ghz * 1e9
        assert fp32 == pytest.approx(published["fp32_flops"].value, rel=0.01), chip


def test_a_peak_set_ten_times_wrong_is_caught():
    # What this file is for: the table's other tests read the table back.
    wrong = dataclasses.replace(hardware.gpu("H100"), bf16_flops=9894e12)
    _, published = GPU_PUBLISHED["H100"]
    assert not published["bf16_flops"].admits(wrong.bf16_flops)
    assert published["bf16_flops"].admits(hardware.gpu("H100").bf16_flops)
    # A sparse peak taken for a dense one is caught too.
    assert not published["bf16_flops"].admits(1978.9e12)


# --- The xla-gpu chip descriptions against the published figures ----------------------


def _published_or_table(chip, field):
    """The published figure, or for an unpublished one the table's (which must agree)."""
    _, published = GPU_PUBLISHED[chip]
    if field in published:
        return published[field]
    assert field in UNPUBLISHED.get(chip, set()), (chip, field)
    return P(getattr(hardware.gpu(chip), field), "unpublished: hardware.py's", "")


# FP32 lanes per SM, from the architecture whitepapers ("FP32 Cores / SM").
FP32_LANES = {
    "A100": P(64, "FP32 Cores / SM: 64", AMPERE_WHITEPAPER),
    "H100": P(128, "FP32 Cores / SM: 128", HOPPER_WHITEPAPER),
    "H200": P(128, "FP32 Cores / SM: 128 (a GH100, as the H100)", HOPPER_WHITEPAPER),
    # NVIDIA's B200 datasheets do not print it; 128 is Blackwell's per-SM FP32 count
    # that the published 75 TFLOPS needs at 148 SMs and 1.98 GHz (checked below).
    "B200": P(128, "unpublished for the B200", ""),
}


@pytest.mark.parametrize("chip", gpu_target_config.CHIPS)
def test_xla_gpu_descriptions_carry_the_published_figures(chip):
    info = gpu_target_config.parse(gpu_target_config.description(chip))["gpu_device_info"]
    capability, published = GPU_PUBLISHED[chip]
    guide = CAPABILITY[capability]
    assert (
        info["cuda_compute_capability"]["major"],
        info["cuda_compute_capability"].get("minor", 0),
    ) == capability
    expected = {
        "core_count": _published_or_table(chip, "sms"),
        "threads_per_core_limit": guide["max_threads_per_sm"],
        "registers_per_core_limit": guide["registers_per_sm"],
        "registers_per_block_limit": P(
            64 * K, "Maximum number of 32-bit registers per thread block: 64 K", CUDA_GUIDE
        ),
        "shared_memory_per_core": guide["shared_memory_per_sm"],
        "shared_memory_per_block_optin": guide["max_shared_memory_per_block"],
        "shared_memory_per_block": P(
            48 * KiB,
            "Maximum amount of shared memory per thread block: 48 KB (without opting in to more)",
            CUDA_GUIDE,
        ),
        "threads_per_block_limit": P(1024, "Maximum number of threads per block: 1024", CUDA_GUIDE),
        "threads_per_warp": P(32, "Warp size: 32", CUDA_GUIDE),
        "block_dim_limit_x": P(
            2**31 - 1, "Maximum x-dimension of a grid of thread blocks: 2^31-1", CUDA_GUIDE
        ),
        "block_dim_limit_y": P(
            65535, "Maximum y- or z-dimension of a grid of thread blocks: 65535", CUDA_GUIDE
        ),
        "block_dim_limit_z": P(
            65535, "Maximum y- or z-dimension of a grid of thread blocks: 65535", CUDA_GUIDE
        ),
        "l2_cache_size": _published_or_table(chip, "l2_bytes"),
        "memory_bandwidth": published["memory_bandwidth"],
        "device_memory_size": published["memory_bytes"],
        "fpus_per_core": FP32_LANES[chip],
    }
    wrong = {
        field: (info[field], figure.quote, figure.url)
        for field, figure in expected.items()
        if not figure.admits(info[field])
    }
    assert wrong == {}
    # The clock: A100's is published; the others' is the one their published FP32 peak
    # implies (SMs x FP32 lanes x 2 per FMA x clock), as each file's comment says.
    if chip == "A100":
        assert info["clock_rate_ghz"] == pytest.approx(1.41)  # "GPU Boost Clock: 1410 MHz"
    fp32 = published["fp32_flops"]
    implied = info["core_count"] * info["fpus_per_core"] * 2 * info["clock_rate_ghz"] * 1e9
    # The clock is printed to 10 MHz: within that, and the FP32 figure's own rounding.
    step = info["core_count"] * info["fpus_per_core"] * 2 * 0.005e9
    assert abs(implied - fp32.value) <= fp32.rounding + step, (implied, fp32.quote)
    # Every numeric field of the description is one of those above.
    numeric = {k for k, v in info.items() if isinstance(v, (int, float))}
    assert numeric == set(expected) | {"clock_rate_ghz"}
    # The compile-only device reports the name a real one does.
    assert gpu_target_config.device_kind(chip) == DEVICE_KINDS[chip][0]


# --- Occupancy, by hand from the CUDA guide's figures -----------------------------------


@pytest.mark.parametrize(
    ("chip", "warps", "registers", "shared", "blocks", "limiter"),
    [
        # 128 registers x 32 threads = 4096 a warp: 65536 / 4096 = 16 warps, 4 blocks.
        ("A100", 4, 128, 0, 4, "registers"),
        # 80 KiB + 1 KiB reserved a block: 164 KiB hold 2.
        ("A100", 4, 32, 80 * KiB, 2, "shared memory"),
        # cc 8.9: 48 warps and 24 blocks an SM: one-warp blocks stop at 24.
        ("L4", 1, 16, 0, 24, "blocks"),
        ("RTX 4090", 8, 32, 0, 6, "warps"),  # 48 warps / 8
        # cc 9.0: 227 KiB + 1 KiB fill the SM's 228 KiB; 228 KiB is over one block's 227.
        ("H100", 4, 32, 227 * KiB, 1, "shared memory"),
        ("H100", 4, 32, 228 * KiB, 0, "shared memory"),
        ("B200", 32, 64, 0, 1, "registers"),  # 64 x 32 x 32 = 65536: the whole file
    ],
)
def test_occupancy_by_hand(chip, warps, registers, shared, blocks, limiter):
    from pallaslab._src.core.lowering.occupancy import occupancy

    found = occupancy(
        hardware.gpu(chip), num_warps=warps, registers_per_thread=registers, shared_bytes=shared
    )
    assert (found.blocks_per_sm, found.limiter) == (blocks, limiter)
    assert found.active_warps == blocks * warps
