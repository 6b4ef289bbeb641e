"""Every check of one kernel on the values it receives: what a run and a test suite share.

`check_kernel` runs the leak, out-of-bounds and race checks of one emulated kernel and
gathers what they found. A check that fails is kept apart (`KernelFindings.failures`),
never mistaken for a clean result: a run turns it into a notice, `pytest --pallaslab`
counts it as pallaslab's own crash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

from pallaslab._src.base import messages
from pallaslab._src.core import emulator, sharing
from pallaslab._src.core.checking.bounds import bounds_and_outputs
from pallaslab._src.core.checking.leaks import leaks_and_outputs
from pallaslab._src.core.checking.races import confirm_races
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import Leak, OutOfBounds, RaceCheck

# The checks, by the name `pytest --pallaslab=...` gives them.
LEAKS = "leaks"
BOUNDS = "bounds"
RACES = "races"
ALL_CHECKS = frozenset({LEAKS, BOUNDS, RACES})


@dataclasses.dataclass
class KernelFindings:
    """What the checks of one kernel found, and what they could not check.

    Attributes:
        notices: What went unchecked, and why, in words.
        leaks: Output tiles that depend on padding or on memory nothing wrote.
        race_checks: Per backend with conflicts, the conflicts run in other orders.
        reports: Per backend checked, its race report (conflicts and notice).
        out_of_bounds: Loads and stores outside their ref.
        failures: (what failed, the error) of checks that raised: pallaslab's own
            failures, never a kernel's finding.
        outputs: The kernel's outputs as the emulator computed them on the way (with
            Pallas' fills), when a check ran them; None otherwise.
    """

    notices: list[str] = dataclasses.field(default_factory=list)
    leaks: list[Leak] = dataclasses.field(default_factory=list)
    race_checks: list[RaceCheck] = dataclasses.field(default_factory=list)
    reports: list[sharing.RaceReport] = dataclasses.field(default_factory=list)
    out_of_bounds: list[OutOfBounds] = dataclasses.field(default_factory=list)
    failures: list[tuple[str, BaseException]] = dataclasses.field(default_factory=list)
    outputs: list[Any] | None = None

    def extend(self, other: KernelFindings) -> None:
        """Adds another kernel's findings to these (not its outputs)."""
        for field in dataclasses.fields(self):
            if field.name != "outputs":
                getattr(self, field.name).extend(getattr(other, field.name))


def check_kernel(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    *,
    kernel_index: int = 0,
    checks: Collection[str] = ALL_CHECKS,
    backends: Sequence[str] = geometry.BACKENDS,
) -> KernelFindings:
    """Runs `checks` on one emulated kernel, on the values it receives.

    Args:
        call: The kernel, as the emulator reads it.
        plan: Its plan (an interpreted kernel is not checked: nothing is found).
        operands: Its operand values (scalar prefetch, then inputs).
        kernel_index: Its index in the program, for the records.
        checks: Which of `ALL_CHECKS` to run.
        backends: Whose race rules to apply ("gpu", "tpu").
    """
    found = KernelFindings()
    if not plan.emulated:
        return found
    name = plan.kernel
    if LEAKS in checks:
        try:
            leaks, found.outputs = leaks_and_outputs(
                call, plan, operands, kernel_index=kernel_index
            )
            found.leaks.extend(leaks)
        except Exception as error:  # a check must never lose the run's result
            found.failures.append(("the leak check", error))
            found.notices.append(f"{name}: checks failed ({messages.one_line(error)}).")
    if BOUNDS in checks:
        try:
            out_of_bounds, outputs = bounds_and_outputs(
                call, plan, operands, kernel_index=kernel_index
            )
            found.out_of_bounds.extend(out_of_bounds)
            found.outputs = found.outputs if found.outputs is not None else outputs
        except Exception as error:
            found.failures.append(("the out-of-bounds check", error))
            found.notices.append(
                f"{name}: slices were not checked against their blocks "
                f"({messages.one_line(error)})."
            )
    if RACES in checks:
        try:
            for backend in backends:
                report = sharing.kernel_races(call, plan, operands, backend)
                found.reports.append(report)
                if report.notice:
                    found.notices.append(f"{name}: {report.notice}")
                if report.conflicts:
                    found.race_checks.append(
                        confirm_races(
                            call,
                            plan,
                            operands,
                            backend,
                            kernel_index=kernel_index,
                            report=report,
                        )
                    )
        except Exception as error:  # a check must never lose the run's result
            found.failures.append(("the race check", error))
            found.notices.append(f"{name}: checks failed ({messages.one_line(error)}).")
    return found
