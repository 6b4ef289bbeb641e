"""The Run tab: where and how the program ran, its outputs, and the reference check."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import sources
from pallaslab._src.records import Leak, OutOfBounds, RaceCheck, SourceLocation
from pallaslab._src.views import fmt, heatmap
from pallaslab._src.views.tabs import Payload, Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

INTERPRET_NOTE = (
    "CPU interpret mode: kernels ran through Pallas' interpreter, one program at a "
    "time. Results are faithful; times are not representative of GPU/TPU speed."
)
EMULATED_NOTE = (
    "CPU emulation: pallaslab's emulator ran each kernel's independent programs together "
    "and the rest in grid order, with the same results as Pallas' interpret mode. Times "
    "are not representative of GPU/TPU speed."
)
_NOTES = {
    "interpret": INTERPRET_NOTE,
    "emulated": EMULATED_NOTE,
    "emulated+interpret": EMULATED_NOTE + " Some kernels needed Pallas' interpreter (see below).",
}


# How the Run tab titles a leak, by cause.
LEAK_TITLES = {
    "padding": "Padding leak",
    "never-written": "Never-written memory",
    "uninitialized-output": "Uninitialized memory",
    "uninitialized-scratch": "Uninitialized memory",
    "masked-load-without-other": "Undefined lanes",
}


def _where(location: SourceLocation | None) -> dict[str, Any] | None:
    if location is None:
        return None
    return {"label": sources.label(location.file), "line": location.line}


def _leak(leak: Leak) -> dict[str, Any]:
    location = leak.location
    return {
        "title": LEAK_TITLES.get(leak.cause, "Leak"),
        "text": leak.describe(with_location=False),
        "kernel": leak.kernel,
        "output": leak.output,
        "source": leak.source,
        "cause": leak.cause,
        "tiles": [list(t) for t in leak.tiles[:256]],
        "where": (
            {"label": sources.label(location.file), "line": location.line}
            if location is not None
            else None
        ),
    }


def _out_of_bounds(found: OutOfBounds) -> dict[str, Any]:
    return {
        "text": found.describe(with_location=False),
        "kernel": found.kernel,
        "ref": found.ref,
        "access": found.access,
        "cause": found.cause,
        "programs": [list(p) for p in found.programs],
        "programCount": found.program_count,
        "where": _where(found.location),
    }


def _race_check(check: RaceCheck) -> dict[str, Any]:
    return {
        "text": check.describe(),
        "kernel": check.kernel,
        "backend": check.backend,
        "confirmed": check.confirmed,
        "tiles": [[output, list(tile)] for output, tile in check.tiles],
    }


def inputs_line(inspection: Inspection) -> str:
    """What the run ran on, when some inputs were made up: "" when all were given."""
    result = inspection.result
    if result is None or not result.seeded_inputs:
        return ""
    every = {a.path for a in inspection.args} <= set(result.seeded_inputs)
    which = "" if every else " " + ", ".join(result.seeded_inputs)
    return f"inputs{which}: seeded random, from shapes"


def payload(inspection: Inspection) -> Payload:
    """The Run tab's data."""
    result = inspection.result
    if result is None:
        message = (
            "Not run: name a call on the magic line to run it (e.g. `%%kernel add(x, y)`)."
            if not inspection.args and not inspection.outputs
            else "Not run (--no-run). Run it with `inspection.run(...)`."
        )
        return {"result": None, "message": message}
    comparison = result.comparison
    data: dict[str, Any] = {
        "backend": result.backend,
        "mode": result.mode,
        "seconds": fmt.seconds(result.seconds),
        "note": _NOTES.get(result.mode, ""),
        "inputs": inputs_line(inspection),
        "notices": list(result.notices),
        "leaks": [_leak(leak) for leak in result.leaks],
        "outOfBounds": [_out_of_bounds(o) for o in result.out_of_bounds],
        "raceChecks": [_race_check(c) for c in result.race_checks if c.orders],
        "outputs": [
            {
                "path": o.path,
                "type": fmt.array_type(o.dtype, o.shape),
                "preview": o.preview,
                "min": fmt.number(o.min),
                "max": fmt.number(o.max),
                "nan": o.nan_count,
                "inf": o.inf_count,
            }
            for o in result.outputs
        ],
        "comparison": None,
    }
    if comparison is not None:
        data["comparison"] = {
            "ok": comparison.ok,
            "maxAbs": fmt.number(comparison.max_abs_err),
            "maxRel": fmt.number(comparison.max_rel_err),
            "rtol": fmt.number(comparison.rtol),
            "atol": fmt.number(comparison.atol),
            "mismatched": comparison.mismatched,
            "problem": comparison.problem,
            # Outputs that differ (or hold NaN/Inf), block by block.
            "tiles": [
                heatmap.payload(t)
                for t in comparison.tiles
                if t.bad_tiles or t.nan_count or t.inf_count or t.reference_nonfinite
            ],
        }
    return {"result": data, "message": ""}


