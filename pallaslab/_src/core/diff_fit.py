"""Fit and static cost in a diff: the same kernel on two chips (or two kernels), side by side.

For a side lowered for a chip's real compile (`tpu-compile:<chip>`, `xla-gpu:<chip>`)
the diff gains its memory fit (`core/fit.py`: the scoped VMEM or shared memory the
compile allocates, the limit, the verdict and the `vmem_limit_bytes` to pass); for a
side in machine code (TPU bundles, SASS) its static cost (`core/cost.py`: cycles of
one pass of the body, unit utilization, stall cycles). `core/diffing.py` adds them to
the figures of `diff_figures.py`.
"""

from __future__ import annotations

from typing import Any

from pallaslab._src.core import cost, fit
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.records import Kernel
from pallaslab._src.records.cost import CostTable
from pallaslab._src.records.diffs import Delta, Value
from pallaslab._src.records.fit import MemoryFit
from pallaslab._src.records.lowered import Lowered
from pallaslab._src.records.targets import parse_target

Side = tuple[Inspection, Kernel, Lowered]


def _fit(side: Side, notes: list[str]) -> MemoryFit | None:
    inspection, kernel, lowered = side
    target = parse_target(lowered.target)
    if target.kind not in ("tpu-compile", "xla-gpu") or not target.arch:
        return None
    try:
        return fit.chip_fit(inspection, kernel, target.arch)
    except Exception as error:  # a figure missing is a note, never a lost diff
        notes.append(f"{kernel.name}: no fit on {target.arch}: {error}")
        return None


def _cost(side: Side) -> CostTable | None:
    lowered = side[2]
    try:
        return cost.of_lowered(lowered)
    except cost.CostUnavailableError:
        return None


def _pair(name: str, a: Value, b: Value, **options: Any) -> Delta:
    return Delta("resources", name, a, b, **options)


def fit_cost_deltas(a: Side, b: Side, notes: list[str]) -> list[Delta]:
    """The fit and static cost figures of two sides (none for sides without them)."""
    deltas: list[Delta] = []
    fit_a, fit_b = _fit(a, notes), _fit(b, notes)
    if fit_a or fit_b:
        memory = (fit_a or fit_b).memory  # type: ignore[union-attr]
        lower = {"better": "lower", "unit": "B"}
        deltas += [
            _pair("fit", *(f.verdict_text if f else None for f in (fit_a, fit_b))),
            _pair(
                f"{memory} needed",
                *(f.needed if f else None for f in (fit_a, fit_b)),
                headline=True,
                **lower,
            ),
            _pair(
                f"{memory} limit",
                *(f.limit if f else None for f in (fit_a, fit_b)),
                better="higher",
                unit="B",
            ),
            _pair(
                "vmem_limit_bytes to pass",
                *(f.suggested_limit if f else None for f in (fit_a, fit_b)),
                unit="B",
            ),
        ]
        if any(f and f.kind == "tpu" for f in (fit_a, fit_b)):
            deltas += [
                _pair("SMEM", *(f.smem_bytes if f else None for f in (fit_a, fit_b)), **lower),
                _pair("semaphores", *(f.semaphores if f else None for f in (fit_a, fit_b))),
            ]
    cost_a, cost_b = _cost(a), _cost(b)
    if cost_a or cost_b:
        deltas.append(
            _pair(
                "static cycles per pass",
                *(c.cycles_estimate if c else None for c in (cost_a, cost_b)),
                better="lower",
                headline=True,
            )
        )
        for unit in ("MXU", "VPU", "vld", "vst"):
            shares = [
                c.utilization().get(unit) if c and c.kind == "tpu" else None
                for c in (cost_a, cost_b)
            ]
            if any(share is not None for share in shares):
                deltas.append(
                    _pair(
                        f"{unit} slots filled in the body",
                        *(None if s is None else round(100 * s, 1) for s in shares),
                        unit="%",
                        better="higher",
                    )
                )
        if any(c and c.kind == "gpu" for c in (cost_a, cost_b)):
            deltas.append(
                _pair(
                    "scoreboard waits",
                    *(sum(line.waits for line in c.lines) if c else None for c in (cost_a, cost_b)),
                    better="lower",
                )
            )
    return deltas
