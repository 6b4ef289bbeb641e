"""Static cost per source line: what a kernel's compiled code spends on each line.

Built by `pallaslab._src.core.cost` from a `tpu-compile:<chip>` lowering (libtpu's final
VLIW bundles) or a SASS one (`sass:sm_XX`, `xla-gpu:<chip>`: instructions and the
control codes the assembler wrote); read by `inspection.cost(target)`, the IR tab's
gutter and diffs. Only Python values here.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclasses.dataclass(frozen=True)
class LineCost:
    """What one source line costs in the compiled code.

    Attributes:
        file: The source file.
        line: The source line (1-based).
        instructions: TPU: ops issued (slots filled); GPU: SASS instructions.
        bundles: TPU: bundles holding at least one of its ops (0 for GPU).
        units: Per unit or class, ops or instructions: TPU units (MXU, VPU, XLU, EUP,
            vld, vst, scalar, sync, DMA); GPU classes (tensor, fp, int, sfu, global,
            shared, async, const, control, other). Zero counts left out.
        loop_instructions: Of `instructions`, those in the loop body (TPU: the grid
            step's loop; GPU: any loop, a branch back to an earlier address).
        stall_cycles: GPU: the stall cycles its control codes encode (0 for TPU).
        yields: GPU: instructions that let the scheduler switch warps.
        barriers: GPU: scoreboards its instructions set (read and write barriers).
        waits: GPU: instructions that wait on a scoreboard.
    """

    file: str
    line: int
    instructions: int
    bundles: int = 0
    units: tuple[tuple[str, int], ...] = ()
    loop_instructions: int = 0
    stall_cycles: int = 0
    yields: int = 0
    barriers: int = 0
    waits: int = 0

    def unit(self, name: str) -> int:
        """Ops or instructions of one unit or class."""
        return dict(self.units).get(name, 0)

    def gutter(self, kind: str) -> str:
        """The compact text the IR tab shows beside the line."""
        top = sorted(self.units, key=lambda pair: -pair[1])[:2]
        units = " ".join(f"{name} {count}" for name, count in top)
        if kind == "tpu":
            return f"{self.bundles}b {units}".strip()
        stalls = f" {self.stall_cycles}c" if self.stall_cycles else ""
        waits = f" w{self.waits}" if self.waits else ""
        return f"{self.instructions}i{stalls}{waits}"


@dataclasses.dataclass(frozen=True)
class CostTable:
    """A kernel's static cost on one target, line by line.

    Attributes:
        target: The lowering it was read from ("tpu-compile:v5e", "xla-gpu:H100").
        kernel: The kernel's name.
        kind: "tpu" (VLIW bundles) or "gpu" (SASS).
        units: The unit or class names, in order (the columns of `to_frame`).
        lines: Per source line, in file and line order.
        total_instructions: All ops (TPU) or instructions (GPU), lines or not.
        unattributed: Of them, those no source line claims (the pipeline's DMAs and
            bookkeeping, the prologue).
        total_bundles: TPU: bundles of the whole kernel.
        loop_bundles: TPU: bundles of one pass of the kernel body (the grid's loop,
            nested loops counted once).
        loop_slots: TPU: per unit, (ops in the loop body, slots the unit offers in
            those bundles): its utilization is their ratio.
        cycles_estimate: Static cycles for one pass of the kernel body. TPU: its bundle
            count (one bundle issues per cycle). GPU: the stall cycles the control
            codes encode, per warp, over the instructions of one pass (loops once).
        estimate_note: How `cycles_estimate` is made and what it leaves out.
    """

    target: str
    kernel: str
    kind: str
    units: tuple[str, ...]
    lines: tuple[LineCost, ...]
    total_instructions: int = 0
    unattributed: int = 0
    total_bundles: int = 0
    loop_bundles: int = 0
    loop_slots: tuple[tuple[str, int, int], ...] = ()
    cycles_estimate: int = 0
    estimate_note: str = ""

    def line(self, file: str, line: int) -> LineCost | None:
        """The cost of one source line (None: no code comes from it)."""
        for cost in self.lines:
            if cost.file == file and cost.line == line:
                return cost
        return None

    def utilization(self) -> dict[str, float]:
        """Per unit, the share of its slots the loop body fills (TPU)."""
        return {unit: used / offered for unit, used, offered in self.loop_slots if offered}

    def to_frame(self) -> pd.DataFrame:
        """One row per source line.

        Columns: file, line, instructions, bundles, one per unit or class,
        loop_instructions, stall_cycles, yields, barriers, waits.
        """
        import pandas as pd  # noqa: PLC0415 - imported on use: `import pallaslab` stays light

        columns = [
            "file",
            "line",
            "instructions",
            "bundles",
            *self.units,
            "loop_instructions",
            "stall_cycles",
            "yields",
            "barriers",
            "waits",
        ]
        rows = []
        for cost in self.lines:
            row: dict[str, object] = {
                "file": cost.file,
                "line": cost.line,
                "instructions": cost.instructions,
                "bundles": cost.bundles,
                "loop_instructions": cost.loop_instructions,
                "stall_cycles": cost.stall_cycles,
                "yields": cost.yields,
                "barriers": cost.barriers,
                "waits": cost.waits,
            }
            row.update({unit: cost.unit(unit) for unit in self.units})
            rows.append(row)
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs["target"] = self.target
        frame.attrs["cycles_estimate"] = self.cycles_estimate
        return frame

    def __str__(self) -> str:
        head = f"static cost of {self.kernel} on {self.target}: "
        if self.kind == "tpu":
            head += (
                f"{self.total_bundles} bundles, {self.loop_bundles} per pass of the body "
                f"(~{self.cycles_estimate} cycles)"
            )
        else:
            head += (
                f"{self.total_instructions} instructions, ~{self.cycles_estimate} stall "
                "cycles per warp per pass"
            )
        rows = [
            f"  {c.file.rsplit('/', 1)[-1]}:{c.line}: {c.gutter(self.kind)}" for c in self.lines
        ]
        return "\n".join([head, *rows])
