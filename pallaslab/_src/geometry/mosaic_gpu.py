"""A Mosaic GPU kernel's plan in figures: SMEM budget per chip, copy tile map, merit.

From a `MosaicGpuPlan` (what the kernel does, read off its body by the core) and the
chip table (`hardware.py`), with NumPy:

- `smem_budget`: the shared memory the kernel asks for, computed as Mosaic GPU's
  lowering computes it (every scoped allocation aligned to 1 KiB, scopes that run one
  after another sharing memory, 8 bytes per barrier, 4 for a TMEM address), line by
  line; `SmemBudget.on_chip` puts it against a chip's opt-in limit per block.
- `CopyMap`: a tile map whose "programs" are (CTA, step) pairs and whose blocks are
  the GMEM windows the kernel's copies move: the Tiles tab draws it as it draws
  BlockSpec tile maps.
- `plan_merit`: figures of merit from the copies, the products and the SMEM budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from pallaslab._src.base import words
from pallaslab._src.geometry.merit import KernelMerit, OperandMerit
from pallaslab._src.geometry.operand_tiles import OperandTiles
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, OutOfBounds, hardware
from pallaslab._src.records.mosaic_gpu import MosaicGpuPlan, SmemAllocation, SmemScope

#: Mosaic GPU aligns every scoped SMEM allocation to this many bytes (its lowering's
#: `SMEM_ALIGNMENT`, used by its resource estimate).
SMEM_ALIGNMENT = 1024
#: Bytes of SMEM a kernel using TMEM keeps for the TMEM address.
TMEM_ADDRESS_BYTES = 4
#: The chips Mosaic GPU kernels are compared with (the Tiles tab, the hints).
PLAN_CHIPS = ("A100", "H100", "H200", "B200")


def aligned(nbytes: int, alignment: int = SMEM_ALIGNMENT) -> int:
    """`nbytes` rounded up to a multiple of `alignment`."""
    return -(-nbytes // alignment) * alignment if nbytes else 0


@dataclasses.dataclass(frozen=True)
class SmemLine:
    """One allocation in the SMEM budget.

    Attributes:
        allocation: The allocation.
        depth: How many scopes enclose it (0: the kernel's outermost).
        bytes: The SMEM it takes as Mosaic GPU lays it out (buffers aligned to 1 KiB;
            barriers 8 bytes each; TMEM and registers none).
        at_peak: Whether it is live when the kernel needs the most SMEM.
    """

    allocation: SmemAllocation
    depth: int
    bytes: int
    at_peak: bool


@dataclasses.dataclass(frozen=True)
class SmemFit:
    """An SMEM budget against one chip.

    Attributes:
        chip: The chip's name.
        limit: Shared memory one block may opt in to, bytes.
        fits: Whether the kernel's SMEM fits.
        share: The kernel's SMEM over the limit (1.0: all of it).
        blocks_per_sm: CTAs one SM can hold by SMEM alone.
        note: What else keeps the kernel off the chip ("" if nothing).
    """

    chip: str
    limit: int
    fits: bool
    share: float
    blocks_per_sm: int
    note: str = ""


@dataclasses.dataclass(frozen=True)
class SmemBudget:
    """The shared memory a Mosaic GPU kernel needs, as its lowering computes it.

    Attributes:
        lines: Every allocation, scopes depth first.
        buffer_bytes: SMEM for buffers at the peak (aligned), the reduction
            scratch included.
        barrier_bytes: SMEM for barriers at the peak (8 bytes each).
        barriers: Barriers at the peak.
        tmem_bytes: SMEM for the TMEM address (4 bytes when TMEM is used).
        reduction_bytes: Scratch set aside for cross-warp reductions (in
            `buffer_bytes`).
        total: What the kernel asks for: buffers, barriers and the TMEM address.
    """

    lines: tuple[SmemLine, ...]
    buffer_bytes: int
    barrier_bytes: int
    barriers: int
    tmem_bytes: int
    reduction_bytes: int
    total: int

    def on_chip(self, chip: hardware.Gpu | str, plan: MosaicGpuPlan | None = None) -> SmemFit:
        """The budget against a GPU's shared memory per block ("H100", ...).

        With the kernel's `plan`, the note says what its instructions need of the chip.
        """
        gpu = hardware.gpu(chip) if isinstance(chip, str) else chip
        limit = gpu.max_shared_memory_per_block
        per_block = self.total + gpu.reserved_shared_memory_per_block
        return SmemFit(
            chip=gpu.name,
            limit=limit,
            fits=self.total <= limit,
            share=self.total / limit if limit else 0.0,
            blocks_per_sm=gpu.shared_memory_per_sm // per_block if per_block else 0,
            note=chip_note(gpu, plan) if plan is not None else "",
        )

    def describe(self) -> str:
        """One line: total and what it is made of."""
        parts = [f"{words.nbytes(self.buffer_bytes)} of buffers"]
        if self.barriers:
            parts.append(f"{self.barriers} barrier{'s' * (self.barriers != 1)}")
        if self.tmem_bytes:
            parts.append("the TMEM address")
        return f"{words.nbytes(self.total)} ({self.total:,} bytes) of SMEM: {words.and_list(parts)}"


def _own_bytes(scope: SmemScope) -> int:
    return sum(aligned(a.nbytes) for a in scope.allocations if a.kind == "buffer")


def _barrier_key(a: SmemAllocation) -> tuple[object, ...]:
    return (a.dtype, a.count, a.arrivals, a.orders_tensor_core)


def _peak(scope: SmemScope) -> tuple[int, Counter[tuple[object, ...]], list[SmemScope]]:
    """(buffer bytes, barrier arrays by kind, the scopes live) at this scope's peak."""
    own = _own_bytes(scope)
    barriers: Counter[tuple[object, ...]] = Counter(
        _barrier_key(a) for a in scope.allocations if a.kind == "barrier"
    )
    best: tuple[int, Counter[tuple[object, ...]], list[SmemScope]] = (0, Counter(), [])
    union: Counter[tuple[object, ...]] = Counter()
    for inner in scope.inner:
        found = _peak(inner)
        union |= found[1]  # scopes one after another may share barriers (Mosaic's `or_`)
        if found[0] > best[0] or not best[2]:
            best = found
    return own + best[0], barriers + union, [scope, *best[2]]


def smem_budget(plan: MosaicGpuPlan) -> SmemBudget:
    """The SMEM a kernel asks for: buffers, barriers and the TMEM address (see the module)."""
    buffers, barrier_kinds, live = _peak(plan.smem)
    reduction = aligned(plan.reduction_scratch_bytes)
    buffers = max(buffers, reduction)
    barriers = sum(int(key[1]) * count for key, count in barrier_kinds.items())  # type: ignore[call-overload]
    live_ids = {id(a) for s in live for a in s.allocations}
    lines: list[SmemLine] = []

    def walk(scope: SmemScope, depth: int) -> None:
        for a in scope.allocations:
            size = aligned(a.nbytes) if a.kind == "buffer" else a.nbytes
            lines.append(SmemLine(a, depth, size, id(a) in live_ids))
        for inner in scope.inner:
            walk(inner, depth + 1)

    walk(plan.smem, -1)
    uses_tmem = any(a.kind == "tmem" for a in plan.smem.walk())
    tmem = TMEM_ADDRESS_BYTES if uses_tmem else 0
    barrier_bytes = 8 * barriers
    return SmemBudget(
        lines=tuple(lines),
        buffer_bytes=buffers,
        barrier_bytes=barrier_bytes,
        barriers=barriers,
        tmem_bytes=tmem,
        reduction_bytes=reduction,
        total=buffers + barrier_bytes + tmem,
    )


def chip_note(gpu: hardware.Gpu, plan: MosaicGpuPlan) -> str:
    """What a kernel's instructions need of a chip that it lacks ("" when nothing).

    Mosaic GPU targets Hopper (sm_90a) and Blackwell (sm_100a): TMA and `wgmma` are
    Hopper's (Blackwell keeps TMA, drops `wgmma` for `tcgen05`).
    """
    major = gpu.compute_capability[0]
    kinds = {m.kind for m in plan.mmas}
    if major < 9:
        return f"Mosaic GPU kernels need Hopper (sm_90) or newer; {gpu.name} is {gpu.arch}."
    if "wgmma" in kinds and major != 9:
        return f"wgmma is Hopper's (sm_90a); {gpu.name} ({gpu.arch}) multiplies with tcgen05."
    if "tcgen05" in kinds and major != 10:
        return f"tcgen05 is Blackwell's (sm_100a); {gpu.name} ({gpu.arch}) lacks it."
    return ""


def plan_chips() -> list[hardware.Gpu]:
    """The GPUs Mosaic GPU kernels are compared with, from the chip table."""
    return [hardware.GPUS[name] for name in PLAN_CHIPS if name in hardware.GPUS]


# -- the copies as a tile map --------------------------------------------------------


class CopyMap(TileMap):
    """The GMEM windows a Mosaic GPU kernel's copies move, as a tile map.

    Its grid is the CTAs' grid plus one axis of steps: program (..., s) is the
    s-th copy of each operand by that CTA, in the order the CTA issues them (a
    pipeline's steps, a manual loop's iterations). Operands no copy reaches are
    left unmapped, saying why. Counts and traffic work as for BlockSpec tile maps
    under the GPU schedule: every copy moves its window.
    """

    def __init__(self, kernel: Kernel, plan: MosaicGpuPlan) -> None:
        steps = max((w.steps for w in plan.windows), default=0)
        grid = (*plan.grid, max(steps, 1))
        names = (*plan.axis_names, "step")
        self.plan = plan
        self.kernel = dataclasses.replace(kernel, grid=grid, grid_names=names)
        self.grid = grid
        self.prefetch = ()
        self.schedule = "gpu"
        self._coverage = {}
        self.operands = tuple(self._copies(k, o) for k, o in enumerate(kernel.operands))

    def _copies(self, index: int, operand: object) -> OperandTiles:
        from pallaslab._src.records import Operand  # noqa: PLC0415 - typing only

        assert isinstance(operand, Operand)
        if operand.role == "scratch":
            return OperandTiles(operand, "scratch", reason="an on-chip buffer")
        found = [w for w in self.plan.windows if w.operand == index]
        if not found or not operand.shape:
            return OperandTiles(
                operand,
                "unmapped",
                reason="no copy or load reaches it"
                if not any(c.operand == index for c in self.plan.copies)
                else "its copies land where only run-time values say",
            )
        # One sequence per operand: reads, then writes (an operand both read and written).
        starts = [
            np.concatenate([w.starts[d] for w in found], axis=1) for d in range(len(operand.shape))
        ]
        lengths = [
            np.concatenate([w.lengths[d] for w in found], axis=1) for d in range(len(operand.shape))
        ]
        steps = self.grid[-1]
        shape = (*self.grid[:-1], steps)
        padded_starts, padded_lengths = [], []
        for start, length in zip(starts, lengths, strict=True):
            pad = ((0, 0), (0, max(0, steps - start.shape[1])))
            padded_starts.append(np.pad(start, pad)[:, :steps].reshape(shape))
            padded_lengths.append(np.pad(length, pad)[:, :steps].reshape(shape))
        return OperandTiles(operand, "pipelined", tuple(padded_starts), tuple(padded_lengths))

    def notices(self) -> list[str]:
        """What the map leaves out: copies whose windows depend on data."""
        found = []
        for window in self.plan.windows:
            if window.unknown:
                label = self.kernel.operands[window.operand].label
                found.append(
                    f"{label}: {window.unknown:,} copies land where only run-time values say; "
                    "they are counted in the traffic but not drawn."
                )
        return found


def copy_steps(plan: MosaicGpuPlan) -> int:
    """The most copies of one operand one CTA makes (the copy map's last axis)."""
    return max((w.steps for w in plan.windows), default=0)


# -- figures of merit ----------------------------------------------------------------


def plan_merit(copies: CopyMap, budget: SmemBudget) -> KernelMerit:
    """Figures of merit of a Mosaic GPU kernel: its copies' traffic, its work, its SMEM."""
    plan = copies.plan
    kernel = copies.kernel
    operands = []
    for k, entry in enumerate(copies.operands):
        sites = [c for c in plan.copies if c.operand == k]
        if entry.mapped:
            coverage = copies.coverage(k)
            reads = (coverage.min, coverage.max, coverage.mean)
        else:
            reads = (0, 0, 0.0)
        operand = entry.operand
        operands.append(
            OperandMerit(
                index=k,
                label=operand.label,
                role=operand.role,
                access=entry.access,
                reads_min=reads[0],
                reads_max=reads[1],
                reads_mean=float(reads[2]),
                transfers=sum(c.copies for c in sites),
                hbm_bytes=sum(c.gmem_bytes for c in sites),
                min_bytes=operand.nbytes if sites else 0,
                block_bytes=max((c.bytes_each for c in sites), default=0),
                buffers=1,
            )
        )
    dtypes = [m.lhs_dtype for m in plan.mmas] + [m.rhs_dtype for m in plan.mmas]
    compute = max(dtypes, key=_itemsize) if dtypes else _widest_input(kernel)
    return KernelMerit(
        kernel=kernel.name,
        schedule="gpu",
        programs=plan.ctas,
        operands=tuple(operands),
        hbm_bytes=plan.gmem_bytes,
        min_hbm_bytes=sum(o.min_bytes for o in operands),
        working_set_bytes=budget.total,
        smem_bytes=0,
        flops=plan.flops,
        transcendentals=plan.transcendentals,
        flops_source="counted",
        flops_exact=plan.exact,
        compute_dtype=compute,
        matmul=bool(plan.mmas),
        working_set_name="SMEM the kernel asks for (Mosaic GPU's allocation, aligned)",
    )


def _itemsize(dtype: str) -> int:
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        return 4


def _widest_input(kernel: Kernel) -> str:
    floats = [o.dtype for o in kernel.inputs if "float" in o.dtype]
    return max(floats, key=_itemsize) if floats else "float32"


def transforms_text(transforms: Sequence[object]) -> str:
    """Transforms as written, comma separated ("" for none)."""
    return ", ".join(str(getattr(t, "text", t)) for t in transforms)


def window_overruns(kernel: Kernel, plan: MosaicGpuPlan) -> list[OutOfBounds]:
    """Copies whose GMEM window reaches past its operand, in some CTA (one per line).

    JAX clamps a window computed at run time to fit (`pl.ds` on a GMEM ref), so its
    Mosaic GPU interpreter copies other elements than the kernel asked for; a GPU's
    TMA unit instead drops (stores) or zero-fills (loads) the elements outside. The
    results differ, and neither is what the code says.
    """
    found: list[OutOfBounds] = []
    for windows in plan.windows:
        if windows.operand >= len(kernel.operands) or not windows.starts:
            continue
        operand = kernel.operands[windows.operand]
        if len(operand.shape) != len(windows.starts):
            continue
        starts = np.stack([np.asarray(s) for s in windows.starts])  # (dims, CTAs, steps)
        lengths = np.stack([np.asarray(n) for n in windows.lengths])
        limits = np.asarray(operand.shape).reshape(-1, 1, 1)
        made = np.all(lengths > 0, axis=0)
        outside = made & np.any((starts < 0) | (starts + lengths > limits), axis=0)
        if not outside.any():
            continue
        ctas = sorted({int(c) for c in np.nonzero(outside)[0]})
        cta, step = (int(v) for v in np.argwhere(outside)[0])
        kinds = ("tma-load", "load") if windows.direction == "read" else ("tma-store", "store")
        lines = {
            c.location for c in plan.copies if c.operand == windows.operand and c.kind in kinds
        }
        grid = plan.grid if math.prod(plan.grid) == starts.shape[1] else (starts.shape[1],)
        found.append(
            OutOfBounds(
                kernel=kernel.name,
                kernel_index=kernel.index,
                ref=operand.label,
                access="load" if windows.direction == "read" else "store",
                cause="copy-window",
                shape=tuple(int(n) for n in operand.shape),
                span=tuple(
                    (
                        int(starts[d, cta, step]),
                        int(starts[d, cta, step] + lengths[d, cta, step] - 1),
                    )
                    for d in range(starts.shape[0])
                ),
                programs=tuple(tuple(int(i) for i in np.unravel_index(c, grid)) for c in ctas[:8]),
                program_count=len(ctas),
                location=next(iter(lines)) if len(lines) == 1 else None,
            )
        )
    return found
