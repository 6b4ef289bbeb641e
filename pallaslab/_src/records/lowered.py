"""Plain records of a kernel lowered for a target: its text, source map and resources.

Built by `pallaslab._src.core.lowering`; read by the IR tab, the CLI and tests. Only
Python values here (no JAX), so views can hold them.
"""

from __future__ import annotations

import dataclasses

from pallaslab._src.records import SourceLocation, SourceMapEntry
from pallaslab._src.records.fit import Allocation


@dataclasses.dataclass(frozen=True)
class LoweringError:
    """Why a target could not take a kernel.

    Attributes:
        message: What went wrong, in one or two sentences.
        location: The source line it points at (an op, a BlockSpec), when known.
        detail: The compiler's own full message.
        kind: "unsupported" (this target cannot take the kernel), "tiling" (a block
            breaks the TPU (8, 128) rule), "compile" (the compiler rejected it),
            "unavailable" (a tool this target needs is not installed), "crashed" (a
            compile worker or tool died, was killed or timed out), "usage".
    """

    message: str
    location: SourceLocation | None = None
    detail: str = ""
    kind: str = "unsupported"

    @property
    def transient(self) -> bool:
        """Whether asking again may succeed: the failure was not the kernel's.

        A tool missing (and installed since) or a compile worker or tool that crashed:
        such failures are never kept, the next request tries again.
        """
        return self.kind in ("unavailable", "crashed")

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return where + self.message


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one kernel on one GPU (CUDA occupancy rules).

    Attributes:
        gpu: The GPU's short name ("H100").
        arch: Its architecture ("sm_90").
        same_arch: Whether the kernel was compiled for this GPU's architecture
            (otherwise register and shared-memory use may differ there).
        blocks_per_sm: Resident thread blocks per SM (0: the kernel cannot launch).
        active_warps: Resident warps per SM.
        max_warps: The SM's warp slots.
        limiter: What bounds it: "registers", "shared memory", "warps", "blocks".
    """

    gpu: str
    arch: str
    same_arch: bool
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: str

    @property
    def fraction(self) -> float:
        """Active warps over warp slots (0..1)."""
        return self.active_warps / self.max_warps if self.max_warps else 0.0


@dataclasses.dataclass(frozen=True)
class GpuResources:
    """What a compiled GPU kernel asks of each SM.

    Attributes:
        arch: The architecture compiled for ("sm_90").
        num_warps: Warps per thread block.
        num_stages: Software pipeline stages (Triton), when known.
        registers_per_thread: 32-bit registers per thread (ptxas).
        spill_store_bytes: Bytes of register spill stores per thread.
        spill_load_bytes: Bytes of register spill loads per thread.
        local_bytes: Local memory per thread (spills and local arrays).
        stack_bytes: Stack frame per thread.
        shared_bytes: Shared memory per block: dynamic (what the launch requests)
            plus static.
        occupancy: Theoretical occupancy on the GPUs in pallaslab's table.
    """

    arch: str
    num_warps: int
    num_stages: int | None
    registers_per_thread: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    local_bytes: int | None
    stack_bytes: int | None
    shared_bytes: int
    occupancy: tuple[Occupancy, ...] = ()

    @property
    def threads_per_block(self) -> int:
        """Threads per block."""
        return self.num_warps * 32


@dataclasses.dataclass(frozen=True)
class BlockVmem:
    """VMEM one operand's blocks take in a TPU kernel.

    Attributes:
        operand: The operand's label.
        role: "in", "out" or "scratch".
        block_shape: The block (squeezed dimensions as 1).
        dtype: Its dtype's name.
        buffers: Copies held at once (2 when Pallas double-buffers the pipeline).
        bytes: Bytes of all copies, as the shape says.
        padded_bytes: Bytes of all copies once laid out in (8, 128) tiles.
    """

    operand: str
    role: str
    block_shape: tuple[int, ...]
    dtype: str
    buffers: int
    bytes: int
    padded_bytes: int


@dataclasses.dataclass(frozen=True)
class TilingProblem:
    """A block that breaks the TPU tiling rule, found before compiling.

    Attributes:
        operand: The operand's label.
        message: Which dimension breaks the rule, and how.
        hint: How to fix it.
        location: The BlockSpec's line.
    """

    operand: str
    message: str
    hint: str
    location: SourceLocation | None = None


@dataclasses.dataclass(frozen=True)
class TpuResources:
    """What a TPU kernel takes: VMEM, and after a libtpu compile, its bundles.

    Attributes:
        chip: The TPU generation ("v5e").
        vmem_blocks: Per operand, the VMEM its blocks take.
        vmem_capacity: VMEM of one TensorCore of the chip.
        tiling_problems: Blocks breaking the (8, 128) rule.
        bundles: VLIW bundles of the whole kernel (after a compile).
        loop_body_bundles: Bundles of the kernel's innermost loop: one grid step.
        code_bytes: Generated code size of the whole compiled program (libtpu's
            memory analysis: the kernel and the runtime programs around it).
        utilization: Per functional unit: (unit, slots per bundle, mean slots used
            per bundle over the whole kernel).
        allocations: The compile's allocation table (VMEM, SMEM, sync flags), from
            libtpu's LLO dumps.
    """

    chip: str
    vmem_blocks: tuple[BlockVmem, ...]
    vmem_capacity: int
    tiling_problems: tuple[TilingProblem, ...] = ()
    bundles: int | None = None
    loop_body_bundles: int | None = None
    code_bytes: int | None = None
    utilization: tuple[tuple[str, int, float], ...] = ()
    allocations: tuple[Allocation, ...] = dataclasses.field(default=(), repr=False)

    @property
    def vmem_bytes(self) -> int:
        """VMEM of all blocks and scratch, in (8, 128) tiles."""
        return sum(b.padded_bytes for b in self.vmem_blocks)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One intermediate text of a lowering (a compiler pass, an earlier IR).

    Attributes:
        name: The stage's name ("post-apply-vector-layout", "ttgir").
        text: Its text, location noise hidden.
        language: Its language, for highlighting.
        source_map: (text line, file, source line) entries.
    """

    name: str
    text: str
    language: str
    source_map: tuple[SourceMapEntry, ...] = ()


