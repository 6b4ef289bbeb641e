"""Memory that fits, per chip: what a kernel's compile allocates, against the chip's limits.

Built by `pallaslab._src.core.fit` from the `tpu-compile:<chip>` and `xla-gpu:<chip>`
lowerings (read from the compiler) and the kernel's BlockSpecs (estimated); read by
`inspection.fit()`, the Kernels tab, hints and diffs. Only Python values here.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from pallaslab._src.base import words

if TYPE_CHECKING:
    import pandas as pd

    from pallaslab._src.records.kernels import Kernel

# What a row says of the kernel on its chip.
Verdict = Literal["fits", "fits-with-limit", "does-not-fit", "unknown"]
VERDICT_WORDS: dict[str, str] = {
    "fits": "fits",
    "fits-with-limit": "fits only with vmem_limit_bytes",
    "does-not-fit": "does not fit",
    "unknown": "unknown",
}
# Where a figure comes from.
Origin = Literal["read", "estimated", "read, rounded", ""]

FRAME_COLUMNS = (
    "chip",
    "target",
    "memory",
    "needed_bytes",
    "needed_from",
    "limit_bytes",
    "limit_from",
    "capacity_bytes",
    "verdict",
    "vmem_limit_bytes",
    "estimated_bytes",
    "smem_bytes",
    "semaphores",
    "registers_per_thread",
    "message",
)


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One allocation of a libtpu compile, from its LLO allocation table.

    Attributes:
        name: The compiler's name ("allocation3", "allocation12_spill").
        space: "vmem", "smem" or "sflag" (DMA and sync flags, semaphores).
        bytes: Its size, all buffers.
        scoped: Whether it lives for the kernel (counted against the scoped limit).
        fixed: Whether it sits at a fixed address (the compiler's constants).
        role: "in" / "out" (a BlockSpec's window), "scratch", "internal" (Mosaic's
            internal scratch), "spill", "semaphore" or "other".
        operand: The input's or output's index, for windows.
        shape: The window's block (for windows) or the allocation's shape.
        buffers: Buffering levels (2: double-buffered), for windows.
        tag: The compiler's words.
    """

    name: str
    space: str
    bytes: int
    scoped: bool = True
    fixed: bool = False
    role: str = "other"
    operand: int | None = None
    shape: str = ""
    buffers: int = 1
    tag: str = ""

    @property
    def counted(self) -> bool:
        """Whether it counts against `vmem_limit_bytes`.

        Every scoped VMEM allocation but Mosaic's internal scratch: a kernel whose
        windows total exactly its `vmem_limit_bytes` compiles (checked with libtpu).
        """
        return self.space == "vmem" and self.scoped and not self.fixed and self.role != "internal"


def own_vmem_limit(kernel: Kernel) -> int | None:
    """The kernel's own `vmem_limit_bytes`, if its compiler params set one."""
    value = dict(kernel.compiler_params).get("vmem_limit_bytes")
    try:
        return int(str(value)) if value not in (None, "None", "") else None
    except ValueError:
        return None


def scoped_vmem(allocations: tuple[Allocation, ...]) -> int:
    """VMEM that counts against the scoped limit: the least `vmem_limit_bytes` that compiles."""
    return sum(a.bytes for a in allocations if a.counted)


def space_bytes(allocations: tuple[Allocation, ...], space: str) -> int:
    """Bytes of one memory space's allocations (fixed constants left out)."""
    return sum(a.bytes for a in allocations if a.space == space and not a.fixed)


