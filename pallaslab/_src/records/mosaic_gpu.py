"""Plain records of what a Mosaic GPU kernel does: its SMEM, copies, matrix products, pipelines.

The core reads them off the kernel's traced body (`core/jax_adapter/mosaic_gpu/`),
following its loops for every CTA of the grid; the geometry turns them into SMEM
budgets per chip, traffic, tile maps of the copies and hints
(`geometry/mosaic_gpu.py`, `geometry/hints/mosaic_gpu.py`). Python and NumPy values
only (no JAX).

Terms:
    CTA: one thread block of the grid (a point of `grid` x `cluster`); a Mosaic GPU
        kernel's program.
    thread: one warpgroup of a CTA (`num_threads` of them, `thread_name` axis); each
        runs the body, and may take its own branch (warp specialization).
    window: the part of a GMEM array one copy (or a load or store) moves.
    step: the k-th copy of an operand by one CTA, in the order the CTA issues them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

from pallaslab._src.records.kernels import SourceLocation

AllocationKind = Literal["buffer", "barrier", "tmem", "registers"]
CopyKind = Literal["tma-load", "tma-store", "load", "store"]
MmaKind = Literal["wgmma", "tcgen05", "dot"]


@dataclasses.dataclass(frozen=True)
class GpuTransform:
    """One `plgpu` transform of an SMEM buffer, as the kernel wrote it.

    Attributes:
        kind: "tiling" (`plgpu.TilingTransform`), "swizzle" (`plgpu.SwizzleTransform`),
            "transpose" (`plgpu.TransposeTransform`) or the transform's class name.
        values: The tiling, `(swizzle bytes,)`, or the permutation.
        text: As written, e.g. "TilingTransform((8, 64))".
    """

    kind: str
    values: tuple[int, ...]
    text: str


@dataclasses.dataclass(frozen=True)
class SmemAllocation:
    """One buffer a kernel allocates on chip (`scratch_shapes`, `pl.run_scoped`, a pipeline's).

    Attributes:
        label: A name: the kernel parameter's, else what made it ("pipeline buffer of
            a_gmem", "scratch[1]").
        kind: "buffer" (SMEM), "barrier" (mbarriers, in SMEM), "tmem" (Blackwell's
            tensor memory) or "registers" (a `plgpu.ACC` accumulator).
        shape: The shape the kernel sees (before its transforms: tiling and swizzle).
        stored_shape: The shape it takes in memory (after them; what is allocated).
        dtype: The element type ("barrier" for barriers).
        transforms: Its transforms, outermost first.
        nbytes: Bytes it takes in SMEM before alignment (barriers: 8 each; TMEM and
            registers: 0).
        count: Barriers: how many (`num_barriers`); else 1.
        arrivals: Barriers: arrivals each expects.
        orders_tensor_core: Barriers: `orders_tensor_core`.
        pipeline: The index of the pipeline (in `MosaicGpuPlan.pipelines`) whose
            buffer this is, or None.
        location: The line that allocates it.
    """

    label: str
    kind: AllocationKind
    shape: tuple[int, ...]
    stored_shape: tuple[int, ...]
    dtype: str
    transforms: tuple[GpuTransform, ...] = ()
    nbytes: int = 0
    count: int = 1
    arrivals: int = 0
    orders_tensor_core: bool = False
    pipeline: int | None = None
    location: SourceLocation | None = None

    @property
    def swizzle(self) -> int | None:
        """Its swizzle in bytes, if it has one."""
        return next((t.values[0] for t in self.transforms if t.kind == "swizzle"), None)

    @property
    def tiling(self) -> tuple[int, ...] | None:
        """Its tiling, if it has one."""
        return next((t.values for t in self.transforms if t.kind == "tiling"), None)


@dataclasses.dataclass(frozen=True)
class SmemScope:
    """Allocations made together, and the scopes that run inside them.

    Mosaic GPU gives a scope's allocations their own memory for as long as it runs
    (each aligned to `SMEM_ALIGNMENT`) and lets scopes that run one after another
    (or in different branches) share theirs: the kernel needs the scope's own bytes
    plus the most any one inner scope needs.

    Attributes:
        allocations: What this scope allocates.
        inner: Scopes inside it (run one at a time).
        location: The line that opens it (`pl.run_scoped`, the kernel's scratch).
    """

    allocations: tuple[SmemAllocation, ...] = ()
    inner: tuple[SmemScope, ...] = ()
    location: SourceLocation | None = None

    def walk(self) -> list[SmemAllocation]:
        """Every allocation of this scope and the scopes inside it, outermost first."""
        found = list(self.allocations)
        for scope in self.inner:
            found += scope.walk()
        return found


@dataclasses.dataclass(frozen=True)
class CopySite:
    """One line of the kernel that moves data between GMEM and the chip, and how often.

    Attributes:
        kind: "tma-load" (`copy_gmem_to_smem`, a pipeline's fetch), "tma-store"
            (`copy_smem_to_gmem`), "load" / "store" (a GMEM ref read into or written
            from registers: `x = ref[...]`, `ref[...] = x`).
        operand: The kernel operand (index in `Kernel.operands`) on the GMEM side.
        smem: The label of the SMEM buffer on the other side ("" for registers).
        window: The shape one copy moves (in the operand's dimensions; 1 where
            an index picks one element).
        dtype: The element type.
        bytes_each: Bytes one copy moves.
        copies: How many times it runs, over every CTA and thread of the grid.
        exact: False when a condition or loop bound was only known at run time
            (then `copies` counts it as run every time it could be).
        multicast: CTAs of a cluster that receive one copy (`collective_axes`): GMEM is
            read once for all of them.
        pipeline: The pipeline (index in `MosaicGpuPlan.pipelines`) it belongs to.
        location: Its line.
    """

    kind: CopyKind
    operand: int
    smem: str
    window: tuple[int, ...]
    dtype: str
    bytes_each: int
    copies: int
    exact: bool = True
    multicast: int = 1
    pipeline: int | None = None
    location: SourceLocation | None = None

    @property
    def gmem_bytes(self) -> int:
        """Bytes this line moves to or from GMEM over the whole grid."""
        return self.bytes_each * self.copies // max(1, self.multicast)


@dataclasses.dataclass(frozen=True)
class MmaSite:
    """One matrix product of the kernel (`plgpu.wgmma`, `plgpu.tcgen05_mma`, a dot).

    Attributes:
        kind: "wgmma", "tcgen05" or "dot" (a `jnp.dot` on values in registers).
        m: Rows of the product one instruction group computes (one thread's).
        n: Its columns.
        k: The contracted length.
        lhs_dtype: The left operand's element type.
        rhs_dtype: The right operand's element type.
        acc_dtype: The accumulator's.
        lhs_memory: Where the left operand is: "smem", "registers" or "tmem".
        lhs_transforms: The left operand's SMEM transforms (tiling, swizzle,
            transposes), outermost first; () in registers.
        rhs_transforms: The right operand's.
        collective: The cluster axis of a collective (2-CTA) `tcgen05_mma`, "" if none.
        count: How many times it runs, over every CTA and thread.
        exact: False when a condition or loop bound was only known at run time.
        location: Its line.
    """

    kind: MmaKind
    m: int
    n: int
    k: int
    lhs_dtype: str
    rhs_dtype: str
    acc_dtype: str
    lhs_memory: str = "smem"
    lhs_transforms: tuple[GpuTransform, ...] = ()
    rhs_transforms: tuple[GpuTransform, ...] = ()
    collective: str = ""
    count: int = 0
    exact: bool = True
    location: SourceLocation | None = None

    @property
    def flops(self) -> int:
        """Floating-point operations over the whole grid: 2 * m * n * k per run."""
        return 2 * self.m * self.n * self.k * self.count


@dataclasses.dataclass(frozen=True)
class GpuPipeline:
    """One pipeline of the kernel (`plgpu.emit_pipeline`, its warp-specialized form).

    Attributes:
        kind: "emit_pipeline", "emit_pipeline_warp_specialized", or "pallas_call"
            (the pipeline a Mosaic GPU `pallas_call` runs over its sequential axes).
        slots: Buffers per operand (`max_concurrent_steps`, at most the steps).
        steps: Steps of one run (its grid's size).
        runs: How many times each CTA runs it (more than 1 inside a loop).
        buffers: The labels of its SMEM buffers (one per operand in SMEM).
        operands: The kernel operand each buffer is copied from or to (-1: unknown).
        location: Where it is called.
    """

    kind: str
    slots: int
    steps: int
    runs: float
    buffers: tuple[str, ...]
    operands: tuple[int, ...]
    location: SourceLocation | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class CopyWindows:
    """Where each copy of one operand lands, per CTA, in the order the CTA issues them.

    Attributes:
        operand: The kernel operand.
        direction: "read" (into the chip) or "write" (back to GMEM).
        sizes: Per operand dimension, the window's length (the largest, when lines
            differ; a line's own is in its `CopySite`).
        starts: Per operand dimension, an int array (CTAs, steps) of first elements.
        lengths: Per operand dimension, an int array (CTAs, steps) of lengths (0 where
            the CTA made no such copy).
        unknown: Copies whose place depends on data (not drawn), over the grid.
    """

    operand: int
    direction: Literal["read", "write"]
    sizes: tuple[int, ...]
    starts: tuple[np.ndarray, ...]
    lengths: tuple[np.ndarray, ...]
    unknown: int = 0

    @property
    def steps(self) -> int:
        """The most copies one CTA makes."""
        return int(self.starts[0].shape[1]) if self.starts else 0


@dataclasses.dataclass(frozen=True)
class PersistentLoop:
    """A loop of each CTA over work items, strided by the grid (`plgpu.nd_loop`).

    Attributes:
        items: Work items (tiles) over all CTAs.
        least: The fewest one CTA takes.
        most: The most one CTA takes.
        axis: The grid axis it strides over.
        location: Its line.
    """

    items: int
    least: int
    most: int
    axis: str
    location: SourceLocation | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class MosaicGpuPlan:
    """What one Mosaic GPU kernel does, read off its traced body.

    Attributes:
        kernel: The kernel's name.
        grid: CTAs along each axis: the grid, then the cluster.
        axis_names: Their names.
        threads: Warpgroups per CTA (`num_threads`, 1 if not given).
        smem: The SMEM (and TMEM, register) allocations as nested scopes.
        copies: Every line moving data between GMEM and the chip.
        mmas: Every matrix product.
        pipelines: Its pipelines.
        windows: Per operand and direction, where its copies land.
        flops: Floating-point operations over the grid (matrix products and
            elementwise arithmetic on floats).
        transcendentals: exp, log, ... evaluations over the grid.
        exact: False when some count depends on run-time values (see notices).
        persistent: The loop over work items, when the kernel is persistent.
        reduction_scratch_bytes: SMEM Mosaic GPU sets aside for cross-warp reductions
            when the body reduces (`CompilerParams.reduction_scratch_bytes`).
        notices: What could not be read, one sentence each.
    """

    kernel: str
    grid: tuple[int, ...]
    axis_names: tuple[str, ...]
    threads: int
    smem: SmemScope
    copies: tuple[CopySite, ...] = ()
    mmas: tuple[MmaSite, ...] = ()
    pipelines: tuple[GpuPipeline, ...] = ()
    windows: tuple[CopyWindows, ...] = ()
    flops: int = 0
    transcendentals: int = 0
    exact: bool = True
    persistent: PersistentLoop | None = None
    reduction_scratch_bytes: int = 0
    notices: tuple[str, ...] = ()

    @property
    def ctas(self) -> int:
        """Thread blocks the kernel launches."""
        return math.prod(self.grid)

    @property
    def mma_flops(self) -> int:
        """The part of `flops` in matrix products."""
        return sum(m.flops for m in self.mmas)

    @property
    def gmem_bytes(self) -> int:
        """Bytes moved between GMEM and the chip over the whole grid."""
        return sum(c.gmem_bytes for c in self.copies)
