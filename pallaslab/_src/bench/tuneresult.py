"""What a tuning run found: `TuneResult`, its table and its summary."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import display
from pallaslab._src.bench import live, sweep

if TYPE_CHECKING:
    import pandas as pd


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """The outcome of a tuning run.

    Attributes:
        name: What was tuned.
        space: The values tried per name.
        rows: One row per config measured (impl "pallas"), and the XLA baseline
            (impl "xla") when a reference was given.
        best: The fastest config that ran and matched the reference (None if none).
        state: "finished", "interrupted" or "failed".
        plan: Where it ran, against which roof, with which timing label.
        cache_path: The cache file ("" when caching was off).
        notices: What could not be checked, and why.
    """

    name: str
    space: dict[str, tuple[Any, ...]]
    rows: tuple[sweep.Row, ...]
    best: dict[str, Any] | None
    state: str
    plan: live.Plan
    cache_path: str = ""
    notices: tuple[str, ...] = ()

    @property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame: one per config (and the baseline), config names first."""
        frame = sweep.to_frame(self.rows, sweep.SweepContext(self.plan, None), state=self.state)
        names = [n for n in self.space if n in frame.columns]
        frame = frame.drop(columns=[c for c in ("size",) if c in frame.columns])
        rest = [c for c in frame.columns if c not in names and c != "impl"]
        return frame[["impl", *names, *rest]]

    @property
    def best_row(self) -> sweep.Row | None:
        """The row of the best config."""
        if self.best is None:
            return None
        return next(
            (r for r in self.rows if r.impl == sweep.PALLAS and r.config == self.best), None
        )

    @property
    def failed(self) -> tuple[sweep.Row, ...]:
        """Configs that could not be built, lowered, compiled or run."""
        return tuple(r for r in self.rows if r.status.startswith("failed"))

    @property
    def wrong(self) -> tuple[sweep.Row, ...]:
        """Configs that ran but do not match the reference."""
        return tuple(r for r in self.rows if r.status == "wrong")

    def summary(self) -> str:
        """The best config, then one line per config."""
        note = f" [{self.plan.note}]" if self.plan.note else ""
        head = f"tuning {self.name}: {self.state}{note}"
        best = self.best_row
        lines = [head]
        if best is not None:
            lines.append(f"  best: {best.point} ({best.median_ms:.4g} ms)")
        else:
            lines.append("  no config ran and matched the reference")
        for row in self.rows:
            if row.status == "ok":
                what = f"{row.median_ms:.4g} ms"
            else:
                what = f"{row.status}: {row.error.splitlines()[0] if row.error else ''}"
            lines.append(f"  {row.impl:6} {row.point}: {what}{' (cached)' if row.cached else ''}")
        lines += [f"  note: {n}" for n in self.notices]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("bench", self, **kwargs)
