"""The IR tab: each kernel lowered for any target, beside its source, linked by line.

Nothing is lowered until asked for: the tab's payload lists kernels and targets; the
front end then asks for one (kernel, target, stage) with a widget message, and the
text comes back in pieces (a few thousand lines each), so a lowering of tens of
thousands of lines never travels as one large message.
"""

from __future__ import annotations

import functools
import html
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import messages, sources
from pallaslab._src.core.lowering import compare, toolchains
from pallaslab._src.records import Kernel
from pallaslab._src.records import targets as target_names
from pallaslab._src.records.lowered import GpuResources, Lowered, LoweringError, TpuResources
from pallaslab._src.views import fmt
from pallaslab._src.views.highlight import highlight_html
from pallaslab._src.views.sourceview import source_files
from pallaslab._src.views.tabs import Payload, Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# A piece of text sent in one message: this many lines, or fewer to stay under the
# character budget (JSON escapes at most 6 bytes per character: under 2 MiB).
CHUNK_LINES = 2000
CHUNK_BYTES = 256 * 1024
# A single line longer than this is cut in the view (the record keeps it whole).
MAX_LINE = 4000
# Lines of each lowering kept in the static HTML of a saved notebook.
STATIC_LINES = 300


def _targets() -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "title": t.title,
            "group": t.group,
            "kind": t.kind,
            "stage": t.stage,
            "arch": t.arch,
            "language": t.language,
            "program": t.program,
            "unavailable": toolchains.unavailable_reason(t) or "",
        }
        for t in target_names.all_targets()
    ]


def default_target(kernel: Kernel | None) -> str:
    """The target a kernel opens on: the first of its own backend."""
    backend = kernel.backend if kernel else ""
    if backend == "mosaic_tpu":
        return "mosaic-tpu:v5e"
    if backend == "mosaic_gpu" or (kernel is not None and kernel.kind == "plgpu.kernel"):
        return "mosaic-gpu"
    return "triton" if kernel is not None else "stablehlo"


def _initial(inspection: Inspection) -> dict[str, Any]:
    """Kernel and target to open on: what was lowered last, else the first kernel's."""
    done = inspection.lowerings()
    if done:
        last = done[-1]
        return {"kernel": last.kernel_index or 0, "target": last.target}
    first = inspection.kernels[0] if inspection.kernels else None
    return {"kernel": 0, "target": default_target(first)}


def payload(inspection: Inspection) -> Payload:
    """The IR tab's data: kernels, targets and source windows; no IR yet."""
    files = source_files(inspection)
    return {
        "kernels": [
            {
                "index": k.index,
                "name": k.name,
                "backend": k.backend,
                "kind": k.kind,
                "defaultTarget": default_target(k),
            }
            for k in inspection.kernels
        ],
        "targets": _targets(),
        "initial": _initial(inspection),
        "files": [f.to_json() for f in files],
    }


# ---------------------------------------------------------------------------
# Requests from the front end: {"type": "lower" | "chunk", "kernel", "target", ...}.


def respond(inspection: Inspection, content: dict[str, Any]) -> dict[str, Any]:
    """Answers the front end: a lowering's summary, or one piece of its text."""
    kind = content.get("type")
    try:
        if kind == "lower":
            lowered = _lower(inspection, content)
            return {"type": "lowered", **summary(inspection, lowered, content)}
        if kind == "chunk":
            lowered = _lower(inspection, content)
            text, source_map = _text_of(lowered, str(content.get("stage") or ""))
            index = int(content.get("index", 0))
            return {"type": "chunk", **chunk(inspection, text, source_map, index)}
    except Exception as error:
        return {"type": "failed", "message": messages.describe(error)}
    return {"type": "failed", "message": f"unknown request {kind!r}"}


def _lower(inspection: Inspection, content: dict[str, Any]) -> Lowered:
    return inspection.lower(str(content["target"]), int(content.get("kernel", 0)))


def _text_of(lowered: Lowered, stage: str) -> tuple[str, tuple[tuple[int, str, int], ...]]:
    if not stage:
        return lowered.text, lowered.source_map
    found = lowered.stage(stage)
    return found.text, found.source_map


