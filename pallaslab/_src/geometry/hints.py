"""Performance hints: rules over what pallaslab knows of a kernel. Pure NumPy, no JAX.

Each rule reads records (the kernel, its tile map and figures of merit, the
matrix products and masked accesses the core found, a GPU compile's resources,
the TPU's VMEM layout) against one chip of `hardware.py`, and returns `Hint`s
tied to the source line to change: the BlockSpec's index map, the dot, the
pallas_call. Thresholds are named constants below; each message says what the
figures are, why they cost time, and what to change.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from pallaslab._src.geometry.merit import Chip, KernelMerit, on_chip
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, Operand, SourceLocation, hardware
from pallaslab._src.records.hints import SEVERITIES, DotInfo, FigureValue, Hint, MaskUse, Severity
from pallaslab._src.records.lowered import BlockVmem, GpuResources, Occupancy, TilingProblem

# GPU memory moves 32-byte sectors; a warp's loads coalesce best over 128 bytes.
SECTOR_BYTES = 32
LINE_BYTES = 128
# Tensor-core instructions take at least 16 per dimension; Hopper's wgmma 64 rows.
TENSOR_CORE_MIN = 16
WGMMA_ROWS = 64
# The share of a VMEM tile, or of the MXU, below which a hint is given.
TPU_WASTE_INFO, TPU_WASTE_WARNING = 0.2, 0.5
MXU_INFO, MXU_WARNING = 0.5, 0.25
# Occupancy at or below which a GPU kernel has too few warps to hide latency.
LOW_OCCUPANCY = 0.25
# Masked accesses switching on less than this share of their lanes.
MASK_ON_BELOW = 0.5
# An operand moved this many times its size, costing at least this much extra.
REVISIT_INFO, REVISIT_WARNING = 4.0, 16.0
REVISIT_MIN_EXTRA_BYTES = 1 << 20
# A single-program TPU grid copying at least this much gets no overlap.
ONE_STAGE_MIN_BYTES = 1 << 20
# The last wave of a GPU grid filled less than this is a tail worth a note.
TAIL_WAVE_EFFICIENCY = 0.75

_LOW_PRECISION = frozenset({"bfloat16", "float16"})


@dataclasses.dataclass(frozen=True)
class HintInputs:
    """What the rules read about one kernel.

    Attributes:
        kernel: The kernel.
        chip: The chip the hints assume.
        merit: Its figures of merit (None when the tile map could not be built).
        tiles: Its tile map (for the grid axes along which blocks repeat).
        dots: Its matrix products.
        gpu: A GPU compile's registers, shared memory and occupancy, if at hand.
        vmem_blocks: The VMEM its blocks take laid out in (8, 128) tiles (TPU).
        tiling_problems: Blocks breaking the TPU (8, 128) rule.
        masks: Masked loads and stores, over a sample of programs.
        blocks_in_global: Whether blocks are windows into global memory that the
            body loads from (Triton), rather than copies in VMEM / shared memory.
    """

    kernel: Kernel
    chip: Chip
    merit: KernelMerit | None = None
    tiles: TileMap | None = None
    dots: tuple[DotInfo, ...] = ()
    gpu: GpuResources | None = None
    vmem_blocks: tuple[BlockVmem, ...] = ()
    tiling_problems: tuple[TilingProblem, ...] = ()
    masks: tuple[MaskUse, ...] = ()
    blocks_in_global: bool = False


def kernel_hints(inputs: HintInputs) -> list[Hint]:
    """Every rule's hints for one kernel, most severe first."""
    found: list[Hint] = []
    for rule in RULES:
        found += rule(inputs)
    rank = {s: k for k, s in enumerate(SEVERITIES)}
    return sorted(found, key=lambda h: rank[h.severity])


def _hint(  # noqa: PLR0917 - every rule passes the same six, in this order
    inputs: HintInputs,
    rule: str,
    severity: Severity,
    message: str,
    location: SourceLocation | None,
    figures: Sequence[tuple[str, FigureValue]],
) -> Hint:
    kernel = inputs.kernel
    return Hint(
        id=rule,
        severity=severity,
        message=message,
        location=location or call_line(kernel),
        figures=tuple((name, _figure(value)) for name, value in figures),
        chip=inputs.chip.name,
        kernel=kernel.name,
        kernel_index=kernel.index,
    )


