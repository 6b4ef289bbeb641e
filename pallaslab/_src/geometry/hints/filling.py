"""Hint rules on filling the chip: grids too small for its cores, tail waves, one stage."""

from __future__ import annotations

import math

from pallaslab._src.base import words
from pallaslab._src.geometry.hints.inputs import (
    HintInputs,
    call_line,
    make_hint,
    occupancy_row,
)
from pallaslab._src.records import hardware
from pallaslab._src.records.hints import Hint

# A single-program TPU grid copying at least this much gets no overlap.
ONE_STAGE_MIN_BYTES = 1 << 20
# The last wave of a GPU grid filled less than this is a tail worth a note.
TAIL_WAVE_EFFICIENCY = 0.75


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
            make_hint(
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
    row = occupancy_row(inputs)
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
        make_hint(
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
        make_hint(
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
        make_hint(
            inputs,
            "one-stage-pipeline",
            "warning",
            f"The grid has a single program, so Pallas copies all {words.nbytes(inputs_bytes)} of "
            "its input blocks into VMEM before the body starts and writes the outputs back "
            f"after it ends: nothing overlaps the {words.nbytes(moved)} of copies (about "
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
