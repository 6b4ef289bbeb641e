"""The Kernels tab: every kernel's grid, operands, block specs and compiler params."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pallaslab._src import sources
from pallaslab._src.geometry import races as race_geometry
from pallaslab._src.records import Kernel, Operand, SourceLocation
from pallaslab._src.views import fmt
from pallaslab._src.views.tabs import Payload, Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def _location(location: SourceLocation | None) -> dict[str, Any] | None:
    if location is None:
        return None
    return {"label": sources.label(location.file), "line": location.line}


def _operand(operand: Operand) -> dict[str, Any]:
    index_map = operand.index_map
    return {
        "role": "prefetch" if operand.scalar_prefetch else operand.role,
        "label": operand.label,
        "origin": operand.origin,
        "type": fmt.array_type(operand.dtype, operand.shape),
        "block": fmt.operand_block(operand),
        "blockBytes": fmt.nbytes(operand.block_bytes),
        "indexMap": index_map.text if index_map else "",
        "memory": operand.memory_space,
        "buffers": operand.buffer_count,
    }


# Conflicts sent per backend (the words summarise all of them).
_MAX_CONFLICTS = 256
# Grids beyond this are not compared while the inspector opens (it would be slow).
_MAX_PROGRAMS = 1 << 20


def _races(kernel: Kernel, inspection: Inspection | None = None) -> dict[str, Any]:
    """Per backend: sentences for the inspector, and the conflicts as data.

    The data (for tile views) says which programs write which block of which output.
    Outputs programs share in memory are decided element by element (a run of the
    kernel) when the inspection holds its program.
    """
    found: dict[str, Any] = {}
    for backend in race_geometry.BACKENDS:
        label = backend.upper()
        entry: dict[str, Any] = {"sentences": [], "conflicts": [], "total": 0, "checked": True}
        if kernel.kind != "pallas_call":
            entry["checked"] = False
            entry["sentences"] = [
                f"{label}: not checked: {kernel.kind} kernels address whole arrays, not blocks."
            ]
        elif not kernel.grid:
            entry["sentences"] = [f"{label}: no races: a single program."]
        elif kernel.num_programs > _MAX_PROGRAMS:
            entry["checked"] = False
            entry["sentences"] = [
                f"{label}: not checked here: {kernel.num_programs} programs; call "
                f'kernel.races("{backend}").'
            ]
        else:
            try:
                conflicts, sentences = _race_words(kernel, backend, inspection)
            except ValueError as error:
                entry["checked"] = False
                entry["sentences"] = [f"{label}: not checked: {error}."]
            else:
                entry["sentences"] = sentences
                entry["total"] = len(conflicts)
                names = race_geometry.axis_names(kernel)
                entry["conflicts"] = [
                    {
                        "kind": c.kind,
                        "operand": c.operand,
                        "position": c.position,
                        "block": list(c.block),
                        "start": list(c.start),
                        "programs": [list(p) for p in c.programs[:16]],
                        "programCount": len(c.programs),
                        "axes": list(c.axes),
                        "elements": c.elements,
                        "span": [list(pair) for pair in c.span],
                        "text": c.describe(names),
                    }
                    for c in conflicts[:_MAX_CONFLICTS]
                ]
        found[backend] = entry
    return found


def _race_words(
    kernel: Kernel, backend: str, inspection: Inspection | None
) -> tuple[tuple[race_geometry.Conflict, ...], list[str]]:
    if inspection is None or inspection._program is None:  # noqa: SLF001 - hand-made records
        conflicts = tuple(race_geometry.find_races(kernel, backend))
        return conflicts, race_geometry.summarize(kernel, conflicts, backend)
    report = inspection.race_report(kernel.index, backend)
    return report.conflicts, report.sentences(kernel)


def _kernel(kernel: Kernel, inspection: Inspection | None = None) -> dict[str, Any]:
    cost = kernel.cost_estimate
    return {
        "index": kernel.index,
        "name": kernel.name,
        "kind": kernel.kind,
        "grid": list(kernel.grid),
        "gridNames": list(kernel.grid_names) if kernel.grid_names else None,
        "programs": kernel.num_programs,
        "source": _location(kernel.source),
        "callSite": _location(kernel.call_site),
        "backend": kernel.backend,
        "params": [list(p) for p in kernel.compiler_params],
        "semantics": list(kernel.dimension_semantics) if kernel.dimension_semantics else None,
        "cost": (
            {
                "flops": cost.flops,
                "transcendentals": cost.transcendentals,
                "bytes": cost.bytes_accessed,
            }
            if cost
            else None
        ),
        "interpret": kernel.interpret,
        "vmapped": list(kernel.vmapped_dims),
        "path": list(kernel.path),
        "aliases": [list(a) for a in kernel.input_output_aliases],
        "operands": [_operand(o) for o in kernel.operands],
        "races": _races(kernel, inspection),
    }


def payload(inspection: Inspection) -> Payload:
    """The Kernels tab's data."""
    return {
        "program": {
            "name": inspection.name,
            "args": [{"path": a.path, "type": str(a)} for a in inspection.args],
            "outputs": [{"path": o.path, "type": str(o)} for o in inspection.outputs],
        },
        "kernels": [_kernel(k, inspection) for k in inspection.kernels],
        "notices": list(inspection.notices),
    }


_COLUMNS = ("role", "label", "type", "block", "indexMap", "memory", "blockBytes")
_HEADINGS = ("role", "ref", "array", "block", "index map", "memory", "block bytes")


def static_html(inspection: Inspection) -> str:
    """The Kernels tab as HTML."""
    data = payload(inspection)
    parts = []
    for kernel in data["kernels"]:
        grid = " x ".join(map(str, kernel["grid"])) or "()"
        where = kernel["source"]
        defined = f" — defined at {where['label']} line {where['line']}" if where else ""
        parts.append(
            f"<h4>{html.escape(kernel['name'])} <small>grid ({html.escape(grid)}), "
            f"{kernel['programs']} programs{html.escape(defined)}</small></h4>"
        )
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(op[c]))}</td>" for c in _COLUMNS) + "</tr>"
            for op in kernel["operands"]
        )
        heads = "".join(f"<th>{h}</th>" for h in _HEADINGS)
        parts.append(f"<table><tr>{heads}</tr>{rows}</table>")
        facts = []
        if kernel["semantics"]:
            facts.append("dimension semantics: " + ", ".join(kernel["semantics"]))
        if kernel["params"]:
            facts.append(
                f"compiler params ({kernel['backend']}): "
                + ", ".join(f"{k}={v}" for k, v in kernel["params"])
            )
        if facts:
            parts.append("<p>" + html.escape("; ".join(facts)) + "</p>")
        for entry in kernel["races"].values():
            css = "pl-warning" if entry["total"] else "pl-facts"
            parts.extend(
                f"<p class='{css}'>{html.escape(sentence)}</p>" for sentence in entry["sentences"]
            )
    if not data["kernels"]:
        parts.append("<p>No Pallas kernels found.</p>")
    parts.extend(f"<p class='pl-notice'>{html.escape(n)}</p>" for n in data["notices"])
    return "".join(parts)


TAB = Tab("overview", "Kernels", payload, static_html, order=10)
