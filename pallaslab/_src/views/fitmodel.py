"""The memory-fit table of the Kernels tab: `inspection.fit()` rows as the widget gets them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pallaslab._src.base import messages, words
from pallaslab._src.records import Kernel
from pallaslab._src.records.fit import FitTable, MemoryFit
from pallaslab._src.views.contracts import FitModel, FitRow

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def _row(fit: MemoryFit) -> FitRow:
    return {
        "chip": fit.chip,
        "target": fit.target,
        "memory": fit.memory,
        "needed": words.nbytes(fit.needed) if fit.needed is not None else "",
        "neededFrom": fit.needed_from,
        "limit": words.nbytes(fit.limit),
        "limitFrom": fit.limit_from,
        "capacity": words.nbytes(fit.capacity),
        "verdict": fit.verdict,
        "verdictText": fit.verdict_text,
        "vmemLimitBytes": fit.suggested_limit,
        "message": fit.message,
    }


def model(table: FitTable) -> FitModel:
    """The widget's model of a fit table."""
    return {
        "rows": [_row(r) for r in table.rows],
        "compiled": all(r.needed_from.startswith("read") or r.error for r in table.rows),
    }


def fit_model(inspection: Inspection, kernel: Kernel, *, compile: bool) -> FitModel:
    """The kernel's fit across chips; `compile=False` compiles nothing (the tab opens fast)."""
    if kernel.kind != "pallas_call":
        return {"rows": [], "compiled": True, "error": f"{kernel.kind} kernels: not estimated"}
    from pallaslab._src.core.fit import fit_table  # noqa: PLC0415 - core is below

    try:
        return model(fit_table(inspection, kernel.index, compile=compile))
    except Exception as error:  # advice: never lose the tab over it
        return {"rows": [], "compiled": True, "error": f"fit: {messages.describe(error)}"}
