"""Two compiles of one kernel side by side: where they differ, measured.

A Triton-backend kernel can be compiled by the triton package (`ptx:sm_90`,
`sass:sm_90`) and by XLA's own Triton (`xla-gpu:H100`). `compare_lowered` puts two
`Lowered` records next to each other: registers, spills, shared memory, instruction
counts of the PTX and the SASS, and the instructions whose counts differ most, with a
one-line summary. Plain text processing, no JAX.
"""

from __future__ import annotations

import collections
import dataclasses
import re

from pallaslab._src.records import hardware
from pallaslab._src.records.lowered import GpuResources, Lowered

_SASS_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
_PTX_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*)(?:\.[\w:]+)*[\s;]")


@dataclasses.dataclass(frozen=True)
class LoweringComparison:
    """Two lowerings of one kernel, figure by figure.

    Attributes:
        first: The first lowering's target ("ptx:sm_90").
        second: The second's ("xla-gpu:H100").
        rows: (figure, first value, second value), as text.
        differences: The instructions whose counts differ most: (instruction, first
            count, second count), SASS when both have it, else PTX.
        summary: One line saying where they differ.
    """

    first: str
    second: str
    rows: tuple[tuple[str, str, str], ...]
    differences: tuple[tuple[str, int, int], ...]
    summary: str


def sass_counts(sass: str) -> collections.Counter[str]:
    """Instructions of a SASS listing by opcode ("HGMMA", "LDS", "FFMA"), NOPs left out."""
    counts: collections.Counter[str] = collections.Counter()
    for line in sass.splitlines():
        match = _SASS_INSTRUCTION.match(line)
        if match and match.group(1) != "NOP":
            counts[match.group(1)] += 1
    return counts


def ptx_counts(ptx: str) -> collections.Counter[str]:
    """Instructions of a PTX module by opcode family ("wgmma", "ld", "mma", "fma").

    Only lines inside function bodies count; directives (`.reg`, `.loc`), labels and
    comments do not.
    """
    counts: collections.Counter[str] = collections.Counter()
    depth = 0
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if depth > 0 and not line.startswith((".", "{", "}")) and line.endswith(";"):
            match = _PTX_INSTRUCTION.match(line)
            if match:
                counts[match.group(1)] += 1
        depth += line.count("{") - line.count("}")
    return counts


def _text(lowered: Lowered, language: str) -> str:
    if lowered.language == language:
        return lowered.text
    return next((s.text for s in lowered.stages if s.name == language), "")


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:g} KiB" if value >= 1024 and value % 256 == 0 else f"{value} B"


def _delta(first: int | None, second: int | None) -> str:
    if first is None or second is None or first == second:
        return ""
    return f" ({second - first:+d})"


def compare_lowered(first: Lowered, second: Lowered) -> LoweringComparison:
    """Where two lowerings of one kernel differ: resources and instruction counts.

    Raises:
        ValueError: When either lowering failed.
    """
    for lowered in (first, second):
        if not lowered.ok:
            raise ValueError(f"{lowered.target} did not lower: {lowered.error}")
    rows: list[tuple[str, str, str]] = []
    said: list[str] = []
    a = first.resources if isinstance(first.resources, GpuResources) else None
    b = second.resources if isinstance(second.resources, GpuResources) else None
    if a is not None and b is not None:
        rows.append(("architecture", a.arch, b.arch))
        rows.append(("warps per block", str(a.num_warps), str(b.num_warps)))
        pairs = (
            ("registers per thread", a.registers_per_thread, b.registers_per_thread, str),
            ("register spills (stores)", a.spill_store_bytes, b.spill_store_bytes, _bytes),
            ("shared memory per block", a.shared_bytes, b.shared_bytes, _bytes),
        )
        for name, x, y, show in pairs:
            rows.append((name, "-" if x is None else show(x), "-" if y is None else show(y)))
            if x is not None and y is not None:
                delta = _delta(x, y) if show is str else ""
                said.append(f"{name.split(' (')[0]} {show(x)} vs {show(y)}{delta}")
    differences: tuple[tuple[str, int, int], ...] = ()
    for language, counter in (("sass", sass_counts), ("ptx", ptx_counts)):
        x_text, y_text = _text(first, language), _text(second, language)
        if not x_text or not y_text:
            continue
        x_counts, y_counts = counter(x_text), counter(y_text)
        x_total, y_total = sum(x_counts.values()), sum(y_counts.values())
        rows.append((f"{language.upper()} instructions", str(x_total), str(y_total)))
        delta = _delta(x_total, y_total)
        said.append(f"{language.upper()} instructions {x_total} vs {y_total}{delta}")
        if not differences:
            ranked = sorted(
                set(x_counts) | set(y_counts),
                key=lambda op: (-abs(y_counts[op] - x_counts[op]), op),
            )
            differences = tuple(
                (op, x_counts[op], y_counts[op])
                for op in ranked[:5]
                if x_counts[op] != y_counts[op]
            )
    if differences:
        said.append(
            "most different: " + ", ".join(f"{op} {x} vs {y}" for op, x, y in differences[:3])
        )
    summary = f"{first.target} vs {second.target}: " + ("; ".join(said) or "nothing to compare")
    return LoweringComparison(first.target, second.target, tuple(rows), differences, summary + ".")


def counterpart(lowered: Lowered, done: list[Lowered]) -> Lowered | None:
    """The other compiler's lowering of the same Triton kernel, when one was made.

    `xla-gpu:<chip>` pairs with the triton package's `sass:`/`ptx:` of the chip's
    architecture (SASS preferred), and the other way round.
    """
    if lowered.error is not None or lowered.kernel_index is None:
        return None
    same_kernel = [
        other
        for other in done
        if other.kernel_index == lowered.kernel_index and other.ok and other is not lowered
    ]
    kind, _, arch = lowered.target.partition(":")
    if kind == "xla-gpu":
        if any(stage.name.startswith("Mosaic GPU") for stage in lowered.stages):
            return None  # a Mosaic GPU kernel: the triton package cannot take it
        wanted = hardware.gpu(arch).arch
        for stage in ("sass", "ptx"):
            for other in same_kernel:
                if other.target == f"{stage}:{wanted}":
                    return other
        return None
    if kind in ("sass", "ptx"):
        for other in same_kernel:
            other_kind, _, chip = other.target.partition(":")
            if other_kind == "xla-gpu" and hardware.gpu(chip).arch == arch:
                return other
    return None
