"""The inspector's header and problem banner, as data shared by widget and static HTML."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import messages

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


@dataclasses.dataclass(frozen=True)
class Problem:
    """What went wrong, as the banner shows it.

    Attributes:
        where: "Cell line 7" ("" when no line is known).
        summary: One sentence.
        hint: What to do ("" if nothing general).
        kind: The diagnosis kind, for tests and styling.
    """

    where: str
    summary: str
    hint: str = ""
    kind: str = ""

    def __post_init__(self) -> None:
        # The banner follows the rule of every message shown: bounded lines.
        object.__setattr__(self, "summary", messages.clip(self.summary, max_lines=6))
        object.__setattr__(self, "hint", messages.clip(self.hint, max_lines=4, max_chars=1200))

    def to_json(self) -> dict[str, str]:
        """The widget's form."""
        return dataclasses.asdict(self)


def header(inspection: Inspection) -> dict[str, Any]:
    """Name, backend, mode, kernels and check status, for the header."""
    result = inspection.result
    comparison = result.comparison if result else None
    found: dict[str, Any] = {
        "name": inspection.name,
        "backend": result.backend if result else inspection.backend,
        "mode": result.mode if result else "traced only",
        "kernels": [{"name": k.name, "grid": list(k.grid)} for k in inspection.kernels],
        "check": None if comparison is None or comparison.problem else comparison.ok,
    }
    if inspection.chip:
        count = len(inspection.kernels)
        found["badges"] = [
            found["backend"] + (f" \u00b7 {found['mode']}" if found["mode"] else ""),
            f"{count} kernel{'' if count == 1 else 's'}",
            chip_badge(inspection),
        ]
    return found


def chip_badge(inspection: Inspection) -> str:
    """What the kernels were traced for: "for H100 (the default without a GPU)"."""
    note = f" ({inspection.chip_note})" if inspection.chip_note else ""
    return f"for {inspection.chip}{note}"


def summary_text(inspection: Inspection, problem: Problem | None = None) -> str:
    """A plain-text summary with no timings or addresses, stable across runs."""
    lines = [f"pallaslab inspection of {inspection.name}"]
    for kernel in inspection.kernels:
        blocks = ", ".join(
            f"{o.label}{'' if o.role == 'scratch' else ' ' + str(o.block_shape)}"
            for o in kernel.operands
        )
        lines.append(f"  kernel {kernel.name}: grid {kernel.grid}; {blocks}")
    if not inspection.kernels:
        lines.append("  no Pallas kernels")
    if inspection.chip:
        lines.append(f"  traced {chip_badge(inspection)}")
    result = inspection.result
    if result is not None:
        lines.append(f"  ran on {result.backend} ({result.mode})")
        comparison = result.comparison
        if comparison is not None:
            verdict = "matches the reference" if comparison.ok else "DOES NOT match the reference"
            lines.append(f"  {verdict}")
        findings = [
            *(f"out of bounds: {o.describe(with_location=False)}" for o in result.out_of_bounds),
            *(f"leak: {leak.describe(with_location=False)}" for leak in result.leaks),
            *(f"race: {c.describe()}" for c in result.race_checks if c.confirmed),
            *(f"race: {r.describe(with_location=False)}" for r in result.interpreter_races),
        ]
        lines += [f"  {line}" for line in findings]
    if problem is not None:
        where = f"{problem.where}: " if problem.where else ""
        lines.append(f"  error: {where}{problem.summary}")
    return "\n".join(lines)
