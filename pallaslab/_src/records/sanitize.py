"""Records of `pytest --pallaslab`: every kernel a test suite ran, checked or not, and why.

One `SanitizedCall` per distinct program (a kernel as lowered, with its operand types),
with the test that first ran it, how it was checked and what was found; a
`SanitizerReport` gathers them for the session and writes itself as the terminal
summary, JSON and JUnit XML. Plain data; the core fills it in.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any, Literal
from xml.etree import ElementTree

from pallaslab._src.records.kernels import SourceLocation

# The checks, by the names `--pallaslab=...` takes.
CHECKS = ("races", "bounds", "uninit", "emulate")
# The hardware whose race rules apply to kernels that say neither (`--pallaslab-hardware`).
HARDWARE = ("gpu", "tpu")
Status = Literal["checked", "refused", "crashed"]
# What a finding is: a race between programs that write different values, programs that
# write the same values to the same elements (benign, wasted work), a load or store
# outside its block, padding that reaches an output, memory read before anything wrote
# it, and the emulator disagreeing with what the test computed.
FINDING_KINDS = (
    "race",
    "same-value-writes",
    "out-of-bounds",
    "padding",
    "uninitialized",
    "disagreement",
)


@dataclasses.dataclass(frozen=True)
class SanitizerFinding:
    """One problem in one kernel, at a source line, found while a test ran it.

    Attributes:
        kind: One of `FINDING_KINDS`.
        check: The check that found it (one of `CHECKS`).
        kernel: The kernel's name.
        message: What was found, in one or two sentences.
        location: The source line to look at (the load, the store, the index map ...),
            else the kernel's definition; None when unknown.
        nodeid: The test that ran the kernel (pytest's node id).
        severity: "error", or "warning" for what is legal but wasteful (programs
            writing the same values to the same elements).
        backend: For races, whose rules ("gpu", "tpu").
    """

    kind: str
    check: str
    kernel: str
    message: str
    location: SourceLocation | None
    nodeid: str
    severity: str = "error"
    backend: str = ""

    def where(self) -> str:
        """`file:line` of the finding ("" when unknown)."""
        return str(self.location) if self.location else ""

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready values."""
        return {
            "kind": self.kind,
            "check": self.check,
            "severity": self.severity,
            "kernel": self.kernel,
            "backend": self.backend,
            "file": self.location.file if self.location else None,
            "line": self.location.line if self.location else None,
            "test": self.nodeid,
            "message": self.message,
        }


@dataclasses.dataclass(frozen=True)
class SanitizedCall:
    """One distinct kernel program a test suite ran, and what checking it gave.

    Attributes:
        kernel: The kernel's name.
        primitive: What bound it ("pallas_call", "mpmd_map" ...).
        source: Where the kernel function is defined, when known.
        nodeid: The test that first ran it.
        status: "checked"; "refused" (pallaslab decided, before running anything,
            not to check it: `reason` says why); "crashed" (pallaslab itself failed:
            `reason` holds the error; the test's outcome is unchanged).
        reason: Why it was refused, or how pallaslab failed ("" when checked).
        grid: Its grid as lowered (vmapped axes included); () when unknown.
        agrees: Whether the emulator's outputs equal, bit for bit (NaN equals NaN),
            what the test computed; None when not compared.
        max_abs_diff: Where they differ, the largest difference (inf when NaN or Inf
            appears on one side only).
        findings: What the checks found.
        notes: What was checked on a sample only, or not at all, and why.
        runs: How many times the program ran (it is checked once).
        seconds: Time the checks took.
    """

    kernel: str
    primitive: str
    source: SourceLocation | None
    nodeid: str
    status: Status
    reason: str = ""
    grid: tuple[int, ...] = ()
    agrees: bool | None = None
    max_abs_diff: float = 0.0
    findings: tuple[SanitizerFinding, ...] = ()
    notes: tuple[str, ...] = ()
    runs: int = 1
    seconds: float = 0.0

    @property
    def test_file(self) -> str:
        """The test file of the first test that ran it (from its node id)."""
        return self.nodeid.split("::", 1)[0]

    @property
    def sampled(self) -> bool:
        """Whether some check ran on a sample of the grid only."""
        return any(
            "sample" in note or "were checked element by element" in note for note in self.notes
        )

    @property
    def explained(self) -> bool:
        """Whether a disagreement with the test's result is explained by a finding.

        Output tiles that read padding or unwritten memory, and races, make the
        result depend on what fills memory and on the order programs run in: where
        such a finding stands, the emulator and the test's interpreter may differ.
        """
        return any(f.kind in ("padding", "uninitialized", "race") for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The call as JSON-ready values."""
        return {
            "kernel": self.kernel,
            "primitive": self.primitive,
            "file": self.source.file if self.source else None,
            "line": self.source.line if self.source else None,
            "test": self.nodeid,
            "status": self.status,
            "reason": self.reason,
            "grid": list(self.grid),
            "agrees": self.agrees,
            "max_abs_diff": None if math.isinf(self.max_abs_diff) else self.max_abs_diff,
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
        }


@dataclasses.dataclass(frozen=True)
class FileTally:
    """Per test file: the calls reached and what became of them.

    Attributes:
        file: The test file.
        reached: Distinct kernel programs its tests ran.
        checked: Of those, checked by pallaslab.
        refused: Not checked, for a stated reason.
        disagreements: Checked calls whose emulated result differs from the test's.
        unexplained: Of those, the ones no finding explains.
        crashes: Calls where pallaslab itself failed.
        findings: Findings (errors and warnings).
    """

    file: str
    reached: int = 0
    checked: int = 0
    refused: int = 0
    disagreements: int = 0
    unexplained: int = 0
    crashes: int = 0
    findings: int = 0


@dataclasses.dataclass(frozen=True)
class SanitizerReport:
    """What `pytest --pallaslab` checked in one session.

    Attributes:
        checks: The checks asked for (a subset of `CHECKS`).
        calls: One per distinct kernel program run, in the order first run.
        strict: Whether findings failed the tests that ran the kernels.
        tests_failed_by_findings: Node ids of tests failed only by findings (strict).
    """

    checks: tuple[str, ...]
    calls: tuple[SanitizedCall, ...]
    strict: bool = False
    tests_failed_by_findings: tuple[str, ...] = ()

    @property
    def findings(self) -> tuple[SanitizerFinding, ...]:
        """Every finding, in the order found."""
        return tuple(f for call in self.calls for f in call.findings)

    @property
    def errors(self) -> tuple[SanitizerFinding, ...]:
        """The findings that are errors (not warnings)."""
        return tuple(f for f in self.findings if f.severity == "error")

    def tallies(self) -> list[FileTally]:
        """One tally per test file, in the order first met."""
        order: dict[str, list[SanitizedCall]] = {}
        for call in self.calls:
            order.setdefault(call.test_file, []).append(call)
        return [_tally(file, calls) for file, calls in order.items()]

    def total(self) -> FileTally:
        """The tally over every file."""
        return _tally("total", self.calls)

    def summary_lines(self, *, verbose: bool = False) -> list[str]:
        """The terminal summary: totals, per-file tallies, findings, refusals, crashes."""
        total = self.total()
        lines = [
            f"pallaslab checked {total.checked} of {total.reached} distinct kernel "
            f"program(s) ({', '.join(self.checks)}): {len(self.errors)} finding(s), "
            f"{total.findings - len(self.errors)} warning(s), {total.refused} not checked, "
            f"{total.crashes} pallaslab failure(s), {total.disagreements} disagreement(s) "
            "with the test's result."
        ]
        tallies = self.tallies()
        if len(tallies) > 1 or verbose:
            lines.append("")
            lines.extend(tally_table(tallies))
        findings = self.findings
        if findings:
            lines.append("")
            for finding in findings:
                where = f"{finding.where()}: " if finding.location else ""
                label = "warning" if finding.severity == "warning" else finding.kind
                lines.append(f"{where}{label}: {finding.message} [{finding.nodeid}]")
        refusals: dict[str, int] = {}
        for call in self.calls:
            if call.status == "refused":
                refusals[call.reason] = refusals.get(call.reason, 0) + 1
        if refusals:
            lines.append("")
            lines.append("Not checked:")
            lines.extend(
                f"  {count} program(s): {reason}"
                for reason, count in sorted(refusals.items(), key=lambda kv: -kv[1])
            )
        crashed = [c for c in self.calls if c.status == "crashed"]
        if crashed:
            lines.append("")
            lines.append("pallaslab failed (the tests' outcomes are unchanged; please report):")
            lines.extend(f"  {c.kernel} [{c.nodeid}]: {c.reason}" for c in crashed[:20])
        sampled = [c for c in self.calls if c.sampled]
        if sampled:
            lines.append("")
            lines.append(
                f"{len(sampled)} program(s) were checked on a sample of their grid (their "
                "grids are too large to follow every program element by element): "
                + ", ".join(sorted({c.kernel for c in sampled})[:8])
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        total = self.total()
        return {
            "checks": list(self.checks),
            "strict": self.strict,
            "totals": dataclasses.asdict(total),
            "files": [dataclasses.asdict(t) for t in self.tallies()],
            "calls": [c.to_dict() for c in self.calls],
            "tests_failed_by_findings": list(self.tests_failed_by_findings),
        }

    def to_json(self) -> str:
        """The report as JSON text."""
        return json.dumps(self.to_dict(), indent=1)

    def to_junit_xml(self) -> str:
        """The report as JUnit XML: a test case per kernel program, failures for findings.

        CI systems show a JUnit file's failures beside the tests': each finding is a
        `<failure>` of its kernel's case (warnings are in the case's system-out),
        refusals are `<skipped>`, pallaslab's own failures `<error>`.
        """
        suite = ElementTree.Element(
            "testsuite",
            {
                "name": "pallaslab",
                "tests": str(len(self.calls)),
                "failures": str(sum(1 for c in self.calls if _errors_of(c))),
                "errors": str(sum(1 for c in self.calls if c.status == "crashed")),
                "skipped": str(sum(1 for c in self.calls if c.status == "refused")),
                "time": f"{sum(c.seconds for c in self.calls):.3f}",
            },
        )
        for call in self.calls:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                {
                    "classname": call.test_file or "pallaslab",
                    "name": f"{call.kernel} [{call.nodeid}]",
                    "file": call.source.file if call.source else "",
                    "line": str(call.source.line) if call.source else "",
                    "time": f"{call.seconds:.3f}",
                },
            )
            if call.status == "refused":
                ElementTree.SubElement(case, "skipped", {"message": call.reason})
            elif call.status == "crashed":
                ElementTree.SubElement(case, "error", {"message": call.reason})
            for finding in _errors_of(call):
                failure = ElementTree.SubElement(
                    case, "failure", {"type": finding.kind, "message": finding.message}
                )
                failure.text = f"{finding.where()}: {finding.message}"
            said = [f.message for f in call.findings if f.severity != "error"] + list(call.notes)
            if said:
                ElementTree.SubElement(case, "system-out").text = "\n".join(said)
        ElementTree.indent(suite)
        return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _errors_of(call: SanitizedCall) -> list[SanitizerFinding]:
    return [f for f in call.findings if f.severity == "error"]


def _tally(file: str, calls: Sequence[SanitizedCall]) -> FileTally:
    disagreeing = [c for c in calls if c.agrees is False]
    return FileTally(
        file=file,
        reached=len(calls),
        checked=sum(1 for c in calls if c.status == "checked"),
        refused=sum(1 for c in calls if c.status == "refused"),
        disagreements=len(disagreeing),
        unexplained=sum(1 for c in disagreeing if not c.explained),
        crashes=sum(1 for c in calls if c.status == "crashed"),
        findings=sum(len(c.findings) for c in calls),
    )


def tally_table(tallies: Sequence[FileTally]) -> list[str]:
    """Per-file tallies as a Markdown table (the README's and the scripts')."""
    rows = [
        "| test file | reached | checked | refused | disagree (unexplained) | crashes | findings |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows.extend(
        f"| {t.file} | {t.reached} | {t.checked} | {t.refused} | "
        f"{t.disagreements} ({t.unexplained}) | {t.crashes} | {t.findings} |"
        for t in tallies
    )
    return rows
