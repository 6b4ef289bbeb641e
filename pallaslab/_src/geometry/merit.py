"""Figures of merit of a tiling: reuse, traffic, working set, roofline.

All from a `TileMap` and the published chip figures in `hardware.py`; pure NumPy.
These are the numbers a kernel author checks first: does each byte cross from HBM
once or many times, do the blocks fit in VMEM / shared memory, and is the kernel
bound by memory or by arithmetic on a given chip.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, TypedDict

import numpy as np

from pallaslab._src.geometry.tilemap import Schedule, TileMap
from pallaslab._src.records import hardware
from pallaslab._src.records.hardware import Gpu, Tpu

Chip = Gpu | Tpu

# Dtypes the tensor cores / MXU take at their headline rate.
_LOW_PRECISION = frozenset(
    {"bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int4", "uint4"}
)


@dataclasses.dataclass(frozen=True)
class OperandMerit:
    """How one operand's blocks are used.

    Attributes:
        index: The operand's index in `kernel.operands`.
        label: Its name.
        role: "in", "out", "scratch" or "prefetch".
        access: How it reaches the kernel (see `operand_tiles.Access`).
        reads_min: Fewest programs whose block holds one element (0: never touched).
        reads_max: Most programs whose block holds one element.
        reads_mean: Programs per element, averaged over the array.
        transfers: Block copies between HBM and the kernel.
        hbm_bytes: Bytes those copies move.
        min_bytes: The array's size: what moving each byte once costs.
        block_bytes: Bytes of one block in the kernel.
        buffers: Copies of the block the pipeline keeps (2: double-buffered).
    """

    index: int
    label: str
    role: str
    access: str
    reads_min: int
    reads_max: int
    reads_mean: float
    transfers: int
    hbm_bytes: int
    min_bytes: int
    block_bytes: int
    buffers: int

    @property
    def traffic_ratio(self) -> float:
        """Bytes moved over the minimum (1.0: each byte once)."""
        return self.hbm_bytes / self.min_bytes if self.min_bytes else 0.0


@dataclasses.dataclass(frozen=True)
class KernelMerit:
    """A kernel's tiling in numbers, for one schedule.

    Attributes:
        kernel: The kernel's name.
        schedule: "tpu" or "gpu" (how programs run; decides what is re-copied).
        programs: Programs in the grid.
        operands: One entry per operand.
        hbm_bytes: Bytes moved between HBM and the kernel by all BlockSpecs.
        min_hbm_bytes: Each byte of every input and output moved once.
        working_set_bytes: VMEM / shared memory one program needs: every block
            times its buffers (two unless `pl.Buffered` says otherwise, one for a
            single-program grid), plus scratch.
        smem_bytes: Scalar-prefetch operands, held in SMEM.
        flops: Floating-point operations of the whole grid (None if unknown).
        transcendentals: exp, log, ... of the whole grid (None if unknown).
        flops_source: "counted" (from the body's jaxpr), "declared"
            (`pl.CostEstimate`) or "" when unknown.
        flops_exact: False when counting had to guess (loops of unknown length).
        compute_dtype: The dtype deciding the compute roof: the widest dtype its
            matrix products multiply, else the widest input float.
        vmem_limit_bytes: The VMEM limit the kernel asks for with
            `CompilerParams(vmem_limit_bytes=...)`, if it does.
        matmul: Whether the kernel multiplies matrices (`dot_general`), the work the
            MXU and the tensor cores do; None when unknown (no count of its body).
        working_set_name: What `working_set_bytes` is when it is not the blocks'
            estimate: a Mosaic GPU kernel's is the SMEM it allocates ("" otherwise).
    """

    kernel: str
    schedule: Schedule
    programs: int
    operands: tuple[OperandMerit, ...]
    hbm_bytes: int
    min_hbm_bytes: int
    working_set_bytes: int
    smem_bytes: int
    flops: int | None
    transcendentals: int | None
    flops_source: str
    flops_exact: bool
    compute_dtype: str
    vmem_limit_bytes: int | None = None
    matmul: bool | None = None
    working_set_name: str = ""

    @property
    def traffic_ratio(self) -> float:
        """HBM bytes moved over the minimum."""
        return self.hbm_bytes / self.min_hbm_bytes if self.min_hbm_bytes else 0.0

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte moved between HBM and the kernel."""
        if self.flops is None or not self.hbm_bytes:
            return None
        return self.flops / self.hbm_bytes

    def on_chip(self, chip: Chip | str) -> ChipFit:
        """These figures against a chip's memory and roofline ("H100", "v5e" ...).

        Example:
            >>> inspection.merit().on_chip("v5e").fits   # the working set fits in VMEM
            True
        """
        return on_chip(self, chip)


@dataclasses.dataclass(frozen=True)
class ChipFit:
    """A kernel's figures against one chip.

    Attributes:
        chip: The chip's short name ("v5e", "H100").
        kind: "tpu" or "gpu".
        capacity_bytes: On-chip memory one program may use: VMEM per TensorCore,
            or shared memory per thread block.
        capacity_name: "VMEM" or "shared memory".
        fits: Whether the working set fits in it.
        peak_flops: The compute roof used, FLOP/s.
        peak_name: Which peak that is ("dense bf16", "fp32").
        bandwidth: HBM bytes per second.
        intensity: FLOPs per byte (None when FLOPs are unknown).
        ridge: The intensity where the roofs meet: peak_flops / bandwidth.
        bound: "memory", "compute", or "" when FLOPs are unknown.
        attainable_flops: min(peak, intensity * bandwidth), FLOP/s.
        seconds: Lower bound on run time: max(flops / peak, bytes / bandwidth).
        notes: Caveats, one sentence each.
    """

    chip: str
    kind: Literal["tpu", "gpu"]
    capacity_bytes: int
    capacity_name: str
    fits: bool
    peak_flops: float
    peak_name: str
    bandwidth: float
    intensity: float | None
    ridge: float
    bound: str
    attainable_flops: float | None
    seconds: float
    notes: tuple[str, ...] = ()


def kernel_merit(tiles: TileMap, schedule: str | None = None) -> KernelMerit:
    """The figures of merit of a tile map, for `schedule` (default: the map's)."""
    chosen: Schedule = schedule or tiles.schedule  # type: ignore[assignment]
    kernel = tiles.kernel
    single = tiles.num_programs <= 1
    operands = []
    working_set = smem = 0
    for k, entry in enumerate(tiles.operands):
        operand = entry.operand
        role = "prefetch" if operand.scalar_prefetch else operand.role
        buffers = 1
        if entry.access == "pipelined":
            buffers = operand.buffer_count or (1 if single else 2)
            working_set += operand.block_bytes * buffers
        elif entry.access == "scratch":
            working_set += operand.nbytes
        elif entry.access == "prefetch":
            smem += operand.nbytes
        if entry.mapped:
            coverage = tiles.coverage(k)
            reads = (coverage.min, coverage.max, coverage.mean)
        else:
            reads = (0, 0, 0.0)
        operands.append(
            OperandMerit(
                index=k,
                label=operand.label,
                role=role,
                access=entry.access,
                reads_min=reads[0],
                reads_max=reads[1],
                reads_mean=float(reads[2]),
                transfers=tiles.transfers(k, chosen),
                hbm_bytes=tiles.operand_hbm_bytes(k, chosen),
                min_bytes=operand.nbytes if entry.access in ("pipelined", "prefetch") else 0,
                block_bytes=operand.block_bytes if entry.access != "scratch" else operand.nbytes,
                buffers=buffers,
            )
        )
    return KernelMerit(
        kernel=kernel.name,
        schedule=chosen,
        programs=tiles.num_programs,
        operands=tuple(operands),
        hbm_bytes=sum(o.hbm_bytes for o in operands),
        min_hbm_bytes=sum(o.min_bytes for o in operands),
        working_set_bytes=working_set,
        smem_bytes=smem,
        **_flops(tiles),
        compute_dtype=_compute_dtype(tiles),
        vmem_limit_bytes=_vmem_limit(tiles),
        matmul=_matmul(tiles),
    )


def _matmul(tiles: TileMap) -> bool | None:
    work = tiles.kernel.work
    if work is None or work.matmul_flops is None:
        return None
    return bool(work.matmul_flops or work.matmul_dtypes)


def _vmem_limit(tiles: TileMap) -> int | None:
    for name, value in tiles.kernel.compiler_params:
        if name == "vmem_limit_bytes":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class _Flops(TypedDict):
    """A kernel's work as `KernelMerit` holds it (see its attributes)."""

    flops: int | None
    transcendentals: int | None
    flops_source: str
    flops_exact: bool


def _flops(tiles: TileMap) -> _Flops:
    """Counted work when it is exact; else the declared estimate; else the count."""
    work, declared = tiles.kernel.work, tiles.kernel.cost_estimate
    if work is not None and (work.exact or declared is None):
        return _Flops(
            flops=work.flops,
            transcendentals=work.transcendentals,
            flops_source="counted",
            flops_exact=work.exact,
        )
    if declared is not None:
        return _Flops(
            flops=declared.flops,
            transcendentals=declared.transcendentals,
            flops_source="declared",
            flops_exact=True,
        )
    return _Flops(flops=None, transcendentals=None, flops_source="", flops_exact=False)


def _compute_dtype(tiles: TileMap) -> str:
    work = tiles.kernel.work
    if work is not None and work.matmul_dtypes:
        return max(work.matmul_dtypes, key=lambda d: np.dtype(d).itemsize)
    floats = [
        e.operand.dtype
        for e in tiles.operands
        if e.operand.role == "in"
        and not e.operand.scalar_prefetch
        and (e.operand.dtype in _LOW_PRECISION or "float" in e.operand.dtype)
    ]
    if not floats:
        return "float32"
    return max(floats, key=lambda d: np.dtype(d).itemsize)


def chips(kind: str | None = None) -> list[Chip]:
    """The chips of `hardware.py`: TPUs, GPUs, or (kind None) all."""
    found: list[Chip] = []
    if kind in (None, "tpu"):
        found += list(hardware.TPUS.values())
    if kind in (None, "gpu"):
        found += list(hardware.GPUS.values())
    return found


def chip_named(name: str) -> Chip:
    """A chip by name: a TPU generation ("v5e") or a GPU ("H100")."""
    try:
        return hardware.tpu(name)
    except KeyError:
        return hardware.gpu(name)


def on_chip(merit: KernelMerit, chip: Chip | str) -> ChipFit:
    """How the kernel's figures compare with a chip's memory and roofline."""
    if isinstance(chip, str):
        chip = chip_named(chip)
    notes: list[str] = []
    low = merit.compute_dtype in _LOW_PRECISION
    # The MXU and the tensor cores multiply matrices; elementwise work never reaches
    # them, whatever its dtype. An uncounted body may have products.
    matmul = merit.matmul is not False
    if isinstance(chip, Tpu):
        kind: Literal["tpu", "gpu"] = "tpu"
        capacity, capacity_name = chip.vmem_per_core, "VMEM"
        if merit.vmem_limit_bytes:
            capacity = min(capacity, merit.vmem_limit_bytes)
            capacity_name = "VMEM (the kernel's vmem_limit_bytes)"
        else:
            notes.append(
                "A kernel gets a default scoped-VMEM limit below the physical VMEM "
                "shown; raise it with CompilerParams(vmem_limit_bytes=...)."
            )
        if matmul:
            peak, peak_name = chip.bf16_flops, "dense bf16 (MXU)"
            if not low:
                notes.append(
                    f"{merit.compute_dtype} matrix products run on the MXU in several "
                    "bf16 passes: expect a lower compute roof."
                )
        else:
            # pallaslab's table has no figure for the vector units: the chip's peak
            # stays the roof, as the upper bound it is.
            peak, peak_name = chip.bf16_flops, "chip peak, an upper bound for vector work"
            notes.append(
                "Without a matrix product, this kernel's arithmetic runs on the vector "
                "units, well below the chip's peak: the compute roof shown is an upper bound."
            )
        if chip.tensor_cores > 1:
            notes.append(
                f"{chip.name} has {chip.tensor_cores} TensorCores per chip: parallel grid "
                "axes may be split between them; figures here are per chip."
            )
    else:
        kind = "gpu"
        capacity = chip.max_shared_memory_per_block
        capacity_name = "shared memory"
        peak, peak_name = (
            (chip.bf16_flops, "dense bf16 tensor cores")
            if low and matmul
            else (chip.fp32_flops, "fp32")
        )
        if merit.working_set_name:
            notes.append(
                "Shared memory is what the kernel allocates (its buffers, pipeline slots "
                "and barriers, as Mosaic GPU lays them out) against what one block may use."
            )
        else:
            notes.append(
                "On GPU, blocks live in registers or shared memory as the compiler decides; "
                "this compares all blocks, double-buffered, with one block's shared memory."
            )
        notes.append(
            f"Programs re-reading a block may find it in the {chip.l2_bytes // 2**20} MiB L2; "
            "HBM traffic here counts every block a program reads."
        )
    if merit.schedule != kind:
        notes.append(f"Traffic is counted for a {merit.schedule.upper()} schedule.")
    bandwidth = chip.memory_bandwidth
    ridge = peak / bandwidth
    intensity = merit.arithmetic_intensity
    seconds = merit.hbm_bytes / bandwidth
    bound = ""
    attainable = None
    if merit.flops is not None:
        seconds = max(seconds, merit.flops / peak)
        if intensity is not None:
            attainable = min(peak, intensity * bandwidth)
            bound = "memory" if intensity < ridge else "compute"
        elif merit.flops:
            bound, attainable = "compute", peak
    return ChipFit(
        chip=chip.name,
        kind=kind,
        capacity_bytes=capacity,
        capacity_name=capacity_name,
        fits=merit.working_set_bytes <= capacity,
        peak_flops=peak,
        peak_name=peak_name,
        bandwidth=bandwidth,
        intensity=intensity,
        ridge=ridge,
        bound=bound,
        attainable_flops=attainable,
        seconds=seconds,
        notes=tuple(notes),
    )
