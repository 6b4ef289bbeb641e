"""Static cost per source line, read out of a kernel's compiled code.

TPU (`tpu-compile:<chip>`): libtpu's final VLIW bundles, op by op (`tpu_bundles`): per
source line the ops it issues on each unit and the bundles they sit in; for the
kernel body (the grid's loop), its bundle count, the slots each unit offers in them
and those filled. One bundle issues per cycle, so one pass of the body takes about
its bundle count in cycles when nothing stalls.

GPU (`sass:sm_XX`, `xla-gpu:<chip>`): the SASS with each instruction's encoding
(nvdisasm `-hex`), its control codes decoded (`sass_control`): per source line the
instructions by class, the stall cycles, yields and scoreboard barriers the
assembler wrote.
"""

from __future__ import annotations

import collections
import weakref
from typing import TYPE_CHECKING

from pallaslab._src.core.lowering import sass_control, sourcemap, tpu_bundles
from pallaslab._src.records.cost import CostTable, LineCost
from pallaslab._src.records.lowered import Lowered
from pallaslab._src.records.targets import parse_target

if TYPE_CHECKING:
    from pallaslab._src.core.program import Traced

TPU_NOTE = (
    "static: one bundle issues per cycle; DMA waits, MXU result latency beyond the "
    "schedule and stalls are not modelled; loops nested in the body counted once"
)
GPU_NOTE = (
    "static: the stall cycles the control codes encode, per warp, over one pass (loops "
    "once); waits on scoreboards (memory, MUFU) and other warps are not modelled"
)


class CostUnavailableError(ValueError):
    """The target's code carries no cost pallaslab can read (or did not compile)."""


def cost(inspection: Traced, target: str, kernel: int | str = 0) -> CostTable:
    """A kernel's static cost per source line on one target (lowered first if needed).

    Raises:
        CostUnavailableError: For a target that is not compiled code (an IR), or when
            the target could not take the kernel (saying why).
    """
    from pallaslab._src.core import lowering  # noqa: PLC0415 - lowering imports JAX

    parsed = parse_target(target)
    if parsed.kind != "tpu-compile" and parsed.language != "sass":
        raise CostUnavailableError(
            f"{parsed.name} is not machine code: static cost is read from 'tpu-compile:<chip>'"
            " (TPU bundles) or from SASS ('sass:sm_90', 'xla-gpu:H100')"
        )
    lowered = lowering.lower(inspection, parsed.name, kernel)
    return of_lowered(lowered)


# A table per lowering, read once (a lowering does not change). Keyed by identity:
# hashing a lowering would hash (and clean) every stage's text.
_TABLES: dict[int, CostTable] = {}


def of_lowered(lowered: Lowered) -> CostTable:
    """The cost table of a lowering already made (TPU bundles or SASS), read once."""
    key = id(lowered)
    found = _TABLES.get(key)
    if found is None:
        found = _TABLES[key] = _read(lowered)
        weakref.finalize(lowered, _TABLES.pop, key, None)
    return found


def _read(lowered: Lowered) -> CostTable:
    if lowered.error is not None:
        raise CostUnavailableError(f"{lowered.target} could not take the kernel: {lowered.error}")
    if lowered.language == "llo":
        return tpu_cost(lowered)
    if lowered.language == "sass":
        return gpu_cost(lowered)
    raise CostUnavailableError(f"{lowered.target} is not machine code ({lowered.language})")


