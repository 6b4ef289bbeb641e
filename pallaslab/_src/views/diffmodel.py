"""The Diff tab's view model: a `Diff` record as the widget and the static page draw it.

One model, two renderers: `labextension/src/widget/tabs/diff.ts` (live) and
`views/statichtml/diff.py` (saved notebooks, scripts' HTML). Long IRs are cut to
their changed rows with `CONTEXT` equal rows around each (the rest become `gap`
rows), and to a character budget per IR, so the pane stays far under the widget's
2 MiB message limit whatever the kernel; `Diff.to_frame("lines")` keeps every row.
"""

from __future__ import annotations

from typing import Literal

from pallaslab._src.base import sources
from pallaslab._src.records.diffs import GROUPS, Delta, Diff, IrDiff, LinePair, format_value
from pallaslab._src.views.contracts import (
    DiffFigure,
    DiffGroup,
    DiffIr,
    DiffPane,
    DiffRow,
    DiffSource,
)

#: Equal rows drawn around each change.
CONTEXT = 3
#: Characters of IR text (both sides) drawn per IR at most; the rest is counted.
IR_CHARS = 300_000
#: A line longer than this is cut in the view (the record keeps it whole).
MAX_LINE = 1000

GROUP_TITLES = {
    "config": "Config",
    "kernel": "Kernel",
    "resources": "Resources",
    "tiles": "Figures of merit",
    "check": "Check",
    "timing": "Timing",
}
# Groups that list what changed only: what stayed the same there is the bulk.
_CHANGES_ONLY = frozenset({"config", "kernel"})


#: Where a figure's colour gives way to correctness (see `verdict`).
FIX_NOTE = "b is right where a was wrong: judged against that, not on its own"
REGRESSION_NOTE = "b is wrong where a was right"


def diff_pane(diff: Diff) -> DiffPane:
    """The Diff tab's model of a diff."""
    outcome = diff.verdict
    return {
        "aName": diff.a_name,
        "bName": diff.b_name,
        "aKernel": diff.a_kernel,
        "bKernel": diff.b_kernel,
        "chip": diff.chip,
        "summary": _cut(diff.summary),
        "verdict": {"fix": "better", "regression": "worse"}.get(outcome, ""),  # type: ignore[typeddict-item]
        "groups": _groups(diff.deltas, outcome),
        "irs": [_ir(ir) for ir in diff.irs],
        "notes": [_cut(n) for n in diff.notes],
    }


def _groups(deltas: tuple[Delta, ...], outcome: str = "") -> list[DiffGroup]:
    groups: list[DiffGroup] = []
    # Correctness leads: a check that went from matching to not (or back) comes first.
    order = ("check", *(g for g in GROUPS if g != "check")) if outcome else GROUPS
    for group in order:
        # A figure neither side has (bundles without a TPU compile) says nothing.
        found = [d for d in deltas if d.group == group and (d.a, d.b) != (None, None)]
        shown = [d for d in found if d.changed or group not in _CHANGES_ONLY]
        if not found:
            continue
        groups.append(
            {
                "id": group,
                "title": GROUP_TITLES[group],
                "figures": [_figure(d, outcome) for d in shown],
                "unchanged": len(found) - len(shown),
            }
        )
    return groups


def _figure(delta: Delta, outcome: str = "") -> DiffFigure:
    found = verdict(delta, outcome)
    note = delta.note
    if verdict(delta) and not found:  # a colour correctness took away: say why
        note = FIX_NOTE if outcome == "fix" else REGRESSION_NOTE
    return {
        "name": delta.name,
        "a": _cut(format_value(delta.a, delta.unit)),
        "b": _cut(format_value(delta.b, delta.unit)),
        "change": delta.change if delta.ratio is not None or delta.unit == "%" else "",
        "changed": delta.changed,
        "verdict": found,
        "note": _cut(note),
    }


def verdict(delta: Delta, outcome: str = "") -> Literal["better", "worse", ""]:
    """Whether b is "better" or "worse" than a ("" when unchanged or neither way).

    A fix is better and a regression worse, whatever else changed. Against either,
    a figure's own direction does not colour it: a fix that moves more bytes is
    not worse (the wrong kernel moved too few), a regression that moves fewer is
    not better.

    Args:
        delta: The figure.
        outcome: The diff's `verdict` ("fix", "regression" or "").
    """
    if delta.outcome:
        return "better" if delta.outcome == "fix" else "worse"
    a, b = delta.a, delta.b
    if outcome or not delta.changed or not delta.better or a is None or b is None:
        return ""
    if isinstance(a, str) or isinstance(b, str):
        return ""
    lower = float(b) < float(a)
    return "better" if lower == (delta.better == "lower") else "worse"


def _ir(ir: IrDiff) -> DiffIr:
    rows: list[DiffRow] = []
    used = changed_drawn = previous_end = 0
    full = False
    for start, stop in ir.hunk_spans(CONTEXT):
        if start > previous_end:
            rows.append(_gap(start - previous_end))
        for pair in ir.pairs[start:stop]:
            if used > IR_CHARS:
                full = True
                break
            rows.append(_row(pair))
            used += len(rows[-1]["aText"]) + len(rows[-1]["bText"])
            changed_drawn += pair.op != "equal"
        if full:
            break
        previous_end = stop
    if not full and rows and previous_end < len(ir.pairs):
        rows.append(_gap(len(ir.pairs) - previous_end))
    return {
        "title": ir.title,
        "aTarget": ir.a_target,
        "bTarget": ir.b_target,
        "language": ir.language,
        "description": ir.describe(),
        "aError": ir.a_error,
        "bError": ir.b_error,
        "changed": ir.changed,
        "lines": len(ir.pairs),
        "rows": rows,
        "more": ir.changed - changed_drawn,
    }


def _gap(count: int) -> DiffRow:
    return {
        "op": "gap",
        "aLine": None,
        "bLine": None,
        "aText": "",
        "bText": "",
        "aSources": [],
        "bSources": [],
        "hidden": count,
    }


def _row(pair: LinePair) -> DiffRow:
    return {
        "op": pair.op,
        "aLine": pair.a_line,
        "bLine": pair.b_line,
        "aText": _cut(pair.a_text),
        "bText": _cut(pair.b_text),
        "aSources": _sources(pair.a_sources),
        "bSources": _sources(pair.b_sources),
        "hidden": 0,
    }


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else f"{line[:MAX_LINE]} … ({len(line) - MAX_LINE} more)"


def _sources(found: tuple[tuple[str, int], ...]) -> list[DiffSource]:
    shown: list[DiffSource] = []
    for file, line in found:
        if sources.is_internal_file(file):
            continue  # pallaslab's and JAX's own lines are no user's source
        text = sources.lines(file)
        shown.append(
            {
                "label": sources.label(file),
                "line": line,
                "text": _cut(text[line - 1].strip()) if 0 < line <= len(text) else "",
            }
        )
    return shown
