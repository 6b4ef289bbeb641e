"""The Kernels tab: every kernel's grid, operands, block specs and compiler params."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import messages, sources
from pallaslab._src.geometry import races as race_geometry
from pallaslab._src.geometry.limits import MAX_PROGRAMS
from pallaslab._src.records import Kernel, Operand, SourceLocation
from pallaslab._src.records.hints import Hint
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


def _races(
    kernel: Kernel, inspection: Inspection, max_conflicts: int = _MAX_CONFLICTS
) -> dict[str, Any]:
    """Per backend: sentences for the inspector, and the conflicts as data.

    The data (for tile views) says which programs write which block of which output;
    at most `max_conflicts` conflicts are sent (the sentences count them all). Index
    maps that read scalar-prefetch values get those of the example arguments, and
    outputs programs share in memory are decided element by element (a run of the
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
        elif kernel.num_programs > MAX_PROGRAMS:
            entry["checked"] = False
            entry["sentences"] = [
                f"{label}: not checked: {kernel.num_programs} programs, more than the "
                f"{MAX_PROGRAMS:,} pallaslab checks program by program."
            ]
        elif kernel.num_programs > _MAX_PROGRAMS:
            entry["checked"] = False
            entry["sentences"] = [
                f"{label}: not checked here: {kernel.num_programs} programs; call "
                f'inspection.races({kernel.index}, "{backend}").'
            ]
        else:
            try:
                conflicts, sentences = _race_words(kernel, backend, inspection)
            except ValueError as error:
                entry["checked"] = False
                entry["sentences"] = [f"{label}: not checked: {messages.error_text(error)}."]
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
                    for c in conflicts[:max_conflicts]
                ]
        found[backend] = entry
    return found


def _race_words(
    kernel: Kernel, backend: str, inspection: Inspection
) -> tuple[tuple[race_geometry.Conflict, ...], list[str]]:
    report = inspection.race_report(kernel, backend)
    return report.conflicts, report.sentences(kernel)


def _hint(hint: Hint) -> dict[str, Any]:
    return {
        "id": hint.id,
        "severity": hint.severity,
        "message": hint.message,
        "location": _location(hint.location),
        "figures": [[name, str(value)] for name, value in hint.figures],
        "chip": hint.chip,
    }


def _hints(inspection: Inspection, kernel: Kernel, *, masks: bool) -> dict[str, Any]:
    """The kernel's performance hints; masks (which interpret the body) only on request."""
    from pallaslab._src.core.hints import kernel_hints_of  # noqa: PLC0415 - core is below

    try:
        found = kernel_hints_of(inspection, kernel, masks=masks)
    except Exception as error:  # hints are advice: never lose the tab over them
        return {"hints": [], "error": f"hints could not be worked out: {error}", "masks": masks}
    # Without a masked load or store in the body, there is nothing more to ask for.
    checked = masks or " mask=" not in kernel.jaxpr
    return {"hints": [_hint(h) for h in found], "masks": checked}


_MESHES = {"mosaic_tpu": "a TPU mesh (Mosaic TPU)", "mosaic_gpu": "a GPU mesh (Mosaic GPU)"}


def kind_text(kernel: Kernel) -> str:
    """What built the kernel, in words: "" for a pallas_call, else its kind and mesh."""
    if kernel.kind == "pallas_call":
        return ""
    return f"{kernel.kind} on {_MESHES.get(kernel.backend, 'a mesh')}"


def _kernel(
    kernel: Kernel, inspection: Inspection, max_conflicts: int = _MAX_CONFLICTS
) -> dict[str, Any]:
    cost = kernel.cost_estimate
    return {
        "index": kernel.index,
        "name": kernel.name,
        "kind": kernel.kind,
        "kindText": kind_text(kernel),
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
        "races": _races(kernel, inspection, max_conflicts),
        "hints": _hints(inspection, kernel, masks=False),
    }


def payload(inspection: Inspection) -> Payload:
    """The Kernels tab's data."""
    return {
        "program": {
            "name": inspection.name,
            "args": [{"path": a.path, "type": str(a)} for a in inspection.args],
            "outputs": [{"path": o.path, "type": str(o)} for o in inspection.outputs],
        },
        # The pane stays small with many kernels: they share the conflicts sent.
        "kernels": [
            _kernel(k, inspection, max(8, _MAX_CONFLICTS // max(1, len(inspection.kernels))))
            for k in inspection.kernels
        ],
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
        built = f"{kernel['kindText']}, " if kernel["kindText"] else ""
        parts.append(
            f"<h4>{html.escape(kernel['name'])} <small>{html.escape(built)}"
            f"grid ({html.escape(grid)}), {kernel['programs']} programs{html.escape(defined)}"
            "</small></h4>"
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
        parts.append(_hints_html(kernel["hints"]))
    if not data["kernels"]:
        parts.append("<p>No Pallas kernels found.</p>")
    parts.extend(f"<p class='pl-notice'>{html.escape(n)}</p>" for n in data["notices"])
    return "".join(parts)


def _hints_html(data: dict[str, Any] | None) -> str:
    if not data or not (data["hints"] or data.get("error")):
        return ""
    items = []
    for hint in data["hints"]:
        where = hint["location"]
        at = f"{where['label']} line {where['line']}: " if where else ""
        items.append(
            f"<li class='pl-hint pl-hint-{html.escape(hint['severity'])}'>"
            f"<b>{html.escape(hint['severity'])}</b> {html.escape(at)}"
            f"{html.escape(hint['message'])} "
            f"<small>(assumes {html.escape(hint['chip'])})</small></li>"
        )
    if data.get("error"):
        items.append(f"<li class='pl-notice'>{html.escape(data['error'])}</li>")
    return f"<h5>Hints</h5><ul class='pl-hints'>{''.join(items)}</ul>"


def respond(inspection: Inspection, body: dict[str, Any]) -> Payload:
    """Requests from the tab: `{"kind": "hints", "kernel": k}`, with masks checked."""
    if body.get("kind") != "hints":
        return {"error": f"unknown request {body.get('kind')!r}"}
    try:
        kernel = inspection.kernel(int(body.get("kernel", 0)))
    except (KeyError, ValueError) as error:
        return {"error": str(error)}
    return _hints(inspection, kernel, masks=True)


TAB = Tab("overview", "Kernels", payload, static_html, order=10, respond=respond)
