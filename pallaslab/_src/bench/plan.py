"""Where a sweep runs and against which roof: the plan an observer draws."""

from __future__ import annotations

import dataclasses

import jax

from pallaslab._src.bench import harness, live, roofline


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
) -> SweepContext:
    """The plan of a sweep: backend, device, the chip's roof for `dtype`, the CPU label.

    `total` counts the XLA baseline's runs too; `baseline` says how many of them there
    are, so progress can count configs alone.
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
        peak_label=(
            f"{peak_label}, {found.bandwidth / 1e12:.3g} TB/s ({found.spec.source})"
            if found
            else ""
        ),
        baseline=baseline,
    )
    return SweepContext(plan, found)
