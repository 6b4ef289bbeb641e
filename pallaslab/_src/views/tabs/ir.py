"""The IR tab: each kernel lowered for any target, beside its source, linked by line.

Nothing is lowered until asked for: the tab's payload lists kernels and targets; the
front end then asks for one (kernel, target, stage) with a widget message, and the
text comes back in pieces (a few thousand lines each), so a lowering of tens of
thousands of lines never travels as one large message.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import messages
from pallaslab._src.core.lowering import compare, toolchains
from pallaslab._src.records import Kernel
from pallaslab._src.records import targets as target_names
from pallaslab._src.records.lowered import GpuResources, Lowered, LoweringError, TpuResources
from pallaslab._src.views import costgutter, stagenames, where
from pallaslab._src.views.contracts import (
    IrChunkReply,
    IrError,
    IrFailedReply,
    IrInitial,
    IrLoweredReply,
    IrPane,
    IrStatic,
    IrStaticLowering,
    IrTarget,
    ResourcesModel,
    SourceMapEntry,
)
from pallaslab._src.views.resources import resource_facts
from pallaslab._src.views.sourceview import source_files
from pallaslab._src.views.tabs import Tab

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


def _targets() -> list[IrTarget]:
    # Listed by family (the program, GPU, TPU), then by group (a chip, an
    # architecture), each group's targets together, in the order they are named.
    listed = target_names.all_targets()
    first: dict[str, int] = {}
    for index, target in enumerate(listed):
        first.setdefault(target.group, index)
    targets = sorted(listed, key=lambda t: (t.family_rank, first[t.group]))
    unavailable = toolchains.unavailable_reasons(targets)
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
            "unavailable": unavailable[t.name] or "",
        }
        for t in targets
    ]


def default_target(kernel: Kernel | None) -> str:
    """The target a kernel opens on: the first of its own backend."""
    backend = kernel.backend if kernel else ""
    if backend == "mosaic_tpu":
        return "mosaic-tpu:v5e"
    if backend == "mosaic_gpu" or (kernel is not None and kernel.kind == "plgpu.kernel"):
        return "mosaic-gpu"
    return "triton" if kernel is not None else "stablehlo"


def _initial(inspection: Inspection) -> IrInitial:
    """Kernel and target to open on: what was lowered last, else the first kernel's."""
    done = inspection.lowerings()
    if done:
        last = done[-1]
        return {"kernel": last.kernel_index or 0, "target": last.target}
    first = inspection.kernels[0] if inspection.kernels else None
    return {"kernel": 0, "target": default_target(first)}


def payload(inspection: Inspection) -> IrPane:
    """The IR tab's view model: kernels, targets and source windows; no IR yet."""
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


def respond(
    inspection: Inspection, content: dict[str, Any]
) -> IrLoweredReply | IrChunkReply | IrFailedReply:
    """Answers the front end: a lowering's summary, or one piece of its text."""
    kind = content.get("type")
    try:
        if kind == "lower":
            return summary(inspection, _lower(inspection, content), content)
        if kind == "chunk":
            lowered = _lower(inspection, content)
            text, source_map = _text_of(lowered, str(content.get("stage") or ""))
            index = int(content.get("index", 0))
            return chunk(inspection, text, source_map, index)
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


def summary(inspection: Inspection, lowered: Lowered, content: dict[str, Any]) -> IrLoweredReply:
    """Everything about a lowering but its text: header, error, resources, pieces."""
    stage = str(content.get("stage") or "")
    text, source_map = _text_of(lowered, stage)
    language = lowered.stage(stage).language if stage else lowered.language
    allowed = where.kernel_files(inspection.kernels)
    costs, cost_note = (
        costgutter.gutter(lowered, [f.file for f in source_files(inspection)])
        if not stage
        else ([], "")
    )
    return {
        "type": "lowered",
        "key": {"kernel": lowered.kernel_index, "target": lowered.target, "stage": stage},
        "kernel": lowered.kernel,
        "language": language,
        "header": lowered.header,
        "notes": [*lowered.notes, *_comparison(inspection, lowered)],
        "seconds": round(lowered.seconds, 3),
        "error": _error(lowered.error, allowed),
        "resources": resources(lowered.resources, allowed),
        "stages": [s.name for s in lowered.stages],
        "finalTitle": stagenames.final_title(lowered.target),
        "stageTitles": [stagenames.stage_title(s.name) for s in lowered.stages],
        "lines": len(_split(text)),
        "chunks": len(_chunks(text)),
        "mapped": len(source_map),
        "costs": costs,
        "costNote": cost_note,
        "unlinked": _unlinked(lowered, stage, text, source_map),
    }