def _shown(pairs: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """Of (file, line) pairs, those a view can show (user files, not JAX's)."""
    entries = tuple((0, file, line) for file, line in pairs)
    return {(file, line) for _, file, line in sourcemap.readable(entries)}


def tpu_cost(lowered: Lowered) -> CostTable:
    """Per source line: ops per unit and bundles, from libtpu's final bundles."""
    default_file = _default_file(lowered)
    bundles = tpu_bundles.parse(lowered.raw_text or lowered.text, default_file)
    shown = _shown([op.source for b in bundles for op in b.ops if op.source])
    depth = tpu_bundles.body_depth(bundles)
    per_line: dict[tuple[str, int], collections.Counter[str]] = collections.defaultdict(
        collections.Counter
    )
    bundles_of: dict[tuple[str, int], set[int]] = collections.defaultdict(set)
    in_loop: collections.Counter[tuple[str, int]] = collections.Counter()
    total = unattributed = 0
    for index, bundle in enumerate(bundles):
        for op in bundle.ops:
            if op.unit is None:
                continue
            total += 1
            if op.source is None or op.source not in shown:
                unattributed += 1
                continue
            per_line[op.source][op.unit] += 1
            bundles_of[op.source].add(index)
            if depth and bundle.depth >= depth:
                in_loop[op.source] += 1
    body = [b for b in bundles if depth and b.depth >= depth] or list(bundles)
    capacity = _capacities(lowered)
    used = tpu_bundles.issued(tuple(body))
    slots = tuple(
        (unit, used[unit], capacity[unit] * len(body))
        for unit in tpu_bundles.UNITS
        if unit in capacity
    )
    lines = tuple(
        LineCost(
            file,
            line,
            instructions=sum(per_line[(file, line)].values()),
            bundles=len(bundles_of[(file, line)]),
            units=tuple((u, n) for u in tpu_bundles.UNITS if (n := per_line[(file, line)][u])),
            loop_instructions=in_loop[(file, line)],
        )
        for file, line in sorted(per_line)
    )
    return CostTable(
        target=lowered.target,
        kernel=lowered.kernel,
        kind="tpu",
        units=tpu_bundles.UNITS,
        lines=lines,
        total_instructions=total,
        unattributed=unattributed,
        total_bundles=len(bundles),
        loop_bundles=len(body),
        loop_slots=slots,
        cycles_estimate=len(body),
        estimate_note=TPU_NOTE,
    )


# libtpu's per-bundle utilization names the issue slots a bundle offers; the units
# pallaslab reports map onto them (the MXU's slots: its MATMUL and MATPUSH columns).
_SLOT_COLUMNS = {
    "MXU": ("MATMUL", "MATPUSH"),
    "VPU": ("VALU",),
    "XLU": ("XLU",),
    "EUP": ("EUP",),
    "vld": ("VLOAD",),
    "vst": ("VSTORE",),
    "scalar": ("SALU",),
}


def _capacities(lowered: Lowered) -> dict[str, int]:
    """Slots per bundle for each unit, from libtpu's per-bundle utilization."""
    try:
        table = lowered.stage("per-bundle utilization").text
    except KeyError:
        return {}
    capacity = tpu_bundles.capacities(table)
    return {
        unit: sum(capacity.get(c, 0) for c in columns)
        for unit, columns in _SLOT_COLUMNS.items()
        if any(c in capacity for c in columns)
    }


def gpu_cost(lowered: Lowered) -> CostTable:
    """Per source line: instructions by class and their control codes, from SASS."""
    raw = lowered.raw_text or lowered.text
    found = sass_control.instructions(sourcemap.sass_instructions(raw, _default_file(lowered)))
    shown = _shown([i.source for i in found if i.source])
    spans = sass_control.loops(found, sass_control.labels(raw))
    per_line: dict[tuple[str, int], list[sass_control.Instruction]] = collections.defaultdict(list)
    unattributed = 0
    found = tuple(i for i in found if i.opcode != "NOP")  # alignment padding after EXIT
    for instruction in found:
        if instruction.source is None or instruction.source not in shown:
            unattributed += 1
            continue
        per_line[instruction.source].append(instruction)

    def looped(address: int) -> bool:
        return any(first <= address <= last for first, last in spans)

    lines = []
    for (file, line), group in sorted(per_line.items()):
        kinds = collections.Counter(i.kind for i in group)
        controls = [i.control for i in group if i.control is not None]
        lines.append(
            LineCost(
                file,
                line,
                instructions=len(group),
                units=tuple((k, n) for k in sass_control.CLASSES if (n := kinds[k])),
                loop_instructions=sum(1 for i in group if looped(i.address)),
                stall_cycles=sum(c.stall for c in controls),
                yields=sum(1 for c in controls if c.yield_hint),
                barriers=sum(
                    (c.write_barrier is not None) + (c.read_barrier is not None) for c in controls
                ),
                waits=sum(1 for c in controls if c.wait_mask),
            )
        )
    cycles = sum(i.control.stall for i in found if i.control is not None)
    return CostTable(
        target=lowered.target,
        kernel=lowered.kernel,
        kind="gpu",
        units=sass_control.CLASSES,
        lines=tuple(lines),
        total_instructions=len(found),
        unattributed=unattributed,
        cycles_estimate=cycles,
        estimate_note=GPU_NOTE if any(i.control for i in found) else "no encodings to read",
    )


def _default_file(lowered: Lowered) -> str:
    files = collections.Counter(file for _, file, _ in lowered.source_map)
    return files.most_common(1)[0][0] if files else ""
