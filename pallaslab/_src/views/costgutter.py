"""The IR tab's cost gutter: each source line's static cost, beside it.

For machine code (libtpu's bundles, SASS) the IR tab shows, beside each source line,
what the compiled code spends on it (`core/cost.py`): bundles and the busiest units
of a TPU kernel, instructions, stall cycles and scoreboard waits of a GPU one.
"""

from __future__ import annotations

from pallaslab._src.records.cost import CostTable, LineCost
from pallaslab._src.records.lowered import Lowered
from pallaslab._src.views.contracts import IrLineCost


def table_of(lowered: Lowered) -> CostTable | None:
    """The lowering's cost table (None: not machine code, or it failed)."""
    if lowered.error is not None or lowered.language not in ("llo", "sass"):
        return None
    from pallaslab._src.core import cost  # noqa: PLC0415 - core is below

    try:
        return cost.of_lowered(lowered)  # read once per lowering
    except Exception:  # a gutter is a help: never lose the tab over it
        return None


def _title(cost: LineCost, kind: str) -> str:
    units = ", ".join(f"{name} {count}" for name, count in cost.units)
    if kind == "tpu":
        return (
            f"{cost.instructions} ops in {cost.bundles} bundles ({cost.loop_instructions} in "
            f"the kernel body's loop): {units}"
        )
    return (
        f"{cost.instructions} SASS instructions ({units}); {cost.stall_cycles} stall cycles, "
        f"{cost.yields} yields, {cost.barriers} scoreboards set, {cost.waits} waits"
    )


def note(table: CostTable) -> str:
    """The kernel body's totals in one line."""
    if table.kind == "tpu":
        shares = ", ".join(
            f"{unit} {share:.0%}" for unit, share in table.utilization().items() if share
        )
        return (
            f"Static cost: {table.loop_bundles} bundles per pass of the body (about "
            f"{table.cycles_estimate} cycles: one bundle a cycle, no stalls); slots filled "
            f"there: {shares or 'none'}. Gutter: bundles, then the busiest units."
        )
    return (
        f"Static cost: {table.total_instructions} instructions, {table.cycles_estimate} stall "
        "cycles per warp for one pass (the control codes'; waits on memory not counted). "
        "Gutter: instructions (i), stall cycles (c), scoreboard waits (w)."
    )


def gutter(lowered: Lowered, files: list[str]) -> tuple[list[IrLineCost], str]:
    """The gutter entries (file index, line, text, title) and the totals line."""
    table = table_of(lowered)
    if table is None:
        return [], ""
    index = {file: k for k, file in enumerate(files)}
    entries: list[IrLineCost] = [
        {
            "file": index[cost.file],
            "line": cost.line,
            "text": cost.gutter(table.kind),
            "title": _title(cost, table.kind),
        }
        for cost in table.lines
        if cost.file in index
    ]
    return entries, note(table)
