"""Where a sweep runs and against which roof: the plan an observer draws."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from pallaslab._src.bench import harness, live, roofline
from pallaslab._src.records import hardware


@dataclasses.dataclass(frozen=True)
class SweepContext:
    """Where a sweep runs and against which roof."""

    plan: live.Plan
    chip: roofline.Chip | None

    def peaks(self, dtype: str) -> tuple[float, float]:
        """(peak FLOP/s, bandwidth) for arithmetic in `dtype`, zeros when no chip."""
        if self.chip is None:
            return 0.0, 0.0
        return self.chip.peak_flops(dtype)[0], self.chip.bandwidth


def sweep_context(
    chip: str | None,
    title: str,
    *,
    kind: str,
    total: int,
    x_label: str,
    dtype: str = "float32",
    baseline: int = 0,
    notices: tuple[str, ...] = (),
) -> SweepContext:
    """The plan of a sweep: backend, device, the chip's roof for `dtype`, the CPU label.

    `total` counts the XLA baseline's runs too; `baseline` says how many of them there
    are, so progress can count configs alone. `notices` say what the run will not do.
    """
    backend = jax.default_backend()
    device = harness.device_name()
    found = roofline.chip_named(chip) if chip else roofline.detect_chip(device)
    peak_flops, peak_label = found.peak_flops(dtype) if found else (0.0, "")
    plan = live.Plan(
        title=title,
        kind=kind,
        total=total,
        x_label=x_label,
        note=live.CPU_LABEL if backend == "cpu" else "",
        backend=backend,
        device=device,
        chip=found.name if found else "",
        peak_flops=peak_flops,
        peak_bandwidth=found.bandwidth if found else 0.0,
        peak_label=_roof_label(found, peak_label) if found else "",
        baseline=baseline,
        notices=notices,
        roofs=roofs(dtype),
    )
    return SweepContext(plan, found)


def _roof_label(chip: roofline.Chip, peak_label: str) -> str:
    return f"{peak_label}, {chip.bandwidth / 1e12:.3g} TB/s ({chip.spec.source})"


def roofs(dtype: str) -> tuple[dict[str, Any], ...]:
    """Every chip of the hardware table as a roof for arithmetic in `dtype`."""
    found = []
    for name in [*hardware.GPUS, *hardware.TPUS]:
        chip = roofline.chip_named(name)
        peak, label = chip.peak_flops(dtype)
        found.append(
            {
                "name": chip.name,
                "peak_flops": peak,
                "peak_bandwidth": chip.bandwidth,
                "peak_label": _roof_label(chip, label),
            }
        )
    return tuple(found)


def no_baseline_notice(ref: Any) -> tuple[str, ...]:
    """Why a run has no XLA baseline when its reference is a value, not a function."""
    if ref is None or callable(ref):
        return ()
    return (
        "No XLA baseline: the reference (--ref) is a value, the expected output, so there "
        "is nothing to time under jax.jit. Give a function of the call's arguments "
        '(e.g. --ref "lambda a, b: a @ b") to time XLA too.',
    )
