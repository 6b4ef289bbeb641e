"""Plain records of what changed between two inspections: `pallaslab.diff(a, b)`.

A `Diff` holds one kernel of each side: the IR texts aligned line by line (with the
source lines of both sides), and every figure that differs (blocks, grid, compiler
params, registers, occupancy, VMEM, HBM traffic, check results, timings), each as a
`Delta`. Built by `pallaslab._src.core.diffing`; shown by `views/diffview.py`. Only
Python values here, so a view can render a diff from its fields alone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Literal

from pallaslab._src.base import display, words
from pallaslab._src.base import sources as base_sources
from pallaslab._src.base.textdiff import Op

if TYPE_CHECKING:
    import pandas as pd

Value = float | int | str | bool | None
Better = Literal["lower", "higher", ""]
#: Printed before decreases: the minus sign, not a hyphen.
MINUS = "\u2212"
# Groups of figures, in the order they are listed: what was changed comes first
# (the Diff tab puts a check that changed before them).
GROUPS = ("config", "kernel", "resources", "tiles", "check", "timing")
#: Characters of one value in the summary line at most (a changed constant may be MiBs).
SUMMARY_VALUE_CHARS = 60
#: Changes the summary names before "and N more".
SUMMARY_CAUSES = 4
#: Characters of one value in `Diff.text()` at most.
TEXT_VALUE_CHARS = 200


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


@dataclasses.dataclass(frozen=True)
class LinePair:
    """One row of an aligned pair of texts.

    Attributes:
        op: "equal" (the same once value names are ignored), "replace", "delete"
            (only in a) or "insert" (only in b).
        a_line: The line in a's text (1-based), None for an insert.
        b_line: The line in b's text (1-based), None for a delete.
        a_text: a's line as printed ("" for an insert).
        b_text: b's line as printed ("" for a delete).
        a_sources: The source lines a's line comes from, as (file, line).
        b_sources: The source lines b's line comes from.
    """

    op: Op
    a_line: int | None
    b_line: int | None
    a_text: str = ""
    b_text: str = ""
    a_sources: tuple[tuple[str, int], ...] = ()
    b_sources: tuple[tuple[str, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class IrDiff:
    """One IR of both sides, aligned.

    Attributes:
        title: What the texts are ("kernel jaxpr", "Triton IR (TTIR)").
        a_target: a's target name ("jaxpr" for the kernel's jaxpr).
        b_target: b's target name.
        language: The texts' language, for highlighting.
        pairs: The aligned rows, in order.
        a_error: Why a's side could not be produced ("" when it was).
        b_error: Why b's side could not be produced.
    """

    title: str
    a_target: str
    b_target: str
    language: str
    pairs: tuple[LinePair, ...] = ()
    a_error: str = ""
    b_error: str = ""

    @property
    def changed(self) -> int:
        """Rows that differ."""
        return sum(p.op != "equal" for p in self.pairs)

    @property
    def counts(self) -> dict[str, int]:
        """Rows per op: equal, replace, delete, insert."""
        found = dict.fromkeys(("equal", "replace", "delete", "insert"), 0)
        for pair in self.pairs:
            found[pair.op] += 1
        return found

    def hunk_spans(self, context: int = 2) -> list[tuple[int, int]]:
        """(start, stop) indices into `pairs` of each run of changes with its context."""
        spans: list[list[int]] = []
        for k, pair in enumerate(self.pairs):
            if pair.op == "equal":
                continue
            lo, hi = max(0, k - context), min(len(self.pairs), k + context + 1)
            if spans and lo <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], hi)
            else:
                spans.append([lo, hi])
        return [(lo, hi) for lo, hi in spans]

    def hunks(self, context: int = 2) -> list[tuple[LinePair, ...]]:
        """Runs of changed rows with `context` equal rows around each."""
        return [self.pairs[lo:hi] for lo, hi in self.hunk_spans(context)]

    def describe(self) -> str:
        """One line: how much changed."""
        if self.a_error or self.b_error:
            return f"{self.title}: " + "; ".join(
                f"{side} failed: {error}"
                for side, error in (("a", self.a_error), ("b", self.b_error))
                if error
            )
        counts = self.counts
        if not self.changed:
            return f"{self.title}: no change ({counts['equal']} lines)"
        parts = [
            f"{counts[op]} {word}"
            for op, word in (("replace", "changed"), ("insert", "added"), ("delete", "removed"))
            if counts[op]
        ]
        return f"{self.title}: {', '.join(parts)} of {len(self.pairs)} lines"


@dataclasses.dataclass(frozen=True)
class Delta:
    """One figure on both sides.

    Attributes:
        group: "config" (a knob the user set), "kernel" (blocks, grid, compiler
            params, dtypes), "resources" (registers, occupancy, VMEM, bundles),
            "tiles" (HBM traffic, working set, reuse), "check", "timing".
        name: The figure ("registers per thread", "HBM traffic").
        a: a's value (None when a has none).
        b: b's value.
        unit: "B" (bytes), "%", "ms", "x", "FLOP/B" or "".
        better: Which way is better: "lower", "higher", or "" when neither.
        note: A caveat ("CPU emulation: not representative of GPU/TPU speed").
        headline: Whether a change of this figure belongs in the one-line summary
            (registers, occupancy, HBM traffic, time ...; not each operand's share).
        good: For a figure that is right or wrong rather than more or less, the
            right value (a check's "matches").
        bad: The wrong value ("differs"): from `bad` to `good` is a fix, from
            `good` to `bad` a regression (a side not checked is neither).
    """

    group: str
    name: str
    a: Value
    b: Value
    unit: str = ""
    better: Better = ""
    note: str = ""
    headline: bool = False
    good: Value = None
    bad: Value = None

    @property
    def changed(self) -> bool:
        """Whether the two values differ."""
        if _numeric(self.a) and _numeric(self.b):
            return not math.isclose(float(self.a), float(self.b), rel_tol=1e-9)  # type: ignore[arg-type]
        return self.a != self.b

    @property
    def ratio(self) -> float | None:
        """The ratio b / a, for numbers (None otherwise, or when a is 0)."""
        if _numeric(self.a) and _numeric(self.b) and self.a:
            return float(self.b) / float(self.a)  # type: ignore[arg-type]
        return None

    @property
    def change(self) -> str:
        """The change in words: "+60%", "-38%" (a minus sign), "ok → wrong"."""
        if not self.changed:
            return ""
        if self.unit == "%" and _numeric(self.a) and _numeric(self.b):
            points = float(self.b) - float(self.a)  # type: ignore[arg-type]
            return f"{'+' if points >= 0 else MINUS}{abs(points):.0f} points"
        ratio = self.ratio
        if ratio is not None:
            return _percent(ratio - 1.0)
        return f"{format_value(self.a, self.unit)} → {format_value(self.b, self.unit)}"

    @property
    def outcome(self) -> Literal["fix", "regression", ""]:
        """For a right-or-wrong figure: "fix" (b is right, a was not), "regression", or ""."""
        if self.good is None or self.bad is None:
            return ""
        if (self.a, self.b) == (self.bad, self.good):
            return "fix"
        if (self.a, self.b) == (self.good, self.bad):
            return "regression"
        return ""

    def text(self, limit: int = SUMMARY_VALUE_CHARS) -> str:
        """`registers per thread 80→128` (values past `limit` characters cut)."""
        a, b = (clip(format_value(v, self.unit), limit) for v in (self.a, self.b))
        return f"{self.name} {a}→{b}"


@dataclasses.dataclass(frozen=True)
class Diff:
    """Two inspections (one kernel of each) side by side.

    Attributes:
        a_name: What a is ("matmul", "matmul @ ptx:sm_80").
        b_name: What b is.
        a_kernel: a's kernel's name.
        b_kernel: b's kernel's name.
        chip: The chip resources and tile figures are read against ("H100").
        deltas: Every figure of both sides, changed or not, grouped (see `GROUPS`).
        irs: The IR texts aligned: the kernel's jaxpr, then the lowered target.
        notes: What could not be compared, and why.
    """

    a_name: str
    b_name: str
    a_kernel: str
    b_kernel: str
    chip: str
    deltas: tuple[Delta, ...] = ()
    irs: tuple[IrDiff, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[Delta, ...]:
        """The figures that differ; a fix or a regression first."""
        changed = [d for d in self.deltas if d.changed]
        return tuple(sorted(changed, key=lambda d: not d.outcome))

    @property
    def verdict(self) -> Literal["fix", "regression", ""]:
        """Whether b fixes a, breaks it, or neither.

        "fix": b's check matches where a's differed; "regression": the other way; "".
        """
        found = {d.outcome for d in self.deltas} - {""}
        if "regression" in found:
            return "regression"
        return "fix" if "fix" in found else ""

    def delta(self, name: str) -> Delta:
        """The figure called `name`.

        Raises:
            KeyError: Naming the figures, when there is none called so.
        """
        for d in self.deltas:
            if d.name == name:
                return d
        raise KeyError(f"no figure {name!r}; figures: {', '.join(d.name for d in self.deltas)}")

    @property
    def summary(self) -> str:
        """Each difference in one line: what changed, then what it did.

        Correctness leads: a fix ("fixed: check differs → matches") or a regression
        ("regression: check matches → differs") comes first, then what the user
        changed (the config, else the kernel: blocks, index maps, grid ...), then
        what it did.

        Example: "BLOCK_K 32→64: registers 80→128, occupancy on H100 25%→12%, HBM
        traffic -38%, 1.3x faster" (with a minus sign, U+2212).
        """
        changes = self.changes
        outcomes = [d for d in changes if d.outcome]
        lead = ", ".join(
            f"{'fixed' if d.outcome == 'fix' else 'regression'}: {d.text()}" for d in outcomes
        )
        causes = [d for d in changes if d.group == "config"] or [
            d for d in changes if d.group == "kernel"
        ]
        head = ", ".join(d.text() for d in causes[:SUMMARY_CAUSES])
        if len(causes) > SUMMARY_CAUSES:
            head += f" and {len(causes) - SUMMARY_CAUSES} more"
        if not head:
            changed_irs = [ir for ir in self.irs if ir.changed]
            head = (
                f"{changed_irs[0].title} changed ({changed_irs[0].changed} lines)"
                if changed_irs
                else ""
            )
        effects = [
            _effect(d)
            for d in changes
            if d.headline and d.group not in ("config", "kernel") and not d.outcome
        ]
        effects = [e for e in effects if e]
        if lead:
            return "; ".join(p for p in (lead, head, ", ".join(effects)) if p)
        if not head and not effects:
            return "no difference: same blocks, grid, params, IR and figures"
        if not effects:
            return head + ": no change in resources, traffic, check or timing"
        return (head + ": " if head else "") + ", ".join(effects)

    def text(self, context: int = 2, max_rows: int = 40) -> str:
        """The diff as plain text: the summary, the figures that differ, the IR hunks."""
        lines = [f"diff {self.a_name} → {self.b_name}", self.summary, ""]
        changed = self.changes
        if changed:
            width = max(len(d.name) for d in changed)
            for d in changed:
                a, b = (clip(format_value(v, d.unit), TEXT_VALUE_CHARS) for v in (d.a, d.b))
                note = f"  ({d.note})" if d.note else ""
                change = d.change if d.ratio is not None or d.unit == "%" else ""
                lines.append(f"  {d.name:<{width}}  {a} → {b}  {change}{note}".rstrip())
            lines.append("")
        for ir in self.irs:
            lines.append(ir.describe())
            lines.extend(_hunks_text(ir, context, max_rows))
            lines.append("")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines).rstrip()

    def to_frame(self, what: Literal["figures", "lines"] = "figures") -> pd.DataFrame:
        """A DataFrame for scripts.

        Args:
            what: "figures": one row per figure (group, figure, a, b, change, ratio,
                unit, better, changed); "lines": one row per aligned IR line (ir, op,
                a_line, b_line, a_text, b_text, a_source, b_source).
        """
        import pandas as pd  # noqa: PLC0415 - imported on use: `import pallaslab` stays light

        if what == "lines":
            rows = [
                {
                    "ir": ir.title,
                    "op": p.op,
                    "a_line": p.a_line,
                    "b_line": p.b_line,
                    "a_text": p.a_text,
                    "b_text": p.b_text,
                    "a_source": _sources_text(p.a_sources),
                    "b_source": _sources_text(p.b_sources),
                }
                for ir in self.irs
                for p in ir.pairs
            ]
            return pd.DataFrame(rows, columns=list(LINE_COLUMNS))
        if what != "figures":
            raise ValueError(f"what must be 'figures' or 'lines', not {what!r}")
        return pd.DataFrame(
            [
                {
                    "group": d.group,
                    "figure": d.name,
                    "a": d.a,
                    "b": d.b,
                    "change": d.change,
                    "ratio": d.ratio,
                    "unit": d.unit,
                    "better": d.better,
                    "changed": d.changed,
                }
                for d in self.deltas
            ],
            columns=list(FIGURE_COLUMNS),
        )

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("diff", self, **kwargs)


FIGURE_COLUMNS = ("group", "figure", "a", "b", "change", "ratio", "unit", "better", "changed")
LINE_COLUMNS = ("ir", "op", "a_line", "b_line", "a_text", "b_text", "a_source", "b_source")


def _numeric(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _percent(fraction: float) -> str:
    if abs(fraction) < 0.005:
        return "±0%"
    sign = "+" if fraction > 0 else MINUS
    return f"{sign}{abs(fraction) * 100:.0f}%"


def format_value(value: Value, unit: str = "") -> str:
    """A figure for people: bytes in binary units, percentages, 4 digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if unit == "B":
        return words.nbytes(value)
    if unit == "%":
        return f"{value:.0f}%"
    if isinstance(value, int):
        return str(value)
    text = f"{value:.3g}"
    return f"{text} {unit}".strip() if unit not in ("x",) else f"{text}x"


def _effect(delta: Delta) -> str:
    """How a figure enters the one-line summary."""
    if delta.group == "timing" and delta.name == "time" and not delta.note:
        ratio = delta.ratio
        if ratio:
            speedup = 1.0 / ratio
            if abs(speedup - 1.0) < 0.02:
                return "same speed"
            return f"{speedup:.2g}x faster" if speedup > 1 else f"{ratio:.2g}x slower"
    if delta.group == "timing":
        return ""  # labelled timings (CPU emulation) claim no speedup
    if delta.name.startswith("HBM traffic") and delta.ratio is not None:
        return f"{delta.name} {_percent(delta.ratio - 1.0)}"
    return delta.text()


def _sources_text(sources: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(base_sources.location(file, line) for file, line in sources)


def _hunks_text(ir: IrDiff, context: int, max_rows: int) -> list[str]:
    """An IR's changes as unified-diff-like rows, at most `max_rows` changed rows."""
    lines: list[str] = []
    shown = 0
    total = ir.changed
    for hunk in ir.hunks(context):
        first = next((p for p in hunk if p.a_line or p.b_line), hunk[0])
        lines.append(f"  @@ a {first.a_line or '-'}, b {first.b_line or '-'} @@")
        for pair in hunk:
            if shown >= max_rows and pair.op != "equal":
                lines.append(f"  … {total - shown} more changed rows")
                return lines
            lines.extend(_pair_text(pair))
            shown += pair.op != "equal"
    return lines


def _pair_text(pair: LinePair) -> list[str]:
    a, b = (clip(t.strip(), TEXT_VALUE_CHARS * 5) for t in (pair.a_text, pair.b_text))
    if pair.op == "equal":
        return [f"    {b}"]
    rows = []
    if pair.op in ("delete", "replace"):
        rows.append(f"  - {a}")
    if pair.op in ("insert", "replace"):
        rows.append(f"  + {b}")
    return rows
