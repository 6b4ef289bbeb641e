"""The Run tab: where and how the program ran, its outputs, and the reference check."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from pallaslab._src.records import InterpreterRace, Leak, OutOfBounds, RaceCheck
from pallaslab._src.views import fmt, heatmap, where
from pallaslab._src.views.contracts import (
    ComparisonModel,
    InterpreterRaceModel,
    LeakModel,
    OutOfBoundsModel,
    RaceCheckModel,
    RunPane,
    RunResultModel,
)
from pallaslab._src.views.tabs import Tab

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
MOSAIC_GPU_NOTE = (
    "CPU interpretation: JAX's Mosaic GPU interpreter ran the kernels on the CPU, simulating "
    "their threads (warpgroups), shared memory, barriers and TMA copies, with its race "
    "detector on. Results are a GPU's; times are not representative of GPU speed."
)
_NOTES = {
    "interpret": INTERPRET_NOTE,
    "mosaic-gpu-interpret": MOSAIC_GPU_NOTE,
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


def _leak(leak: Leak, allowed: Collection[str]) -> LeakModel:
    return {
        "title": LEAK_TITLES.get(leak.cause, "Leak"),
        "text": leak.describe(with_location=False),
        "kernel": leak.kernel,
        "output": leak.output,
        "source": leak.source,
        "cause": leak.cause,
        "tiles": [list(t) for t in leak.tiles[:256]],
        "where": where.location(leak.location, allowed),
    }


def _out_of_bounds(found: OutOfBounds, allowed: Collection[str]) -> OutOfBoundsModel:
    return {
        "text": found.describe(with_location=False),
        "kernel": found.kernel,
        "ref": found.ref,
        "access": found.access,
        "cause": found.cause,
        "programs": [list(p) for p in found.programs],
        "programCount": found.program_count,
        "where": where.location(found.location, allowed),
    }


def _interpreter_race(race: InterpreterRace, allowed: Collection[str]) -> InterpreterRaceModel:
    return {
        "text": race.describe(with_location=False),
        "kernel": race.kernel,
        "memory": race.memory,
        "where": where.location(race.location, allowed),
        "otherWhere": where.location(race.other_location, allowed),
    }


def _race_check(check: RaceCheck) -> RaceCheckModel:
    return {
        "text": check.describe(),
        "kernel": check.kernel,
        "backend": check.backend,
        "confirmed": check.confirmed,
        "tiles": [(output, list(tile)) for output, tile in check.tiles],
    }


def inputs_line(inspection: Inspection) -> str:
    """What the run ran on, when some inputs were made up: "" when all were given."""
    result = inspection.result
    if result is None or not result.seeded_inputs:
        return ""
    every = {a.path for a in inspection.args} <= set(result.seeded_inputs)
    which = "" if every else " " + ", ".join(result.seeded_inputs)
    return f"inputs{which}: seeded random, from shapes"


def payload(inspection: Inspection) -> RunPane:
    """The Run tab's view model."""
    result = inspection.result
    if result is None:
        if inspection.not_run:
            message = f"Not run: {inspection.not_run}."
        elif not inspection.args and not inspection.outputs:
            message = "Not run: name a call on the magic line to run it (e.g. %%kernel add(x, y))."
        else:
            message = "Not run: only traced. Run it with inspection.run(...)."
        return {"result": None, "message": message}
    allowed = where.kernel_files(inspection.kernels)
    comparison = result.comparison
    data: RunResultModel = {
        "backend": result.backend,
        "mode": result.mode,
        "seconds": fmt.seconds(result.seconds),
        "note": _NOTES.get(result.mode, ""),
        "inputs": inputs_line(inspection),
        "notices": list(result.notices),
        "leaks": [_leak(leak, allowed) for leak in result.leaks],
        "outOfBounds": [_out_of_bounds(o, allowed) for o in result.out_of_bounds],
        "raceChecks": [_race_check(c) for c in result.race_checks if c.orders],
        "interpreterRaces": [_interpreter_race(r, allowed) for r in result.interpreter_races],
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
        found: ComparisonModel = {
            "ok": comparison.ok,
            "maxAbs": fmt.number(comparison.max_abs_err),
            "maxRel": fmt.number(comparison.max_rel_err),
            "rtol": fmt.number(comparison.rtol),
            "atol": fmt.number(comparison.atol),
            "mismatched": comparison.mismatched,
            "problem": comparison.problem or "",
            "verdict": "✓ matches the reference"
            if comparison.ok
            else "✗ does not match the reference",
            "detail": "",
            # Outputs that differ (or hold NaN/Inf), block by block.
            "tiles": [
                heatmap.payload(t)
                for t in comparison.tiles
                if t.bad_tiles or t.nan_count or t.inf_count or t.reference_nonfinite
            ],
        }
        found["detail"] = found["problem"] or (
            f"max abs error {found['maxAbs']}, max rel error {found['maxRel']}, "
            f"{found['mismatched']} element(s) outside rtol={found['rtol']} atol={found['atol']}"
        )
        data["comparison"] = found
    return {"result": data, "message": ""}


TAB = Tab("run", "Run", payload, order=60)
