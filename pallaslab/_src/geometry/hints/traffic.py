"""Hint rules on lanes and traffic: masked lanes mostly off, operands moved many times over."""

from __future__ import annotations

from pallaslab._src.base import words
from pallaslab._src.geometry.hints.inputs import Finding, HintInputs, grouped, make_hint
from pallaslab._src.records.hints import Hint

# Masked accesses switching on less than this share of their lanes.
MASK_ON_BELOW = 0.5
# An operand moved this many times its size, costing at least this much extra.
REVISIT_INFO, REVISIT_WARNING = 4.0, 16.0
REVISIT_MIN_EXTRA_BYTES = 1 << 20


def masked_lanes(inputs: HintInputs) -> list[Hint]:
    """Masked loads and stores that switch off most of their lanes."""
    found = []
    for use in inputs.masks:
        if use.fraction >= MASK_ON_BELOW:
            continue
        what = {"read": "load", "write": "store"}.get(use.kind, "update")
        found.append(
            make_hint(
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
    findings = []
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
            f"its block is the same for every program along grid axis "
            f"{', '.join(map(str, axes))}, and each of them copies it again"
            if axes
            else "its blocks overlap, and each program copies its own"
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
        findings.append(
            Finding(
                operand.label,
                "warning" if ratio >= REVISIT_WARNING else "info",
                f"{operand.label} crosses between HBM and the kernel {ratio:.3g} times over "
                f"({words.nbytes(entry.hbm_bytes)} moved for a "
                f"{words.nbytes(entry.min_bytes)} array): {along}.",
                advice,
                operand.blockspec_location,
                [
                    ("bytes moved", entry.hbm_bytes),
                    ("array bytes", entry.min_bytes),
                    ("times over", round(ratio, 3)),
                    ("repeating grid axes", ", ".join(map(str, axes)) or "-"),
                ],
            )
        )
    return grouped(inputs, "hbm-revisits", findings)