@dataclasses.dataclass(frozen=True)
class FitPart:
    """One allocation that makes up a kernel's figure.

    Attributes:
        name: What it holds ("x_ref (input 0)", "scratch operand", "internal scratch").
        role: "in", "out", "scratch", "internal", "spill", "semaphore" or "smem".
        bytes: Bytes of all its buffers.
        buffers: Copies held at once (2: double-buffered by the pipeline), 0 if unknown.
        origin: "read" (the compiler's allocation table) or "estimated" (BlockSpecs).
        counted: Whether it counts against the scoped limit.
        detail: The block and dtype, or the compiler's tag, in words.
    """

    name: str
    role: str
    bytes: int
    buffers: int = 0
    origin: Origin = "read"
    counted: bool = True
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class MemoryFit:
    """One kernel's memory on one chip, and whether it fits.

    Attributes:
        chip: "v5e", "H100" ...
        target: The compile it was read from ("tpu-compile:v5e", "xla-gpu:H100").
        kind: "tpu" or "gpu".
        memory: "VMEM" (scoped) or "shared memory" (per block).
        needed: Bytes the kernel needs against `limit` (TPU: the scoped VMEM the compile
            allocates, the least `vmem_limit_bytes` that compiles; GPU: shared memory
            per block), None when unknown.
        needed_from: "read" (the compiler's allocation table or report), "read,
            rounded" (the compiler's out-of-memory message, in units of 0.01 MiB) or
            "estimated" (blocks x buffers + scratch).
        limit: The limit that applies (TPU: the kernel's `vmem_limit_bytes`, else the
            chip's default scoped VMEM; GPU: shared memory one block may opt in to).
        limit_from: Where `limit` comes from, in words.
        capacity: The chip's physical memory of that kind (VMEM per TensorCore; shared
            memory per SM).
        verdict: "fits", "fits-with-limit" (only with `vmem_limit_bytes` >= the
            suggested value), "does-not-fit" (not on this chip) or "unknown".
        suggested_limit: The `vmem_limit_bytes` to pass (`fits-with-limit`).
        estimated: The figure from the BlockSpecs (blocks x buffers + scratch, in
            (8, 128) tiles), for comparison with the compiler's.
        total_vmem: All VMEM allocations, the compiler's internal scratch included.
        smem_bytes: SMEM the compile allocates (scalar prefetch, scratch, spills).
        semaphores: Sync flags and semaphores (DMA completion flags included).
        registers_per_thread: GPU registers per thread (ptxas).
        threads_per_block: GPU threads per block.
        parts: What makes up the figure.
        message: One sentence: the verdict and why.
        error: The compiler's message, when the compile failed.
    """

    chip: str
    target: str
    kind: str
    memory: str
    needed: int | None
    needed_from: Origin
    limit: int
    limit_from: str
    capacity: int
    verdict: Verdict
    suggested_limit: int | None = None
    estimated: int | None = None
    total_vmem: int | None = None
    smem_bytes: int | None = None
    semaphores: int | None = None
    registers_per_thread: int | None = None
    threads_per_block: int | None = None
    parts: tuple[FitPart, ...] = ()
    message: str = ""
    error: str = ""

    @property
    def verdict_text(self) -> str:
        """The verdict in words, with the value to pass."""
        if self.verdict == "fits-with-limit" and self.suggested_limit:
            return f"fits only with vmem_limit_bytes >= {self.suggested_limit:,}"
        return VERDICT_WORDS[self.verdict]

    def row(self) -> dict[str, object]:
        """The row `FitTable.to_frame` makes of it."""
        return {
            "chip": self.chip,
            "target": self.target,
            "memory": self.memory,
            "needed_bytes": self.needed,
            "needed_from": self.needed_from,
            "limit_bytes": self.limit,
            "limit_from": self.limit_from,
            "capacity_bytes": self.capacity,
            "verdict": self.verdict,
            "vmem_limit_bytes": self.suggested_limit,
            "estimated_bytes": self.estimated,
            "smem_bytes": self.smem_bytes,
            "semaphores": self.semaphores,
            "registers_per_thread": self.registers_per_thread,
            "message": self.message,
        }

    def __str__(self) -> str:
        needed = words.nbytes(self.needed) if self.needed is not None else "?"
        return (
            f"{self.chip:5s} {self.memory}: {needed} of {words.nbytes(self.limit)} "
            f"({self.limit_from}): {self.verdict_text}"
        )


@dataclasses.dataclass(frozen=True)
class FitTable:
    """One kernel's fit on every chip asked for.

    Attributes:
        kernel: The kernel's name.
        kernel_index: Its index in the inspection.
        rows: One `MemoryFit` per chip, in the order asked for.
    """

    kernel: str
    kernel_index: int
    rows: tuple[MemoryFit, ...]

    def chip(self, name: str) -> MemoryFit:
        """The row of one chip.

        Raises:
            KeyError: Naming the chips of the table.
        """
        for row in self.rows:
            if row.chip.lower() == name.lower():
                return row
        raise KeyError(f"no chip {name!r} in the fit table; chips: {', '.join(self.chips)}")

    @property
    def chips(self) -> tuple[str, ...]:
        """The chips, in order."""
        return tuple(row.chip for row in self.rows)

    def to_frame(self) -> pd.DataFrame:
        """One row per chip (see `FRAME_COLUMNS`)."""
        import pandas as pd  # noqa: PLC0415 - imported on use: `import pallaslab` stays light

        return pd.DataFrame([row.row() for row in self.rows], columns=list(FRAME_COLUMNS))

    def __str__(self) -> str:
        return "\n".join([f"memory of {self.kernel} per chip:", *(f"  {r}" for r in self.rows)])