def _figure(value: FigureValue) -> FigureValue:
    return round(value, 4) if isinstance(value, float) else value


def _is_tpu(inputs: HintInputs) -> bool:
    return isinstance(inputs.chip, hardware.Tpu)


def call_line(kernel: Kernel) -> SourceLocation | None:
    """Where the grid is set, as near as is known.

    The pallas_call's line when JAX knows where it ran, else the first BlockSpec's
    (an argument of the same call), else the kernel's def line.
    """
    if kernel.call_site is not None:
        return kernel.call_site
    for operand in kernel.operands:
        found = blockspec_line(operand)
        if found is not None:
            return found
    return kernel.source


def blockspec_line(operand: Operand) -> SourceLocation | None:
    """The line of the operand's BlockSpec (its index map), when known."""
    index_map = operand.index_map
    if index_map is None or not index_map.source_file:
        return None
    return SourceLocation(index_map.source_file, index_map.source_line)


def _bytes(count: float) -> str:
    amount = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.3g} {unit}"
        amount /= 1024
    return f"{count} B"  # pragma: no cover


def _shape(dims: Sequence[int | None]) -> str:
    inner = ", ".join("None" if d is None else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def _pipelined(kernel: Kernel) -> list[Operand]:
    return [
        o
        for o in kernel.operands
        if o.role in ("in", "out") and not o.scalar_prefetch and o.index_map is not None
    ]


# ---------------------------------------------------------------------------
# Blocks against the TPU's (8, 128) tiles and the GPU's memory transactions.


def tpu_tiling(inputs: HintInputs) -> list[Hint]:
    """Blocks that break the TPU (8, 128) rule: the kernel will not compile."""
    if not _is_tpu(inputs):
        return []
    operands = {o.label: o for o in inputs.kernel.operands}
    found = []
    for problem in inputs.tiling_problems:
        operand = operands.get(problem.operand)
        figures: list[tuple[str, FigureValue]] = [("tile", "(8, 128)")]
        if operand is not None:
            figures += [("block", _shape(operand.block_shape)), ("array", _shape(operand.shape))]
        found.append(
            _hint(
                inputs,
                "tpu-tiling",
                "error",
                f"{problem.message} {problem.hint}",
                problem.location,
                figures,
            )
        )
    return found


def tpu_padding(inputs: HintInputs) -> list[Hint]:
    """Legal blocks whose VMEM tiles are mostly padding (a narrow last dimension)."""
    if not _is_tpu(inputs):
        return []
    broken = {p.operand for p in inputs.tiling_problems}
    operands = {o.label: o for o in inputs.kernel.operands}
    found = []
    for block in inputs.vmem_blocks:
        if len(block.block_shape) < 2 or not block.bytes or block.operand in broken:
            continue
        used = block.bytes / block.padded_bytes
        waste = 1.0 - used
        if waste < TPU_WASTE_INFO:
            continue
        severity: Severity = "warning" if waste >= TPU_WASTE_WARNING else "info"
        rows = 8 * max(4 // max(np.dtype(block.dtype).itemsize, 1), 1)
        operand = operands.get(block.operand)
        found.append(
            _hint(
                inputs,
                "tpu-padding",
                severity,
                f"{block.operand}'s block {_shape(block.block_shape)} of {block.dtype} fills "
                f"{used:.0%} of the VMEM it takes: the TPU lays blocks out in tiles of "
                f"{rows} rows x 128 lanes, so {waste:.0%} of that VMEM, and of every vector "
                f"operation on the block, is padding. Last two block dimensions that are "
                f"multiples of ({rows}, 128) use all of it (pad or reshape the array if its "
                "own dimensions are small).",
                blockspec_line(operand) if operand else None,
                [
                    ("block bytes", block.bytes),
                    ("bytes in VMEM tiles", block.padded_bytes),
                    ("padding %", round(100 * waste, 1)),
                ],
            )
        )
    return found


def contiguous_elements(operand: Operand) -> int:
    """Elements of one contiguous run of the block in the array (row-major).

    The block's trailing dimensions that span the whole array are contiguous with
    the next one in: a (64, 128) block of a (256, 128) array is one run of 8192.
    """
    run = 1
    for block, whole in zip(reversed(operand.block_shape), reversed(operand.shape), strict=True):
        size = 1 if block is None else int(block)
        run *= size
        if size != whole:
            break
    return run


def gpu_narrow_rows(inputs: HintInputs) -> list[Hint]:
    """Blocks whose contiguous rows are too short for coalesced GPU loads."""
    if _is_tpu(inputs):
        return []
    found = []
    for operand in _pipelined(inputs.kernel):
        if not operand.shape or operand.block_elements >= math.prod(operand.shape):
            continue  # the whole array: one contiguous run
        itemsize = np.dtype(operand.dtype).itemsize
        run = contiguous_elements(operand)
        run_bytes = run * itemsize
        if run_bytes >= LINE_BYTES:
            continue
        severity: Severity = "warning" if run_bytes < SECTOR_BYTES else "info"
        wanted = -(-LINE_BYTES // itemsize)
        last = operand.block_shape[-1]
        if last is not None and last == operand.shape[-1]:
            advice = (
                f"Each row of the array is only {operand.shape[-1]} elements: blocks of more "
                "rows make each program's loads span whole cache lines."
            )
        else:
            advice = (
                f"A last block dimension of at least {wanted} elements, or the whole array "
                "dimension, lets each warp load full cache lines."
            )
        found.append(
            _hint(
                inputs,
                "gpu-narrow-rows",
                severity,
                f"{operand.label}'s block {_shape(operand.block_shape)} of "
                f"{_shape(operand.shape)} is read in runs of {run_bytes} contiguous bytes "
                f"({run} x {operand.dtype}), while GPU memory moves {SECTOR_BYTES}-byte "
                f"sectors and a warp's loads coalesce best over {LINE_BYTES} contiguous "
                f"bytes. {advice}",
                blockspec_line(operand),
                [
                    ("contiguous bytes", run_bytes),
                    ("sector bytes", SECTOR_BYTES),
                    ("cache line bytes", LINE_BYTES),
                ],
            )
        )
    return found


# ---------------------------------------------------------------------------
# Matrix products.


def _float_dot(dot: DotInfo) -> bool:
    return all("float" in d for d in (dot.lhs_dtype, dot.rhs_dtype, dot.out_dtype))


def _dot_words(dot: DotInfo) -> str:
    batch = f"{dot.batch} x " if dot.batch > 1 else ""
    return f"{batch}{dot.m}x{dot.k} by {dot.k}x{dot.n}"


def small_dot(inputs: HintInputs) -> list[Hint]:
    """Products too small for the tensor cores or the MXU."""
    found = []
    chip = inputs.chip
    for dot in inputs.dots:
        if not _float_dot(dot):
            continue
        dims = [("m", dot.m), ("n", dot.n), ("k", dot.k)]
        if isinstance(chip, hardware.Tpu):
            size = chip.mxu_size
            used = (dot.k / (math.ceil(dot.k / size) * size)) * (
                dot.n / (math.ceil(dot.n / size) * size)
            )
            if used >= MXU_INFO:
                continue
            found.append(
                _hint(
                    inputs,
                    "small-dot",
                    "warning" if used < MXU_WARNING else "info",
                    f"This dot multiplies {_dot_words(dot)}: {chip.name}'s MXU is a {size}x"
                    f"{size} systolic array, and a product with K={dot.k} and N={dot.n} keeps "
                    f"{used:.0%} of it busy per pass. Blocks that give the dot K and N of "
                    f"{size} or more (multiples of {size}) fill it.",
                    dot.location,
                    [*dims, ("MXU size", size), ("MXU use %", round(100 * used, 1))],
                )
            )
            continue
        smallest = min(dot.m, dot.n, dot.k)
        if smallest < TENSOR_CORE_MIN:
            found.append(
                _hint(
                    inputs,
                    "small-dot",
                    "warning",
                    f"This dot multiplies {_dot_words(dot)}: tensor-core instructions take "
                    f"tiles of at least {TENSOR_CORE_MIN} in every dimension, so Triton pads "
                    f"this product or refuses it, and most of the work is wasted. Make the "
                    f"block dimensions that reach the dot {TENSOR_CORE_MIN} or more.",
                    dot.location,
                    [*dims, ("tensor-core minimum", TENSOR_CORE_MIN)],
                )
            )
        elif (
            isinstance(chip, hardware.Gpu)
            and chip.compute_capability >= (9, 0)
            and dot.m % WGMMA_ROWS
        ):
            found.append(
                _hint(
                    inputs,
                    "small-dot",
                    "info",
                    f"This dot multiplies {_dot_words(dot)}: on {chip.name}, the fastest "
                    f"tensor-core instructions (wgmma) work on {WGMMA_ROWS} rows per warp "
                    f"group; with M={dot.m}, Triton falls back to the older mma instructions. "
                    f"A block with a multiple of {WGMMA_ROWS} rows feeding the dot can use wgmma.",
                    dot.location,
                    [*dims, ("wgmma rows", WGMMA_ROWS)],
                )
            )
    return found


def dot_upcast(inputs: HintInputs) -> list[Hint]:
    """bfloat16 / float16 data widened to float32 just before a dot."""
    found = []
    chip = inputs.chip
    for dot in inputs.dots:
        source = dot.lhs_from or dot.rhs_from
        if source not in _LOW_PRECISION or "float32" not in (dot.lhs_dtype, dot.rhs_dtype):
            continue
        if isinstance(chip, hardware.Tpu):
            cost = (
                f"on {chip.name}'s MXU, float32 products take several bfloat16 passes, and "
                "the float32 operands take twice the VMEM and vector registers"
            )
            figures: list[tuple[str, FigureValue]] = [("bf16 peak TFLOP/s", chip.bf16_flops / 1e12)]
        else:
            cost = (
                f"on {chip.name}, float32 operands run the tensor cores as TF32 at no more "
                "than half the bfloat16 rate (or without tensor cores at full float32 "
                "precision), and take twice the registers and shared memory"
            )
            figures = [
                ("bf16 tensor-core peak TFLOP/s", chip.bf16_flops / 1e12),
                ("fp32 peak TFLOP/s", chip.fp32_flops / 1e12),
            ]
        found.append(
            _hint(
                inputs,
                "dot-upcast",
                "warning",
                f"This dot multiplies float32 values converted from {source}: {cost}. Give "
                f"the dot the {source} values and pass preferred_element_type=jnp.float32 "
                "to get a float32 result from the same products.",
                dot.location,
                [("converted from", source), ("dot dtype", "float32"), *figures],
            )
        )
    return found


def dot_low_precision_sum(inputs: HintInputs) -> list[Hint]:
    """A dot returning bfloat16 / float16 whose result is widened or summed."""
    found = []
    for dot in inputs.dots:
        if dot.out_dtype not in _LOW_PRECISION or not (dot.accumulated or dot.widened_to):
            continue
        then = "summed" if dot.accumulated else f"converted to {dot.widened_to}"
        found.append(
            _hint(
                inputs,
                "dot-low-precision-result",
                "warning",
                f"This dot returns {dot.out_dtype} and its result is then {then}: each "
                f"product over K={dot.k} is rounded to {dot.out_dtype} first, throwing away "
                "precision the tensor cores and the MXU computed in float32 anyway. Pass "
                "preferred_element_type=jnp.float32 to the dot (same speed) and keep the "
                "accumulator in float32.",
                dot.location,
                [("result dtype", dot.out_dtype), ("k", dot.k)],
            )
        )
    return found


# ---------------------------------------------------------------------------
# Filling the chip.


def _occupancy_row(inputs: HintInputs) -> Occupancy | None:
    gpu = inputs.gpu
    if gpu is None or not gpu.occupancy:
        return None
    return next((o for o in gpu.occupancy if o.gpu == inputs.chip.name), None)


def small_grid(inputs: HintInputs) -> list[Hint]:
    """GPU grids with fewer programs than SMs, or a mostly empty last wave."""
    chip = inputs.chip
    kernel = inputs.kernel
    if not isinstance(chip, hardware.Gpu) or kernel.kind != "pallas_call":
        return []
    programs = kernel.num_programs
    site = call_line(kernel)
    if programs < chip.sms:
        used = programs / chip.sms
        return [
            _hint(
                inputs,
                "small-grid",
                "warning" if used < 0.5 else "info",
                f"The grid runs {programs} program{'s' if programs != 1 else ''}, one thread "
                f"block each, but {chip.name} has {chip.sms} SMs: {chip.sms - programs} of "
                f"them stay idle ({used:.0%} of the chip in use). Smaller blocks or more grid "
                "axes give every SM work (aim for several programs per SM).",
                site,
                [("programs", programs), ("SMs", chip.sms), ("SMs used %", round(100 * used, 1))],
            )
        ]
    row = _occupancy_row(inputs)
    if row is None or row.blocks_per_sm <= 0:
        return []
    slots = chip.sms * row.blocks_per_sm
    waves = programs / slots
    full_waves = math.ceil(waves)
    efficiency = waves / full_waves
    if full_waves < 2 or efficiency >= TAIL_WAVE_EFFICIENCY:
        return []
    last = programs - (full_waves - 1) * slots
    return [
        _hint(
            inputs,
            "grid-tail",
            "info",
            f"The {programs} programs run in {full_waves} waves of {slots} ({chip.sms} SMs x "
            f"{row.blocks_per_sm} blocks each on {chip.name}); the last wave has {last} "
            f"programs, so the chip runs {efficiency:.0%} full on average. A grid that is a "
            f"multiple of {slots} programs (or many more waves) avoids the tail.",
            site,
            [
                ("programs", programs),
                ("programs per wave", slots),
                ("waves", round(waves, 3)),
                ("average fill %", round(100 * efficiency, 1)),
            ],
        )
    ]


def tpu_cores(inputs: HintInputs) -> list[Hint]:
    """A multi-TensorCore TPU running a grid with no parallel axis on one core."""
    chip = inputs.chip
    kernel = inputs.kernel
    if not isinstance(chip, hardware.Tpu) or chip.tensor_cores < 2 or kernel.num_programs < 2:
        return []
    if "parallel" in (kernel.dimension_semantics or ()):
        return []
    return [
        _hint(
            inputs,
            "tpu-one-core",
            "info",
            f"{chip.name} has {chip.tensor_cores} TensorCores per chip, and Pallas splits a "
            "grid between them only along axes marked parallel: this grid runs on one. Mark "
            "the axes whose programs are independent, e.g. CompilerParams(dimension_semantics="
            "('parallel', 'arbitrary')).",
            call_line(kernel),
            [("TensorCores", chip.tensor_cores), ("parallel axes", 0)],
        )
    ]


def one_stage_pipeline(inputs: HintInputs) -> list[Hint]:
    """A TPU grid of one program: its copies cannot overlap any compute."""
    merit, chip = inputs.merit, inputs.chip
    if merit is None or not isinstance(chip, hardware.Tpu) or merit.programs != 1:
        return []
    moved = sum(o.hbm_bytes for o in merit.operands if o.access == "pipelined")
    if moved < ONE_STAGE_MIN_BYTES:
        return []
    inputs_bytes = sum(
        o.hbm_bytes for o in merit.operands if o.access == "pipelined" and o.role == "in"
    )
    microseconds = moved / chip.memory_bandwidth * 1e6
    return [
        _hint(
            inputs,
            "one-stage-pipeline",
            "warning",
            f"The grid has a single program, so Pallas copies all {_bytes(inputs_bytes)} of "
            "its input blocks into VMEM before the body starts and writes the outputs back "
            f"after it ends: nothing overlaps the {_bytes(moved)} of copies (about "
            f"{microseconds:.3g} us at {chip.name}'s {chip.memory_bandwidth / 1e9:.0f} GB/s). "
            "A grid of several programs lets the pipeline copy the next blocks while the body "
            "computes.",
            call_line(inputs.kernel),
            [
                ("programs", 1),
                ("bytes copied", moved),
                ("copy time us", round(microseconds, 3)),
            ],
        )
    ]


# ---------------------------------------------------------------------------
# On-chip memory, occupancy, spills.


def working_set(inputs: HintInputs) -> list[Hint]:
    """Blocks of one program that do not fit in VMEM or shared memory."""
    merit = inputs.merit
    if merit is None or not merit.working_set_bytes or inputs.blocks_in_global:
        return []  # Triton: the compile's shared memory tells (see `occupancy`)
    fit = on_chip(merit, inputs.chip)
    if fit.fits:
        return []
    largest = max(
        (o for o in inputs.kernel.operands if o.role != "scratch"),
        key=lambda o: o.block_bytes,
        default=None,
    )
    figures: list[tuple[str, FigureValue]] = [
        ("working set bytes", merit.working_set_bytes),
        ("capacity bytes", fit.capacity_bytes),
    ]
    if fit.kind == "tpu":
        return [
            _hint(
                inputs,
                "working-set",
                "error",
                f"The blocks of one program take {_bytes(merit.working_set_bytes)} (each "
                f"pipelined block twice: one copy in flight), more than the "
                f"{_bytes(fit.capacity_bytes)} of {fit.capacity_name} on {inputs.chip.name}: "
                "the kernel will not compile. Use smaller blocks, pl.Buffered(1) for blocks "
                "that never change, or raise CompilerParams(vmem_limit_bytes=...) as far as "
                "the physical VMEM.",
                blockspec_line(largest) if largest else None,
                figures,
            )
        ]
    return [
        _hint(
            inputs,
            "working-set",
            "warning",
            f"The blocks of one program take {_bytes(merit.working_set_bytes)} "
            "(double-buffered), more than the "
            f"{_bytes(fit.capacity_bytes)} of shared memory a thread block can have on "
            f"{inputs.chip.name}: the pipeline cannot hold them. Smaller blocks, or fewer "
            "buffers (pl.Buffered), fit.",
            blockspec_line(largest) if largest else None,
            figures,
        )
    ]


def occupancy(inputs: HintInputs) -> list[Hint]:
    """Few warps per SM because registers or shared memory run out (GPU compile)."""
    gpu, row = inputs.gpu, _occupancy_row(inputs)
    if gpu is None or row is None or row.limiter not in ("registers", "shared memory"):
        return []
    if row.fraction > LOW_OCCUPANCY:
        return []
    chip = inputs.chip
    assert isinstance(chip, hardware.Gpu)
    if row.limiter == "registers":
        cause = (
            f"each thread uses {gpu.registers_per_thread} registers, so an SM holds "
            f"{row.blocks_per_sm} blocks of {gpu.num_warps} warps"
        )
        fix = (
            "Fewer values live at once (smaller blocks, a smaller accumulator) or fewer "
            "warps per block free registers."
        )
    else:
        cause = (
            f"each block takes {_bytes(gpu.shared_bytes)} of shared memory, so an SM "
            f"({_bytes(chip.shared_memory_per_sm)}) holds {row.blocks_per_sm} blocks"
        )
        fix = "Fewer pipeline stages (num_stages) or smaller blocks free shared memory."
    severity: Severity = "error" if row.blocks_per_sm == 0 else "warning"
    arch = "" if row.same_arch else f" (compiled for {gpu.arch}; {chip.name} may differ)"
    return [
        _hint(
            inputs,
            "occupancy",
            severity,
            f"Occupancy on {chip.name} is {row.fraction:.0%}{arch}: {cause}, "
            f"{row.active_warps} of {row.max_warps} warp slots, too few to hide memory "
            f"latency. {fix}",
            call_line(inputs.kernel),
            [
                ("registers per thread", gpu.registers_per_thread or 0),
                ("shared memory bytes", gpu.shared_bytes),
                ("blocks per SM", row.blocks_per_sm),
                ("active warps", row.active_warps),
                ("warp slots", row.max_warps),
                ("occupancy %", round(100 * row.fraction, 1)),
            ],
        )
    ]


def spills(inputs: HintInputs) -> list[Hint]:
    """Registers spilled to local memory (GPU compile)."""
    gpu = inputs.gpu
    if gpu is None or not gpu.spill_store_bytes:
        return []
    return [
        _hint(
            inputs,
            "register-spills",
            "warning",
            f"ptxas spills {gpu.spill_store_bytes} bytes of registers per thread to local "
            f"memory (and loads {gpu.spill_load_bytes or 0} back): every spill is a memory "
            "access in the middle of the computation. Smaller blocks or fewer values live "
            "at once keep them in registers.",
            call_line(inputs.kernel),
            [
                ("spill store bytes", gpu.spill_store_bytes),
                ("spill load bytes", gpu.spill_load_bytes or 0),
                ("registers per thread", gpu.registers_per_thread or 0),
            ],
        )
    ]


# ---------------------------------------------------------------------------
# Lanes and traffic.


def masked_lanes(inputs: HintInputs) -> list[Hint]:
    """Masked loads and stores that switch off most of their lanes."""
    found = []
    for use in inputs.masks:
        if use.fraction >= MASK_ON_BELOW:
            continue
        what = {"read": "load", "write": "store"}.get(use.kind, "update")
        found.append(
            _hint(
                inputs,
                "masked-lanes",
                "warning",
                f"The masked {what} of {use.ref} here switches on {use.fraction:.0%} of its "
                f"{use.lanes} lanes (over {use.programs} sampled program"
                f"{'s' if use.programs != 1 else ''}): the other lanes do no work but still "
                "take their slots. Blocks sized closer to the data (a smaller power of two, "
                "or rows folded into the block) waste fewer lanes.",
                use.location,
                [
                    ("lanes", use.lanes),
                    ("lanes on %", round(100 * use.fraction, 1)),
                    ("programs sampled", use.programs),
                ],
            )
        )
    return found


def revisits(inputs: HintInputs) -> list[Hint]:
    """Operands copied from HBM many times over (their block repeats along grid axes)."""
    merit, tiles = inputs.merit, inputs.tiles
    if merit is None:
        return []
    tpu_schedule = merit.schedule == "tpu"
    found = []
    for entry in merit.operands:
        if entry.access != "pipelined" or not entry.min_bytes:
            continue
        ratio = entry.traffic_ratio
        extra = entry.hbm_bytes - entry.min_bytes
        if ratio < REVISIT_INFO or extra < REVISIT_MIN_EXTRA_BYTES:
            continue
        axes: tuple[int, ...] = ()
        if tiles is not None:
            try:
                axes = tiles.revisit_axes(entry.index)
            except ValueError:
                axes = ()
        operand = inputs.kernel.operands[entry.index]
        along = (
            f" its block is the same for every program along grid axis "
            f"{', '.join(map(str, axes))}, and each of them copies it again"
            if axes
            else " its blocks overlap, and each program copies its own"
        )
        advice = (
            f"Fewer programs along grid axis {', '.join(map(str, axes))} (larger blocks "
            "of the operands that axis steps through) read it fewer times."
            if axes
            else "Larger blocks overlap less."
        )
        if tpu_schedule and axes and len(inputs.kernel.grid) - 1 not in axes:
            advice += (
                " Or put that axis last in the grid: consecutive programs then keep the "
                "block without a copy."
            )
        elif not tpu_schedule:
            along += " (some of it may come from the L2 cache)"
        found.append(
            _hint(
                inputs,
                "hbm-revisits",
                "warning" if ratio >= REVISIT_WARNING else "info",
                f"{operand.label} crosses between HBM and the kernel {ratio:.3g} times over "
                f"({_bytes(entry.hbm_bytes)} moved for a {_bytes(entry.min_bytes)} array):"
                f"{along}. {advice}",
                blockspec_line(operand),
                [
                    ("bytes moved", entry.hbm_bytes),
                    ("array bytes", entry.min_bytes),
                    ("times over", round(ratio, 3)),
                    ("repeating grid axes", ", ".join(map(str, axes)) or "-"),
                ],
            )
        )
    return found


RULES: tuple[Callable[[HintInputs], list[Hint]], ...] = (
    tpu_tiling,
    working_set,
    occupancy,
    small_grid,
    tpu_cores,
    one_stage_pipeline,
    small_dot,
    dot_upcast,
    dot_low_precision_sum,
    tpu_padding,
    gpu_narrow_rows,
    masked_lanes,
    revisits,
    spills,
)
