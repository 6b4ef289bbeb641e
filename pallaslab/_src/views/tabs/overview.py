"""The Kernels tab: every kernel's grid, operands, block specs and compiler params."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import messages, words
from pallaslab._src.geometry import races as race_geometry
from pallaslab._src.geometry.limits import MAX_PROGRAMS
from pallaslab._src.records import Kernel, Operand
from pallaslab._src.records.hints import Hint
from pallaslab._src.views import fitmodel, fmt, where
from pallaslab._src.views.contracts import (
    ErrorPane,
    FitModel,
    HintModel,
    HintsModel,
    KernelModel,
    Location,
    OperandRow,
    OverviewPane,
    RaceEntry,
)
from pallaslab._src.views.tabs import Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def _operand(operand: Operand) -> OperandRow:
    return {
        "role": "prefetch" if operand.scalar_prefetch else operand.role,
        "label": operand.label,
        "origin": operand.origin,
        "type": fmt.array_type(operand.dtype, operand.shape),
        "block": fmt.operand_block(operand),
        "blockBytes": words.nbytes(operand.block_bytes),
        "indexMap": fmt.index_map_text(operand),
        "memory": operand.memory_space,
        "buffers": operand.buffer_count,
    }


# Conflicts sent per backend (the words summarise all of them).
_MAX_CONFLICTS = 256
# Grids beyond this are not compared while the inspector opens (it would be slow).
_MAX_PROGRAMS = 1 << 20


def _races(
    kernel: Kernel, inspection: Inspection, max_conflicts: int = _MAX_CONFLICTS
) -> dict[str, RaceEntry]:
    """Per backend: sentences for the inspector, and the conflicts as data.

    The data (for tile views) says which programs write which block of which output;
    at most `max_conflicts` conflicts are sent (the sentences count them all). Index
    maps that read scalar-prefetch values get those of the example arguments, and
    outputs programs share in memory are decided element by element (a run of the
    kernel) when the inspection holds its program.
    """
    found: dict[str, RaceEntry] = {}
    for backend in race_geometry.BACKENDS:
        label = backend.upper()
        entry: RaceEntry = {"sentences": [], "conflicts": [], "total": 0, "checked": True}
        interpreted = _interpreter_races(kernel, inspection) if backend == "gpu" else []
        if interpreted:
            # JAX's Mosaic GPU interpreter ran the kernel and saw these races.
            entry["sentences"] = interpreted
            entry["total"] = len(interpreted)
        elif kernel.kind != "pallas_call" and _gpu_interpreted(kernel, inspection, backend):
            entry["sentences"] = [
                f"{label}: no races: JAX's Mosaic GPU interpreter ran it with its race "
                "detector on and found none."
            ]
        elif kernel.kind != "pallas_call":
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


def _interpreter_races(kernel: Kernel, inspection: Inspection) -> list[str]:
    """The races JAX's Mosaic GPU interpreter found in this kernel's run, as sentences."""
    result = inspection.result
    if result is None:
        return []
    return [
        f"GPU: {race.describe(with_location=False)} (lines "
        f"{race.location.line if race.location else '?'} and "
        f"{race.other_location.line if race.other_location else '?'})"
        for race in result.interpreter_races
        if race.kernel_index == kernel.index
    ]


def _gpu_interpreted(kernel: Kernel, inspection: Inspection, backend: str) -> bool:
    """Whether the inspection's run had this kernel in JAX's Mosaic GPU interpreter."""
    result = inspection.result
    return (
        backend == "gpu"
        and result is not None
        and kernel.backend == "mosaic_gpu"
        and result.mode in ("mosaic-gpu-interpret", "emulated+interpret")
        and any(kernel.name in n and "Mosaic GPU interpreter" in n for n in result.notices)
    )


def _race_words(
    kernel: Kernel, backend: str, inspection: Inspection
) -> tuple[tuple[race_geometry.Conflict, ...], list[str]]:
    report = inspection.race_report(kernel, backend)
    return report.conflicts, report.sentences(kernel)


def _hint(hint: Hint, allowed: Collection[str]) -> HintModel:
    return {
        "id": hint.id,
        "severity": hint.severity,
        "message": hint.message,
        "location": where.location(hint.location, allowed),
        "figures": [(name, str(value)) for name, value in hint.figures],
        "chip": hint.chip,
    }


def _hints(inspection: Inspection, kernel: Kernel, *, masks: bool) -> HintsModel:
    """The kernel's performance hints; masks (which interpret the body) only on request."""
    from pallaslab._src.core.hints import kernel_hints_of  # noqa: PLC0415 - core is below

    try:
        found = kernel_hints_of(inspection, kernel, masks=masks)
    except Exception as error:  # hints are advice: never lose the tab over them
        return {"hints": [], "error": f"hints could not be worked out: {error}", "masks": masks}
    # Without a masked load or store in the body, there is nothing more to ask for.
    checked = masks or " mask=" not in kernel.jaxpr
    allowed = where.kernel_files(inspection.kernels)
    return {"hints": [_hint(h, allowed) for h in found], "masks": checked}