def _unlinked(
    lowered: Lowered, stage: str, text: str, source_map: tuple[tuple[int, str, int], ...]
) -> str:
    """Why no line of a text is linked to the source, for the pane the source would be in."""
    if source_map or not text.strip():
        return ""
    # A lowering's notes say why when the compiler dropped the locations (XLA's
    # Triton kernels); otherwise the text simply carries none (a report, a stage).
    reasons = [n for n in lowered.notes if "source location" in n or "source line" in n]
    if reasons and not stage:
        return reasons[0]
    what = f"the stage {stage!r}" if stage else "this text"
    return f"The compiler kept no source locations in {what}, so none of its lines is linked."


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
) -> IrChunkReply:
    """One piece of a text: its lines and their source-map entries."""
    pieces = _chunks(text)
    if not 0 <= index < len(pieces):
        raise IndexError(f"no piece {index} (there are {len(pieces)})")
    start, end = pieces[index]
    lines = _split(text)[start:end]
    files = {f.file: k for k, f in enumerate(source_files(inspection))}
    entries: list[SourceMapEntry] = [
        (line, files[file], source_line)
        for line, file, source_line in source_map
        if start < line <= end and file in files
    ]
    return {
        "type": "chunk",
        "index": index,
        "first": start + 1,
        "lines": [
            line if len(line) <= MAX_LINE else f"{line[:MAX_LINE]} … ({len(line) - MAX_LINE} more)"
            for line in lines
        ],
        "map": entries,
        "last": index == len(pieces) - 1,
    }


def _error(error: LoweringError | None, allowed: Collection[str]) -> IrError | None:
    if error is None:
        return None
    return {
        "message": error.message,
        "kind": error.kind,
        "detail": error.detail,
        "where": where.file_location(error.location, allowed),
    }


def resources(
    found: GpuResources | TpuResources | None, allowed: Collection[str] = ()
) -> ResourcesModel | None:
    """The resources panel's model (`views/resources.py` has the facts)."""
    facts = resource_facts(found)
    if facts is None:
        return None
    if facts.kind == "gpu":
        return {
            "kind": "gpu",
            "summary": facts.summary,
            "facts": list(facts.facts),
            "occupancy": [
                {
                    "gpu": o.gpu,
                    "arch": o.arch,
                    "sameArch": o.same_arch,
                    "blocks": o.blocks,
                    "warps": o.warps,
                    "percent": o.percent,
                    "limiter": o.limiter,
                }
                for o in facts.occupancy
            ],
        }
    return {
        "kind": "tpu",
        "summary": facts.summary,
        "facts": list(facts.facts),
        "vmemFraction": facts.vmem_fraction,
        "blocks": list(facts.vmem),
        "tiling": [
            {
                "operand": p.operand,
                "message": p.message,
                "hint": p.hint,
                "where": where.file_location(p.location, allowed),
            }
            for p in facts.tiling
        ],
        "utilization": list(facts.utilization),
    }


# ---------------------------------------------------------------------------
# Saved notebooks: what was lowered before the page was made, as the widget gets it.


def static_model(inspection: Inspection) -> IrStatic:
    """The IR tab as a saved notebook shows it: the model and the lowerings done so far.

    Each lowering comes as the widget gets it: its summary, its text's first piece.
    """
    lowered: list[IrStaticLowering] = []
    for done in inspection.lowerings():
        request = {"kernel": done.kernel_index or 0, "target": done.target, "stage": ""}
        head = summary(inspection, done, request)
        first = chunk(inspection, *_text_of(done, ""), 0) if head["chunks"] else None
        lowered.append({"summary": head, "first": first})
    return {"pane": payload(inspection), "lowered": lowered}


TAB = Tab("ir", "IR", payload, eager=False, order=40, respond=respond, static_model=static_model)