def static_html(inspection: Inspection) -> str:
    """The Run tab as HTML."""
    data = payload(inspection)
    result = data["result"]
    if result is None:
        return f"<p>{html.escape(data['message'])}</p>"
    parts = [
        f"<p>Ran on <b>{html.escape(result['backend'])}</b> ({html.escape(result['mode'])}) "
        f"in {html.escape(result['seconds'])}.</p>"
    ]
    if result["note"]:
        parts.append(f"<p class='pl-notice'>{html.escape(result['note'])}</p>")
    if result["inputs"]:
        parts.append(f"<p class='pl-facts'>{html.escape(result['inputs'])}</p>")
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(o[c]))}</td>"
            for c in ("path", "type", "preview", "min", "max", "nan", "inf")
        )
        + "</tr>"
        for o in result["outputs"]
    )
    parts.append(
        "<table><tr><th>output</th><th>type</th><th>values</th><th>min</th><th>max</th>"
        f"<th>NaN</th><th>Inf</th></tr>{rows}</table>"
    )
    parts.extend(f"<p class='pl-facts'>{html.escape(n)}</p>" for n in result["notices"])
    parts.extend(
        f"<p class='pl-warning'>{html.escape(_located(leak))}</p>" for leak in result["leaks"]
    )
    parts.extend(
        f"<p class='pl-warning'>{html.escape(_located(found, 'Out of bounds'))}</p>"
        for found in result["outOfBounds"]
    )
    for check in result["raceChecks"]:
        css = "pl-warning" if check["confirmed"] else "pl-facts"
        parts.append(f"<p class='{css}'>{html.escape(check['text'])}</p>")
    comparison = result["comparison"]
    if comparison is not None:
        verdict = "matches the reference" if comparison["ok"] else "DOES NOT match the reference"
        detail = comparison["problem"] or (
            f"max abs error {comparison['maxAbs']}, max rel error {comparison['maxRel']}, "
            f"{comparison['mismatched']} element(s) outside rtol={comparison['rtol']} "
            f"atol={comparison['atol']}"
        )
        parts.append(f"<p><b>{verdict}</b>: {html.escape(detail)}</p>")
        for tile in comparison.get("tiles", []):
            parts.append(f"<p>{html.escape(heatmap.describe(tile))}</p>")
            parts.append(heatmap.static_svg(tile))
            if tile["note"]:
                parts.append(f"<p class='pl-notice'>{html.escape(tile['note'])}</p>")
    return "".join(parts)


def _located(finding: dict[str, Any], title: str = "") -> str:
    where = finding["where"]
    prefix = f"{where['label']} line {where['line']}: " if where else ""
    return f"{title or finding.get('title', 'Leak')} — {prefix}{finding['text']}"


TAB = Tab("run", "Run", payload, static_html, order=60)
