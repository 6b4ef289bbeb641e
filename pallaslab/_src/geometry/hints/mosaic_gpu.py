"""Hint rules for Mosaic GPU kernels: SMEM, tensor-core products, swizzles, pipelines, grids.

Read from the kernel's `MosaicGpuPlan` (its allocations, copies, products, pipelines
and persistent loop) and its SMEM budget. The rules of the tensor-core instructions
are Mosaic GPU's own checks (`jax/experimental/mosaic/gpu/wgmma.py`, `tcgen05.py` and
the Pallas lowering of `plgpu.wgmma`): what the chip or the compiler rejects is an
error; what only costs time, a warning.
"""

from __future__ import annotations

from pallaslab._src.base import words
from pallaslab._src.geometry.hints.inputs import HintInputs, call_line, make_hint
from pallaslab._src.geometry.mosaic_gpu import SMEM_ALIGNMENT
from pallaslab._src.records import SourceLocation, hardware
from pallaslab._src.records.hints import FigureValue, Hint, Severity
from pallaslab._src.records.mosaic_gpu import GpuTransform, MmaSite, SmemAllocation

# Element widths (bytes) per dtype Mosaic GPU's tensor-core products take.
_WIDTH = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
}
# Accumulator dtypes `wgmma` accepts per input dtype (Mosaic GPU's `wgmma.py`).
_WGMMA_ACC = {
    "float32": ("float32",),  # as tf32
    "bfloat16": ("float32",),
    "float16": ("float16", "float32"),
    "float8_e4m3fn": ("float16", "float32"),
    "float8_e5m2": ("float16", "float32"),
    "int8": ("int32",),
}
SWIZZLES = (128, 64, 32)


def _gpu(inputs: HintInputs) -> hardware.Gpu | None:
    return inputs.chip if isinstance(inputs.chip, hardware.Gpu) else None


def smem_over_budget(inputs: HintInputs) -> list[Hint]:
    """The kernel allocates more shared memory than one block may use on the chip."""
    gpu, budget, plan = _gpu(inputs), inputs.smem, inputs.plan
    if gpu is None or budget is None or plan is None:
        return []
    fit = budget.on_chip(gpu)
    if fit.fits:
        return []
    live = sorted(
        (line for line in budget.lines if line.at_peak and line.bytes),
        key=lambda line: -line.bytes,
    )
    biggest = ", ".join(f"{line.allocation.label} {words.nbytes(line.bytes)}" for line in live[:3])
    pipelined = [line for line in live if line.allocation.pipeline is not None]
    fix = (
        "Fewer pipeline slots (max_concurrent_steps), smaller blocks, or an epilogue buffer "
        "reused across steps fit it."
        if pipelined
        else "Smaller buffers, or scopes (pl.run_scoped) that let buffers used one after "
        "another share memory, fit it."
    )
    where = live[0].allocation.location if live else None
    return [
        make_hint(
            inputs,
            "mosaic-smem",
            "error",
            f"The kernel asks for {words.nbytes(budget.total)} of shared memory ({biggest}; "
            f"each buffer aligned to {SMEM_ALIGNMENT} bytes), more than the "
            f"{words.nbytes(fit.limit)} one block may use on {gpu.name}: Mosaic GPU refuses to "
            f"launch it. {fix}",
            where,
            [
                ("SMEM bytes", budget.total),
                ("limit bytes", fit.limit),
                ("buffer bytes", budget.buffer_bytes),
                ("barriers", budget.barriers),
            ],
        )
    ]


def _swizzle(transforms: tuple[GpuTransform, ...]) -> int | None:
    return next((t.values[0] for t in transforms if t.kind == "swizzle"), None)


def _tiling(transforms: tuple[GpuTransform, ...]) -> tuple[int, ...] | None:
    return next((t.values for t in transforms if t.kind == "tiling"), None)


def _transposed(transforms: tuple[GpuTransform, ...]) -> bool:
    return any(t.kind == "transpose" for t in transforms)


