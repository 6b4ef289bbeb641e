"""`pallaslab.diff(a, b)`: two inspections, one kernel of each, side by side.

Two versions of a kernel, two tuning configs, or one kernel for two targets. The
kernel's jaxpr and one lowering per side are aligned line by line (value names,
labels and locations ignored: `textdiff`), and every figure pallaslab knows of each
side is paired (`core/diff_figures.py`: config, blocks, grid, compiler params,
resources, tile figures of merit, checks, timings). The result is one plain `Diff`
record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pallaslab._src.base import textdiff
from pallaslab._src.core.diff_figures import (
    changed_cell_constants,
    check_deltas,
    config_deltas,
    index_map_texts,
    kernel_deltas,
    resource_deltas,
    resources_of,
    tile_deltas,
    timing_deltas,
)
from pallaslab._src.core.diff_fit import fit_cost_deltas
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.core.kernel_targets import chip_for, natural_target
from pallaslab._src.geometry.merit import chip_named
from pallaslab._src.records import Kernel, Operand, SourceMapEntry, short_dtype
from pallaslab._src.records.diffs import Delta, Diff, IrDiff, LinePair
from pallaslab._src.records.lowered import Lowered
from pallaslab._src.records.targets import parse_target

__all__ = ["align_texts", "changed_cell_constants", "diff", "diff_cell", "ir_diff"]

# Past this many lines, difflib skips lines that occur very often (braces, yields)
# when looking for matches: aligning 100k-line texts stays fast.
_AUTOJUNK_LINES = 5000


def diff(
    a: Inspection,
    b: Inspection | str,
    target: str | tuple[str, str] | None = None,
    *,
    kernel: int | str | tuple[int | str, int | str] = 0,
    chip: str | None = None,
    timings: tuple[Any, Any] | None = None,
    configs: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
    names: tuple[str, str] | None = None,
    resources: bool = True,
) -> Diff:
    """What changed between two inspections: IR line by line, resources, traffic, timing.

    Args:
        a: The first inspection ("before").
        b: The second inspection ("after"); or, to compare one kernel on two
            targets, the first target's name: `diff(a, "ptx:sm_80", "ptx:sm_90")`.
        target: The target to lower both sides for ("ptx:sm_90"), a pair of
            targets (one per side), or the second target when `b` is a target. By
            default each kernel's natural target: Triton IR for Triton kernels,
            Mosaic TPU for TPU kernels, Mosaic GPU for Mosaic GPU kernels.
        kernel: The kernel of each side (name or index), or a pair.
        chip: The chip resources and tile figures are read against ("H100",
            "v5e"); by default the target's (sm_90: H100), else the backend's.
        timings: A timing of each side: `pallaslab.measure(...)` results, rows of
            a tuning table or a sweep (anything with `median_ms`), or milliseconds.
        configs: The tuning config of each side, e.g. `({"BLOCK_K": 32},
            {"BLOCK_K": 64})`; by default those of the timings' rows, else the
            `NAME = value` lines that differ between the two kernels' cells.
        names: What to call the two sides (default: the inspections' names).
        resources: For Triton IR, also compile to PTX (with the triton package)
            for registers, spills, shared memory and occupancy.

    Returns:
        A `Diff`: `.summary` (one line), `.deltas`, `.irs`, `.to_frame()`.

    Raises:
        TypeError: When a side is not an inspection, or targets are missing.
        KeyError: For an unknown kernel.
        ValueError: For an unknown target.
    """
    inspection_a, inspection_b, targets = _sides(a, b, target)
    kernel_a, kernel_b = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    ka, kb = inspection_a.kernel(kernel_a), inspection_b.kernel(kernel_b)
    chosen = chip_named(chip) if chip else None
    target_a = targets[0] or natural_target(ka, inspection_a.backend, chosen)
    target_b = targets[1] or natural_target(kb, inspection_b.backend, chosen)
    chip_a = chosen or chip_for(ka, target_a, inspection_a.backend)
    chip_b = chosen or chip_for(kb, target_b, inspection_b.backend)
    notes: list[str] = []
    same_kernel = inspection_a is inspection_b and ka.index == kb.index
    counts = len(inspection_a.kernels), len(inspection_b.kernels)
    if counts != (1, 1) and not same_kernel:
        notes.append(
            f"a has {counts[0]} kernel(s), b {counts[1]}: this compares {ka.name} with "
            f"{kb.name}; kernel= picks others (a name, an index, or a pair)."
        )

    irs: list[IrDiff] = []
    if not same_kernel:
        irs.append(blockspec_diff(ka, kb))
        irs.append(_jaxpr_diff(ka, kb))
    lowered_a = inspection_a.lower(target_a, ka.index)
    lowered_b = inspection_b.lower(target_b, kb.index)
    irs.append(ir_diff(lowered_a, lowered_b))

    deltas: list[Delta] = []
    deltas += config_deltas((inspection_a, ka), (inspection_b, kb), configs, timings)
    deltas += kernel_deltas(ka, kb, target_a, target_b)
    found_a = resources_of(
        inspection_a, ka, lowered_a, chip=chip_a, compile_more=resources, notes=notes
    )
    found_b = resources_of(
        inspection_b, kb, lowered_b, chip=chip_b, compile_more=resources, notes=notes
    )
    deltas += resource_deltas(found_a, found_b, chip_a, chip_b)
    deltas += fit_cost_deltas((inspection_a, ka, lowered_a), (inspection_b, kb, lowered_b), notes)
    deltas += tile_deltas((inspection_a, ka, chip_a), (inspection_b, kb, chip_b), notes)
    deltas += check_deltas(inspection_a, inspection_b)
    deltas += timing_deltas(timings)

    name_a, name_b = names or (inspection_a.name, inspection_b.name)
    if targets[0] != targets[1] or target_a != target_b:
        name_a, name_b = f"{name_a} @ {target_a}", f"{name_b} @ {target_b}"
    return Diff(
        a_name=name_a,
        b_name=name_b,
        a_kernel=ka.name,
        b_kernel=kb.name,
        chip=chip_a.name if chip_a.name == chip_b.name else f"{chip_a.name} / {chip_b.name}",
        deltas=tuple(deltas),
        irs=tuple(irs),
        notes=tuple(dict.fromkeys(notes)),
    )


def diff_cell(
    before: Any, after: Inspection, *, name: str, kept_as: str, target: str | None = None
) -> Diff | str:
    """`%%kernel ... --diff NAME`: this cell's inspection against the one kept under NAME.

    Args:
        before: What the user's namespace held under `name` before the cell ran.
        after: The cell's inspection.
        name: The name given to `--diff`.
        kept_as: Where cells keep their inspection by default (named in the message
            when `before` is not one).
        target: The cell's `--target`, compared instead of the natural targets.

    Returns:
        The diff; or, when there is nothing to compare, why (one sentence). The
        comparison is extra: it never fails the cell.
    """
    if not isinstance(before, Inspection):
        what = "nothing" if before is None else f"a {type(before).__name__}"
        return (
            f"--diff: {name} holds {what}, not an inspection: run the earlier version "
            f"first (its inspection is kept as {kept_as}, or --name it)."
        )
    if not before.kernels or not after.kernels:
        return f"--diff: no kernel to compare in {name} or in this cell."
    try:
        return diff(before, after, target=target, names=(name, "this cell"))
    except Exception as error:  # the cell's results stand; the message says why
        return f"--diff: could not compare with {name}: {error}"


def _sides(
    a: Any, b: Any, target: str | tuple[str, str] | None
) -> tuple[Inspection, Inspection, tuple[str | None, str | None]]:
    if not isinstance(a, Inspection):
        raise TypeError(
            f"diff compares inspections (pallaslab.inspect(...) or a cell's _kernel), "
            f"not a {type(a).__name__}"
        )
    if isinstance(b, str):
        if not isinstance(target, str):
            raise TypeError(
                "to compare one kernel on two targets, name both: "
                'diff(inspection, "ptx:sm_80", "ptx:sm_90")'
            )
        return a, a, (parse_target(b).name, parse_target(target).name)
    if not isinstance(b, Inspection):
        raise TypeError(
            f"diff compares inspections (pallaslab.inspect(...) or a cell's _kernel), "
            f"not a {type(b).__name__}"
        )
    if target is None:
        return a, b, (None, None)
    if isinstance(target, str):
        name = parse_target(target).name
        return a, b, (name, name)
    first, second = target
    return a, b, (parse_target(first).name, parse_target(second).name)


# ---------------------------------------------------------------------------
# Texts.


def ir_diff(a: Lowered, b: Lowered) -> IrDiff:
    """Two lowerings aligned line by line (value names and locations ignored)."""
    title = parse_target(b.target).title
    if a.target != b.target:
        title = f"{parse_target(a.target).title} / {title}"
    pairs = (
        align_texts(a.text, b.text, a.source_map, b.source_map, b.language) if a.ok and b.ok else ()
    )
    return IrDiff(
        title=title,
        a_target=a.target,
        b_target=b.target,
        language=b.language,
        pairs=pairs,
        a_error=str(a.error) if a.error else "",
        b_error=str(b.error) if b.error else "",
    )


def blockspec_diff(a: Kernel, b: Kernel) -> IrDiff:
    """Each operand's BlockSpec on one line (block, array, index map, memory), aligned.

    Index maps are written as expressions, a's with b's parameter names, so a line
    changes only where the blocks a program gets change (`(0, i)` → `(0, j)`), and
    each line links to its index map's source line.
    """
    a_lines: list[str] = []
    b_lines: list[str] = []
    a_map: list[SourceMapEntry] = []
    b_map: list[SourceMapEntry] = []
    for k in range(max(len(a.operands), len(b.operands))):
        oa = a.operands[k] if k < len(a.operands) else None
        ob = b.operands[k] if k < len(b.operands) else None
        texts = index_map_texts(oa, ob) if oa and ob else (None, None)
        for operand, text, lines, source_map in (
            (oa, texts[0], a_lines, a_map),
            (ob, texts[1], b_lines, b_map),
        ):
            if operand is None:
                continue
            lines.append(_blockspec_line(operand, text))
            index_map = operand.index_map
            if index_map is not None and index_map.source_file and not index_map.default:
                source_map.append((len(lines), index_map.source_file, index_map.source_line))
    return IrDiff(
        title="BlockSpecs",
        a_target="BlockSpecs",
        b_target="BlockSpecs",
        language="python",
        pairs=align_texts("\n".join(a_lines), "\n".join(b_lines), a_map, b_map, "python"),
    )


def _blockspec_line(operand: Operand, index_map: str | None) -> str:
    block = "whole array" if not operand.block_shape else f"block {_shape(operand.block_shape)}"
    where = f"index map {index_map}" if index_map else "no index map"
    array = f"{short_dtype(operand.dtype)}[{','.join(map(str, operand.shape))}]"
    return f"{operand.label} ({operand.role}): {block} of {array}, {where}, {operand.memory_space}"


def _shape(dims: Sequence[int | None]) -> str:
    inner = ", ".join("None" if d is None else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def _jaxpr_diff(a: Kernel, b: Kernel) -> IrDiff:
    return IrDiff(
        title="kernel body (jaxpr)",
        a_target="jaxpr",
        b_target="jaxpr",
        language="jaxpr",
        pairs=align_texts(a.jaxpr, b.jaxpr, a.jaxpr_source_map, b.jaxpr_source_map, "jaxpr"),
    )


def align_texts(
    a_text: str,
    b_text: str,
    a_map: Sequence[SourceMapEntry] = (),
    b_map: Sequence[SourceMapEntry] = (),
    language: str = "",
) -> tuple[LinePair, ...]:
    """Two texts aligned into `LinePair`s, each line with its source lines."""
    a_lines, b_lines = a_text.splitlines(), b_text.splitlines()
    a_sources, b_sources = _by_line(a_map), _by_line(b_map)
    opcodes = textdiff.align(
        a_lines, b_lines, language, autojunk=max(len(a_lines), len(b_lines)) > _AUTOJUNK_LINES
    )

    def pair(op: Any, i: int | None, j: int | None) -> LinePair:
        return LinePair(
            op=op,
            a_line=None if i is None else i + 1,
            b_line=None if j is None else j + 1,
            a_text="" if i is None else a_lines[i],
            b_text="" if j is None else b_lines[j],
            a_sources=() if i is None else a_sources.get(i + 1, ()),
            b_sources=() if j is None else b_sources.get(j + 1, ()),
        )

    pairs: list[LinePair] = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            pairs += [
                pair("equal", i, j) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
        elif op == "delete":
            pairs += [pair("delete", i, None) for i in range(i1, i2)]
        elif op == "insert":
            pairs += [pair("insert", None, j) for j in range(j1, j2)]
        else:  # replace: line against line, the longer side's rest inserted or deleted
            common = min(i2 - i1, j2 - j1)
            pairs += [pair("replace", i1 + k, j1 + k) for k in range(common)]
            pairs += [pair("delete", i, None) for i in range(i1 + common, i2)]
            pairs += [pair("insert", None, j) for j in range(j1 + common, j2)]
    return tuple(pairs)


def _by_line(source_map: Sequence[SourceMapEntry]) -> dict[int, tuple[tuple[str, int], ...]]:
    found: dict[int, list[tuple[str, int]]] = {}
    for text_line, file, line in source_map:
        entry = found.setdefault(text_line, [])
        if (file, line) not in entry:
            entry.append((file, line))
    return {k: tuple(v) for k, v in found.items()}