@functools.lru_cache(maxsize=8)
def _split(text: str) -> tuple[str, ...]:
    # A text is asked for piece by piece: split it once (str caches its hash).
    return tuple(text.split("\n")) if text else ()


@functools.lru_cache(maxsize=8)
def _chunks(text: str) -> tuple[tuple[int, int], ...]:
    """(first line, end line) of each piece, 0-based, end exclusive."""
    lines = _split(text)
    pieces = []
    start = 0
    size = 0
    for number, line in enumerate(lines):
        length = min(len(line), MAX_LINE) + 1
        if number > start and (number - start >= CHUNK_LINES or size + length > CHUNK_BYTES):
            pieces.append((start, number))
            start, size = number, 0
        size += length
    if start < len(lines):
        pieces.append((start, len(lines)))
    return tuple(pieces)


def summary(inspection: Inspection, lowered: Lowered, content: dict[str, Any]) -> dict[str, Any]:
    """Everything about a lowering but its text: header, error, resources, pieces."""
    stage = str(content.get("stage") or "")
    text, source_map = _text_of(lowered, stage)
    language = lowered.stage(stage).language if stage else lowered.language
    return {
        "key": {"kernel": lowered.kernel_index, "target": lowered.target, "stage": stage},
        "kernel": lowered.kernel,
        "language": language,
        "header": lowered.header,
        "notes": [*lowered.notes, *_comparison(inspection, lowered)],
        "seconds": round(lowered.seconds, 3),
        "error": _error(lowered.error),
        "resources": resources(lowered.resources),
        "stages": [s.name for s in lowered.stages],
        "lines": len(_split(text)),
        "chunks": len(_chunks(text)),
        "mapped": len(source_map),
    }


def _comparison(inspection: Inspection, lowered: Lowered) -> list[str]:
    """One line on where the other compiler's build of this kernel differs, if there is one."""
    other = compare.counterpart(lowered, inspection.lowerings())
    if other is None:
        return []
    first, second = (other, lowered) if lowered.target.startswith("xla-gpu") else (lowered, other)
    return ["Two compilers: " + compare.compare_lowered(first, second).summary]


def chunk(
    inspection: Inspection,
    text: str,
    source_map: tuple[tuple[int, str, int], ...],
    index: int,
) -> dict[str, Any]:
    """One piece of a text: its lines and their source-map entries."""
    pieces = _chunks(text)
    if not 0 <= index < len(pieces):
        raise IndexError(f"no piece {index} (there are {len(pieces)})")
    start, end = pieces[index]
    lines = _split(text)[start:end]
    files = {f.file: k for k, f in enumerate(source_files(inspection))}
    return {
        "index": index,
        "first": start + 1,
        "lines": [
            line if len(line) <= MAX_LINE else f"{line[:MAX_LINE]} … ({len(line) - MAX_LINE} more)"
            for line in lines
        ],
        "map": [
            [line, files[file], source_line]
            for line, file, source_line in source_map
            if start < line <= end and file in files
        ],
        "last": index == len(pieces) - 1,
    }


def _where(file: str, line: int) -> dict[str, Any]:
    return {"file": file, "label": sources.label(file), "line": line}


def _error(error: LoweringError | None) -> dict[str, Any] | None:
    if error is None:
        return None
    location = error.location
    return {
        "message": error.message,
        "kind": error.kind,
        "detail": error.detail,
        "where": _where(location.file, location.line) if location else None,
    }