def _mma_problems(mma: MmaSite, gpu: hardware.Gpu) -> list[str]:
    """What the chip or Mosaic GPU rejects in one product, one sentence each."""
    found = []
    major = gpu.compute_capability[0]
    if mma.kind == "wgmma" and major != 9:
        found.append(
            f"wgmma is a Hopper (sm_90a) instruction and {gpu.name} is {gpu.arch}"
            + (": Blackwell multiplies with plgpu.tcgen05_mma" if major == 10 else "")
        )
    if mma.kind == "tcgen05" and major != 10:
        found.append(
            f"tcgen05_mma is a Blackwell (sm_100a) instruction and {gpu.name} is {gpu.arch}"
            + (": Hopper multiplies with plgpu.wgmma" if major == 9 else "")
        )
    if mma.lhs_dtype != mma.rhs_dtype:
        found.append(f"A is {mma.lhs_dtype} and B {mma.rhs_dtype}: both must have one dtype")
    width = _WIDTH.get(mma.rhs_dtype)
    if width is None:
        found.append(f"{mma.rhs_dtype} is not a dtype the tensor cores multiply")
    if mma.kind == "wgmma":
        if mma.m % 64:
            found.append(f"M = {mma.m} is not a multiple of 64 (a warpgroup's rows)")
        if mma.n % 8 or mma.n > 256:
            found.append(f"N = {mma.n} is not a multiple of 8 up to 256")
        accepted = _WGMMA_ACC.get(mma.rhs_dtype, ())
        if width is not None and mma.acc_dtype not in accepted:
            found.append(
                f"a {mma.rhs_dtype} product accumulates in {words.and_list(list(accepted))}, "
                f"not {mma.acc_dtype}"
            )
    elif mma.kind == "tcgen05":
        if mma.m not in (64, 128):
            found.append(f"M = {mma.m} per CTA: tcgen05_mma takes 64 or 128 rows")
        if mma.n % 8 or mma.n > 256 * (2 if mma.collective else 1):
            found.append(f"N = {mma.n} is not a multiple of 8 up to 256 per CTA")
    if mma.kind == "dot" or width is None:
        return found
    for side, memory, transforms in (
        ("A", mma.lhs_memory, mma.lhs_transforms),
        ("B", "smem", mma.rhs_transforms),
    ):
        if memory != "smem":
            continue
        swizzle, tiling = _swizzle(transforms), _tiling(transforms)
        if swizzle is None or tiling is None:
            found.append(
                f"{side} is in SMEM without a TilingTransform and a SwizzleTransform: the "
                "tensor cores read SMEM operands only tiled and swizzled"
            )
            continue
        elems = swizzle // width
        if tuple(tiling) != (8, elems):
            found.append(
                f"{side}'s tiling {tuple(tiling)} does not fit its {swizzle}-byte swizzle: "
                f"it must be (8, {elems}) for {mma.rhs_dtype}"
            )
        if mma.k % elems:
            found.append(f"K = {mma.k} is not a multiple of the {elems} elements a swizzle holds")
        if _transposed(transforms) and width != 2:
            found.append(f"{side} is transposed, which only 16-bit products allow")
    sides = [mma.rhs_transforms, *([mma.lhs_transforms] if mma.lhs_memory == "smem" else [])]
    swizzles = {s for s in (_swizzle(t) for t in sides) if s is not None}
    if len(swizzles) > 1:
        found.append(f"A and B have different swizzles ({sorted(swizzles)}): they must match")
    return found


def mma_rejected(inputs: HintInputs) -> list[Hint]:
    """`wgmma` / `tcgen05_mma` shapes, dtypes and layouts the chip or Mosaic GPU rejects."""
    gpu, plan = _gpu(inputs), inputs.plan
    if gpu is None or plan is None:
        return []
    found = []
    for mma in plan.mmas:
        if mma.kind == "dot":
            continue
        problems = _mma_problems(mma, gpu)
        if not problems:
            continue
        found.append(
            make_hint(
                inputs,
                "mosaic-mma",
                "error",
                f"This {mma.kind} ({mma.m} x {mma.n} x {mma.k}, {mma.lhs_dtype} x "
                f"{mma.rhs_dtype} -> {mma.acc_dtype}) cannot run on {gpu.name}: "
                + "; ".join(problems)
                + ".",
                mma.location,
                [
                    ("m", mma.m),
                    ("n", mma.n),
                    ("k", mma.k),
                    ("dtype", mma.rhs_dtype),
                    ("accumulator", mma.acc_dtype),
                    ("compute capability", gpu.arch),
                ],
            )
        )
    return found


def _best_swizzle(row_bytes: int) -> int | None:
    return next((s for s in SWIZZLES if row_bytes % s == 0), None)


