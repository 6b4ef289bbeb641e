"""What the emulator's checks found in one kernel, as findings at source lines.

Leaks through edge-block padding are reads past the array (`bounds`); leaks of memory
nothing wrote and of the lanes a masked load turns off are uninitialised reads
(`uninit`); loads and stores outside their block are `bounds`; conflicts between
programs are `races`: a race where running the programs in another order the backend
allows changes the result, or where the programs write different values to the same
elements; programs that only ever write the same values are a warning (legal, wasted
work), never a race.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from pallaslab._src.core import checking, sharing
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import Kernel, SourceLocation
from pallaslab._src.records.sanitize import SanitizerFinding

_UNINIT_CAUSES = frozenset(
    {"never-written", "uninitialized-output", "uninitialized-scratch", "masked-load-without-other"}
)


def kernel_checks(checks: Collection[str]) -> frozenset[str]:
    """The emulator's checks (`checking.ALL_CHECKS`) that the chosen checks need."""
    needed = set()
    if "bounds" in checks:
        needed |= {checking.kernel.BOUNDS, checking.kernel.LEAKS}
    if "uninit" in checks:
        needed.add(checking.kernel.LEAKS)
    if "races" in checks:
        needed.add(checking.kernel.RACES)
    return frozenset(needed)


def backends_of(
    kernel: Kernel, interpreter: str = "", hardware: Collection[str] = geometry.BACKENDS
) -> tuple[str, ...]:
    """Whose race rules apply: the kernel's backend's, or `hardware`'s for one for either.

    A kernel with TPU compiler params, run by the TPU interpreter (`interpreter`
    "InterpretParams") or using what only TPUs have (scalar prefetch, VMEM) is held
    to TPU rules; one with Triton or Mosaic GPU params to
    GPU rules; a kernel without either is written for any, and held to the rules of
    the hardware the suite's kernels are for (`--pallaslab-hardware`; both by default).
    """
    if kernel.backend == "mosaic_tpu" or interpreter == "InterpretParams" or _tpu_only(kernel):
        return ("tpu",)
    if kernel.backend in ("triton", "mosaic_gpu"):
        return ("gpu",)
    return tuple(b for b in geometry.BACKENDS if b in hardware)


# Memory spaces only a TPU has (SMEM is both a TPU's scalar memory and a GPU's shared
# memory: not telling).
_TPU_SPACES = frozenset({"vmem", "semaphore", "semaphore_mem", "hbm"})


def _tpu_only(kernel: Kernel) -> bool:
    """Whether the kernel uses what only TPUs have: scalar prefetch, VMEM, semaphores."""
    return kernel.num_scalar_prefetch > 0 or any(
        o.memory_space in _TPU_SPACES for o in kernel.operands
    )


def findings_of(
    call: adapter.KernelCall,
    found: checking.KernelFindings,
    checks: Collection[str],
    nodeid: str,
) -> Iterator[SanitizerFinding]:
    """The findings the chosen checks report, in the order found."""
    record = call.record
    for leak in found.leaks:
        check, kind = (
            ("bounds", "padding") if leak.cause == "padding" else ("uninit", "uninitialized")
        )
        if check in checks and (leak.cause == "padding" or leak.cause in _UNINIT_CAUSES):
            yield SanitizerFinding(
                kind=kind,
                check=check,
                kernel=record.name,
                message=leak.describe(with_location=False),
                location=leak.location or record.source,
                nodeid=nodeid,
            )
    if "bounds" in checks:
        for access in found.out_of_bounds:
            yield SanitizerFinding(
                kind="out-of-bounds",
                check="bounds",
                kernel=record.name,
                message=access.describe(with_location=False),
                location=access.location or record.source,
                nodeid=nodeid,
            )
    if "races" in checks:
        yield from _race_findings(record, found, nodeid)


def _race_findings(
    record: Kernel, found: checking.KernelFindings, nodeid: str
) -> Iterator[SanitizerFinding]:
    reports = {report.backend: report for report in found.reports}
    names = geometry.axis_names(record)
    for race_check in found.race_checks:
        report: sharing.RaceReport | None = reports.get(race_check.backend)
        every = report.conflicts if report is not None else ()
        hazards = [c for c in every if c.kind == "aliased-read"]
        if hazards:  # exact geometry: the result depends on timing, whatever the values
            yield SanitizerFinding(
                kind="race",
                check="races",
                kernel=record.name,
                message=f"{record.name}: {hazards[0].describe(names)}",
                location=_output_location(record, hazards[0].position),
                nodeid=nodeid,
                backend=race_check.backend,
            )
        conflicts = [c for c in every if c.kind != "aliased-read"]
        if not conflicts:
            continue
        first = conflicts[0]
        where = first.describe(names)
        location = _output_location(record, first.position)
        if race_check.races:
            kind, severity, text = "race", "error", f"{race_check.describe()} {where}"
        elif race_check.writes_agree:
            kind, severity = "same-value-writes", "warning"
            text = f"{where} {race_check.describe()}"
        else:
            kind, severity = "race", "warning"
            text = f"{where} Not confirmed: {race_check.describe()}"
        yield SanitizerFinding(
            kind=kind,
            check="races",
            kernel=record.name,
            message=text.strip(),
            location=location,
            nodeid=nodeid,
            severity=severity,
            backend=race_check.backend,
        )


def _output_location(record: Kernel, position: int) -> SourceLocation | None:
    """The output's BlockSpec (its index map's line), else the kernel's definition."""
    for operand in record.operands:
        if operand.position == position and operand.index_map is not None:
            index_map = operand.index_map
            if index_map.source_file:
                return SourceLocation(index_map.source_file, index_map.source_line)
    return record.source


def difference_words(worst: float) -> str:
    """How far two runs' outputs are apart, in words."""
    if worst == float("inf"):
        return "NaN or Inf on one side only"
    return f"largest difference {worst:.4g}"


def disagreement(call: adapter.KernelCall, worst: float, nodeid: str) -> SanitizerFinding:
    """The emulator's outputs differ from what the test computed."""
    record = call.record
    size = difference_words(worst)
    return SanitizerFinding(
        kind="disagreement",
        check="emulate",
        kernel=record.name,
        message=(
            f"{record.name}: pallaslab's emulator and the test's interpreter computed "
            f"different outputs ({size})."
        ),
        location=record.source,
        nodeid=nodeid,
    )