def resources(found: GpuResources | TpuResources | None) -> dict[str, Any] | None:
    """The resources panel's data."""
    if isinstance(found, GpuResources):
        spills = (
            "-"
            if found.spill_store_bytes is None
            else f"{found.spill_store_bytes} B stores, {found.spill_load_bytes} B loads"
        )
        return {
            "kind": "gpu",
            "facts": [
                ["architecture", found.arch],
                ["warps per block", f"{found.num_warps} ({found.threads_per_block} threads)"],
                ["pipeline stages", "-" if found.num_stages is None else str(found.num_stages)],
                ["registers per thread", _maybe(found.registers_per_thread)],
                ["register spills", spills],
                ["local memory per thread", _bytes(found.local_bytes)],
                ["shared memory per block", fmt.nbytes(found.shared_bytes)],
            ],
            "occupancy": [
                {
                    "gpu": o.gpu,
                    "arch": o.arch,
                    "sameArch": o.same_arch,
                    "blocks": o.blocks_per_sm,
                    "warps": f"{o.active_warps} / {o.max_warps}",
                    "percent": round(100 * o.fraction),
                    "limiter": o.limiter,
                }
                for o in found.occupancy
            ],
        }
    if isinstance(found, TpuResources):
        facts = [
            ["chip", found.chip],
            [
                "VMEM of blocks and scratch",
                f"{fmt.nbytes(found.vmem_bytes)} of {fmt.nbytes(found.vmem_capacity)} "
                f"({100 * found.vmem_bytes / found.vmem_capacity:.1f}%)",
            ],
        ]
        if found.bundles is not None:
            facts.append(["bundles", str(found.bundles)])
        if found.loop_body_bundles is not None:
            facts.append(["bundles per grid step (loop body)", str(found.loop_body_bundles)])
        if found.code_bytes is not None:
            facts.append(["program code size (runtime included)", fmt.nbytes(found.code_bytes)])
        return {
            "kind": "tpu",
            "facts": facts,
            "vmemFraction": found.vmem_bytes / found.vmem_capacity if found.vmem_capacity else 0,
            "blocks": [
                {
                    "operand": b.operand,
                    "role": b.role,
                    "block": fmt.shape(b.block_shape),
                    "dtype": b.dtype,
                    "buffers": b.buffers,
                    "bytes": fmt.nbytes(b.bytes),
                    "padded": fmt.nbytes(b.padded_bytes),
                }
                for b in found.vmem_blocks
            ],
            "tiling": [
                {
                    "operand": p.operand,
                    "message": p.message,
                    "hint": p.hint,
                    "where": _where(p.location.file, p.location.line) if p.location else None,
                }
                for p in found.tiling_problems
            ],
            "utilization": [
                {"unit": unit, "slots": slots, "mean": round(mean, 2)}
                for unit, slots, mean in found.utilization
            ],
        }
    return None


def _maybe(value: int | None) -> str:
    return "-" if value is None else str(value)


def _bytes(value: int | None) -> str:
    return "-" if value is None else fmt.nbytes(value)


# ---------------------------------------------------------------------------
# Static HTML (saved notebooks): what was lowered before the page was made.


def static_html(inspection: Inspection) -> str:
    """The IR tab as HTML: the lowerings done so far, each cut to its first lines."""
    done = inspection.lowerings()
    if not done:
        return (
            "<p class='pl-notice'>Nothing lowered yet: choose a target in the IR tab, use "
            "<code>%%kernel ... --target ptx:sm_90</code>, or "
            '<code>inspection.lower("ptx:sm_90")</code>.</p>'
        )
    parts = []
    for lowered in done:
        title = f"{lowered.kernel or 'program'} · {lowered.target}"
        parts.append(
            f"<h4>{html.escape(title)}</h4><p class='pl-notice'>{html.escape(lowered.header)}</p>"
        )
        if lowered.error is not None:
            parts.append(f"<div class='pl-problem'>{html.escape(str(lowered.error))}</div>")
            continue
        lines = lowered.lines
        shown = "\n".join(
            highlight_html(line[:MAX_LINE], lowered.language) for line in lines[:STATIC_LINES]
        )
        more = (
            f"\n<span class='pl-notice'>… {len(lines) - STATIC_LINES} more lines</span>"
            if len(lines) > STATIC_LINES
            else ""
        )
        parts.append(f"<pre class='pl-code'>{shown}{more}</pre>")
    return "".join(parts)


TAB = Tab("ir", "IR", payload, static_html, eager=False, order=40, respond=respond)
