"""A `Diff` as static HTML: the summary, the figures that changed, the IRs side by side.

Static (no widget): it reads the same in a live kernel, a saved notebook and on
GitHub. Every text is escaped; styles are inline, since front ends may strip
`<style>`. The inspector's Diff tab will render the same `Diff` record.
"""

from __future__ import annotations

import html
from typing import Any

from pallaslab._src.base import sources
from pallaslab._src.records.diffs import Diff, IrDiff, LinePair, format_value

# Rows of one IR's side-by-side table (hunks beyond are counted, not drawn).
MAX_IR_ROWS = 400
_CELL = "border:1px solid #d1d9e0;padding:1px 6px;text-align:left;vertical-align:top"
_CODE = f"{_CELL};font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap"
_DIM = "color:#6e7781"
_TINTS = {
    "delete": ("#ffebe9", ""),
    "insert": ("", "#dafbe1"),
    "replace": ("#fff8c5", "#fff8c5"),
    "equal": ("", ""),
}


def bundle(diff: Diff, **_: Any) -> dict[str, Any]:
    """The Jupyter mime bundle: HTML, and the plain text for other front ends."""
    return {"text/plain": diff.text(), "text/html": static_html(diff)}


def static_html(diff: Diff, context: int = 3) -> str:
    """The diff as one self-contained, escaped HTML block."""
    esc = html.escape
    parts = [
        "<div class='pallaslab-static pallaslab-diff' style='font-family:system-ui,"
        "sans-serif;font-size:13px;border:1px solid #d1d9e0;border-radius:4px;padding:6px 10px'>",
        f"<div><b>pallaslab diff</b> <code>{esc(diff.a_name)}</code> → "
        f"<code>{esc(diff.b_name)}</code> <span style='{_DIM}'>· kernel "
        f"{esc(_pair_name(diff.a_kernel, diff.b_kernel))} · figures for {esc(diff.chip)}"
        "</span></div>",
        f"<p class='pl-diff-summary' style='margin:6px 0;font-weight:600'>{esc(diff.summary)}</p>",
    ]
    changed = diff.changes
    if changed:
        parts.append(_figures_table(changed))
    parts.extend(_ir_section(ir, context) for ir in diff.irs)
    parts.extend(f"<p style='margin:4px 0;{_DIM}'>Note: {esc(n)}</p>" for n in diff.notes)
    parts.append("</div>")
    return "".join(parts)


def _pair_name(a: str, b: str) -> str:
    return a if a == b else f"{a} → {b}"


def _figures_table(deltas: tuple[Any, ...]) -> str:
    esc = html.escape
    head = "".join(f"<th style='{_CELL}'>{h}</th>" for h in ("figure", "a", "b", "change"))
    rows = []
    for d in deltas:
        change = d.change if d.ratio is not None or d.unit == "%" else ""
        note = f" <span style='{_DIM}'>({esc(d.note)})</span>" if d.note else ""
        rows.append(
            "<tr>"
            f"<td style='{_CELL}'>{esc(d.name)}</td>"
            f"<td style='{_CELL}'>{esc(format_value(d.a, d.unit))}</td>"
            f"<td style='{_CELL}'>{esc(format_value(d.b, d.unit))}</td>"
            f"<td style='{_CELL}'>{esc(change)}{note}</td>"
            "</tr>"
        )
    return (
        "<table class='pl-diff-figures' style='border-collapse:collapse;margin:4px 0'>"
        f"<tr>{head}</tr>{''.join(rows)}</table>"
    )


def _ir_section(ir: IrDiff, context: int) -> str:
    esc = html.escape
    title = f"<summary><b>{esc(ir.describe())}</b></summary>"
    if ir.a_error or ir.b_error or not ir.changed:
        return f"<details>{title}</details>"
    head = (
        f"<th style='{_CELL}'>a</th><th style='{_CELL}'>source</th>"
        f"<th style='{_CELL}'>{esc(ir.a_target)}</th><th style='{_CELL}'>b</th>"
        f"<th style='{_CELL}'>source</th><th style='{_CELL}'>{esc(ir.b_target)}</th>"
    )
    rows: list[str] = []
    drawn = changed_drawn = previous_end = 0
    for start, stop in ir.hunk_spans(context):
        if start > previous_end:
            rows.append(_gap(start - previous_end))
        for pair in ir.pairs[start:stop]:
            if drawn >= MAX_IR_ROWS:
                rows.append(
                    f"<tr><td colspan='6' style='{_CELL};{_DIM}'>… {ir.changed - changed_drawn} "
                    "more changed lines: diff.to_frame('lines') has every row</td></tr>"
                )
                return _table(title, head, rows)
            rows.append(_row(pair))
            drawn += 1
            changed_drawn += pair.op != "equal"
        previous_end = stop
    if previous_end < len(ir.pairs):
        rows.append(_gap(len(ir.pairs) - previous_end))
    return _table(title, head, rows)


def _table(title: str, head: str, rows: list[str]) -> str:
    return (
        f"<details open>{title}<table class='pl-diff-ir' style='border-collapse:collapse;"
        f"margin:4px 0'><tr>{head}</tr>{''.join(rows)}</table></details>"
    )


def _gap(count: int) -> str:
    return (
        f"<tr><td colspan='6' style='{_CELL};{_DIM}'>… {count} equal "
        f"line{'s' if count != 1 else ''}</td></tr>"
    )


def _row(pair: LinePair) -> str:
    esc = html.escape
    tint_a, tint_b = _TINTS[pair.op]
    style_a = f"{_CODE};background:{tint_a}" if tint_a else _CODE
    style_b = f"{_CODE};background:{tint_b}" if tint_b else _CODE
    return (
        f"<tr class='pl-diff-{pair.op}'>"
        f"<td style='{_CELL};{_DIM}'>{'' if pair.a_line is None else pair.a_line}</td>"
        f"<td style='{_CELL};{_DIM}'>{esc(_sources(pair.a_sources))}</td>"
        f"<td style='{style_a}'>{esc(pair.a_text)}</td>"
        f"<td style='{_CELL};{_DIM}'>{'' if pair.b_line is None else pair.b_line}</td>"
        f"<td style='{_CELL};{_DIM}'>{esc(_sources(pair.b_sources))}</td>"
        f"<td style='{style_b}'>{esc(pair.b_text)}</td>"
        "</tr>"
    )


def _sources(found: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{sources.label(file)}:{line}" for file, line in found)