_MESHES = {"mosaic_tpu": "a TPU mesh (Mosaic TPU)", "mosaic_gpu": "a GPU mesh (Mosaic GPU)"}


def kind_text(kernel: Kernel) -> str:
    """What built the kernel, in words: "" for a pallas_call, else its kind and mesh."""
    if kernel.kind == "pallas_call":
        return ""
    return f"{kernel.kind} on {_MESHES.get(kernel.backend, 'a mesh')}"


def _facts(kernel: Kernel, source: Location | None, call_site: Location | None) -> list[str]:
    """What built the kernel and its grid, where it is defined and run: short phrases."""
    grid = " \u00d7 ".join(map(str, kernel.grid))
    names = f" ({', '.join(kernel.grid_names)})" if kernel.grid_names else ""
    programs = kernel.num_programs
    built = kind_text(kernel)
    facts = [
        f"{built + ', ' if built else ''}grid ({grid}){names} = "
        f"{programs} program{'' if programs == 1 else 's'}",
        f"defined at {source['label']} line {source['line']}" if source else "",
        f"run from {call_site['label']} line {call_site['line']}" if call_site else "",
        "inside " + " \u203a ".join(kernel.path) if kernel.path else "",
        f"vmapped grid axes {', '.join(map(str, kernel.vmapped_dims))}"
        if kernel.vmapped_dims
        else "",
    ]
    return [fact for fact in facts if fact]


def _details(kernel: Kernel) -> list[str]:
    """Semantics, compiler params, cost, aliases and interpret mode: a line each."""
    details = []
    if kernel.dimension_semantics:
        details.append("dimension semantics: " + ", ".join(kernel.dimension_semantics))
    if kernel.compiler_params:
        params = ", ".join(f"{name}={value}" for name, value in kernel.compiler_params)
        details.append(f"compiler params ({kernel.backend or '?'}): {params}")
    cost = kernel.cost_estimate
    if cost:
        details.append(f"cost estimate: {cost.flops} flops, {cost.bytes_accessed} bytes")
    if kernel.input_output_aliases:
        pairs = ", ".join(f"{i}→{o}" for i, o in kernel.input_output_aliases)
        details.append(f"input/output aliases: {pairs}")
    if kernel.interpret:
        details.append(f"interpret: {kernel.interpret}")
    return details


def _kernel(
    kernel: Kernel, inspection: Inspection, max_conflicts: int = _MAX_CONFLICTS
) -> KernelModel:
    cost = kernel.cost_estimate
    allowed = where.kernel_files(inspection.kernels)
    source = where.location(kernel.source, allowed)
    call_site = where.location(kernel.call_site, allowed)
    return {
        "index": kernel.index,
        "name": kernel.name,
        "kind": kernel.kind,
        "kindText": kind_text(kernel),
        "grid": list(kernel.grid),
        "gridNames": list(kernel.grid_names) if kernel.grid_names else None,
        "programs": kernel.num_programs,
        "source": source,
        "callSite": call_site,
        "backend": kernel.backend,
        "params": [(name, str(value)) for name, value in kernel.compiler_params],
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
        "aliases": [(i, o) for i, o in kernel.input_output_aliases],
        "operands": [_operand(o) for o in kernel.operands],
        "races": _races(kernel, inspection, max_conflicts),
        "hints": _hints(inspection, kernel, masks=False),
        "fit": fitmodel.fit_model(inspection, kernel, compile=False),
        "facts": _facts(kernel, source, call_site),
        "details": _details(kernel),
    }


def payload(inspection: Inspection) -> OverviewPane:
    """The Kernels tab's view model (its payload: the widget's pane)."""
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


def respond(inspection: Inspection, body: dict[str, Any]) -> HintsModel | FitModel | ErrorPane:
    """Requests from the tab: hints with masks checked, or fit read from every chip.

    `{"kind": "hints", "kernel": k}`; `{"kind": "fit", "kernel": k}` (compiles the
    kernel for every chip, in parallel).
    """
    if body.get("kind") not in ("hints", "fit"):
        return {"error": f"unknown request {body.get('kind')!r}"}
    try:
        kernel = inspection.kernel(int(body.get("kernel", 0)))
    except (KeyError, ValueError) as error:
        return {"error": str(error)}
    if body.get("kind") == "fit":
        return fitmodel.fit_model(inspection, kernel, compile=True)
    return _hints(inspection, kernel, masks=True)


TAB = Tab("overview", "Kernels", payload, order=10, respond=respond)