def swizzle_mismatch(inputs: HintInputs) -> list[Hint]:
    """Swizzles and tilings that do not match their buffer's rows, TMA windows TMA refuses."""
    plan = inputs.plan
    if plan is None:
        return []
    found: list[Hint] = []
    for allocation in plan.smem.walk():
        hint = _buffer_swizzle(inputs, allocation)
        if hint is not None:
            found.append(hint)
    for copy in plan.copies:
        if not copy.kind.startswith("tma") or not copy.window:
            continue
        row = copy.window[-1] * (copy.bytes_each // max(1, _elements(copy.window)))
        if row % 16:
            found.append(
                make_hint(
                    inputs,
                    "mosaic-swizzle",
                    "error",
                    f"This TMA copy moves rows of {row} bytes ({copy.window[-1]} elements of "
                    f"{copy.dtype}): TMA moves rows that are multiples of 16 bytes. Make the "
                    "window's last dimension a multiple of "
                    f"{16 // max(1, copy.bytes_each // max(1, _elements(copy.window)))} elements.",
                    copy.location,
                    [("row bytes", row), ("window", str(copy.window))],
                )
            )
    return found


def _elements(shape: tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def _buffer_swizzle(inputs: HintInputs, a: SmemAllocation) -> Hint | None:
    if a.kind != "buffer" or not a.shape:
        return None
    itemsize = a.nbytes // max(1, _elements(a.stored_shape))
    if not itemsize:
        return None
    swizzle, tiling = a.swizzle, a.tiling
    minor = (tiling[-1] if tiling else a.shape[-1]) * itemsize  # one tile's row
    row = a.shape[-1] * itemsize  # one row of the block
    figures: list[tuple[str, FigureValue]] = [
        ("row bytes", row),
        ("swizzle bytes", swizzle or 0),
        ("tile row bytes", minor),
    ]
    if swizzle is not None and minor != swizzle:
        return make_hint(
            inputs,
            "mosaic-swizzle",
            "error",
            f"{a.label} swizzles {swizzle} bytes but its tiles' rows are {minor} bytes "
            f"({minor // itemsize} elements of {a.dtype}): a swizzle spans exactly one tile row. "
            f"TilingTransform((8, {swizzle // itemsize})) fits SwizzleTransform({swizzle}).",
            a.location,
            figures,
        )
    best = _best_swizzle(row)
    if swizzle is not None and best is not None and best > swizzle:
        severity: Severity = "warning"
        return make_hint(
            inputs,
            "mosaic-swizzle",
            severity,
            f"{a.label} swizzles {swizzle} bytes while its rows of {row} bytes allow "
            f"{best}: a narrower swizzle spreads fewer rows over the SMEM banks (more bank "
            f"conflicts) and splits each tensor-core read in more pieces. Tile by "
            f"(8, {best // itemsize}) with SwizzleTransform({best}) (plgpu.find_swizzle picks "
            "the widest).",
            a.location,
            figures,
        )
    return None


def shallow_pipeline(inputs: HintInputs) -> list[Hint]:
    """Pipelines too shallow to hide their copies behind the work."""
    plan, gpu, budget = inputs.plan, _gpu(inputs), inputs.smem
    if plan is None:
        return []
    found = []
    for pipeline in plan.pipelines:
        if pipeline.kind == "pallas_call" and pipeline.steps <= 1:
            continue  # every grid axis parallel: CTAs, not steps, hide the copies
        figures: list[tuple[str, FigureValue]] = [
            ("steps", pipeline.steps),
            ("max_concurrent_steps", pipeline.slots),
        ]
        if pipeline.slots == 1 and pipeline.steps >= 2:
            found.append(
                make_hint(
                    inputs,
                    "mosaic-shallow-pipeline",
                    "warning",
                    f"This pipeline keeps one slot per operand (max_concurrent_steps=1) over "
                    f"{pipeline.steps} steps: each step's copy starts only once the step "
                    "before it is done, so nothing overlaps the copies. "
                    "max_concurrent_steps=2 or more (SMEM permitting) fetches ahead.",
                    pipeline.location,
                    figures,
                )
            )
        elif pipeline.steps == 1 and gpu is not None and budget is not None:
            resident = budget.on_chip(gpu).blocks_per_sm
            if resident <= 1:
                found.append(
                    make_hint(
                        inputs,
                        "mosaic-shallow-pipeline",
                        "warning",
                        "This pipeline runs a single step: its copy is never hidden behind "
                        f"work, and with {words.nbytes(budget.total)} of SMEM per CTA no other "
                        f"CTA shares the SM on {gpu.name} to overlap it. A grid of several "
                        "steps (smaller blocks along the pipelined axis) lets copies run ahead.",
                        pipeline.location,
                        [*figures, ("CTAs per SM", resident)],
                    )
                )
    return found


def persistent_grid(inputs: HintInputs) -> list[Hint]:
    """A persistent kernel whose CTAs are not a multiple (or a fraction) of the chip's SMs."""
    plan, gpu = inputs.plan, _gpu(inputs)
    if plan is None or gpu is None or plan.persistent is None:
        return []
    ctas, sms = plan.ctas, gpu.sms
    if ctas % sms == 0 or sms % ctas == 0:
        return []
    loop = plan.persistent
    if ctas < sms:
        effect = f"{sms - ctas} of its {sms} SMs stay idle the whole kernel"
    else:
        effect = (
            f"{ctas} CTAs make {ctas // sms} full waves and {ctas % sms} CTAs more, which "
            "share SMs with the others and finish last"
        )
    where: SourceLocation | None = call_line(inputs.kernel)
    return [
        make_hint(
            inputs,
            "mosaic-persistent-grid",
            "warning",
            f"The kernel loops over {loop.items} work items with {ctas} CTAs (a persistent "
            f"schedule), but {gpu.name} has {sms} SMs: {effect}. Size the grid from the "
            "device (jax.devices()[0].core_count, as JAX's own persistent kernels do) rather "
            "than a constant.",
            where,
            [("CTAs", ctas), ("SMs", sms), ("work items", loop.items)],
        )
    ]