@dataclasses.dataclass(frozen=True)
class Lowered:
    """One kernel (or the whole program) lowered for one target.

    Attributes:
        target: The target's name ("ptx:sm_90").
        kernel: The kernel's name ("" for whole-program targets).
        kernel_index: The kernel's index in the inspection (None for the program).
        language: The text's language: "mlir", "ptx", "sass", "llvm", "llo", "hlo".
        header: What produced the text, with versions (one or more lines).
        text: The lowered text, location noise (`#loc` tables, `.loc`, `!dbg` ...)
            hidden. Empty when the lowering failed.
        source_map: (text line, source file, source line) entries, 1-based; a line
            can map to several source lines (a TPU bundle).
        raw_text: The text as the compiler printed it.
        resources: Registers, shared memory and occupancy (GPU), or VMEM, bundles
            and code size (TPU), when the target tells.
        stages: Intermediate texts (the Mosaic pass pipeline, LLO ...).
        error: Why the target could not take the kernel (None when it could).
        notes: Further one-line remarks (what is approximate, what is missing).
        seconds: Time this lowering took (not part of equality).
    """

    target: str
    kernel: str
    kernel_index: int | None
    language: str
    header: str
    text: str
    source_map: tuple[SourceMapEntry, ...] = ()
    raw_text: str = dataclasses.field(default="", repr=False)
    resources: GpuResources | TpuResources | None = None
    stages: tuple[Stage, ...] = dataclasses.field(default=(), repr=False)
    error: LoweringError | None = None
    notes: tuple[str, ...] = ()
    seconds: float = dataclasses.field(default=0.0, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the target took the kernel."""
        return self.error is None

    @property
    def lines(self) -> list[str]:
        """The text's lines."""
        return self.text.splitlines()

    def lines_of(self, file: str, line: int) -> list[int]:
        """Text lines (1-based) that come from source line `line` of `file`."""
        return sorted({t for t, f, s in self.source_map if f == file and s == line})

    def sources_of(self, text_line: int) -> list[tuple[str, int]]:
        """Source lines a text line comes from."""
        return [(f, s) for t, f, s in self.source_map if t == text_line]

    def stage(self, name: str) -> Stage:
        """The intermediate text named `name` (a substring is enough).

        The main text answers to its language's name too (`stage("sass")` of an
        `xla-gpu` lowering, whose main text is SASS).

        Raises:
            KeyError: Naming the stages, when none matches.
        """
        for stage in self.stages:
            if stage.name == name:
                return stage
        if self.stages and name == self.language:
            return Stage(name, self.text, self.language, self.source_map)
        for stage in self.stages:
            if name in stage.name:
                return stage
        names = ", ".join(s.name for s in self.stages) or "none"
        raise KeyError(f"no stage {name!r}; stages: {names}")

    def __str__(self) -> str:
        return self.text if self.error is None else f"error: {self.error}"
