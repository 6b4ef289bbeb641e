"""What a tuning run found: `TuneResult`, its table and its summary."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import display
from pallaslab._src.bench import live, sweep
from pallaslab._src.bench.configs import config_label

if TYPE_CHECKING:
    import pandas as pd


def _config_column(column: pd.Series, values: tuple[Any, ...]) -> pd.Series:
    """A config name's column in its values' own type, missing where a row has none."""
    import pandas as pd  # noqa: PLC0415 - the table is pandas already

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        dtype = "boolean"
    elif present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        dtype = "Int64"
    elif present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        dtype = "Float64"
    else:
        # Other values (text, tuples, a mix) stay as they are; None is missing.
        return column.astype(object).where(column.notna(), pd.NA)
    return column.astype(dtype)


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
        cache_path: The cache file ("" when caching was off; on a cluster, the first
            chip kind's).
        notices: What could not be checked, and why.
        chips: On a cluster, the chip kinds each config was timed on (rows say
            which in `chip`); `best` is the first kind's best. Empty locally.
    """

    name: str
    space: dict[str, tuple[Any, ...]]
    rows: tuple[sweep.Row, ...]
    best: dict[str, Any] | None
    state: str
    plan: live.Plan
    cache_path: str = ""
    notices: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()

    @property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame: one per config (and the baseline), config names first.

        A name's column keeps its values' type: integers stay integers (`BLOCK_M` 32,
        never 32.0) and the XLA baseline, which has no config, reads `<NA>` there.
        """
        frame = sweep.to_frame(self.rows, sweep.SweepContext(self.plan, None), state=self.state)
        names = [n for n in self.space if n in frame.columns]
        frame = frame.drop(columns=[c for c in ("size",) if c in frame.columns])
        for name in names:
            frame[name] = _config_column(frame[name], self.space[name])
        rest = [c for c in frame.columns if c not in names and c != "impl"]
        return frame[["impl", *names, *rest]]

    @property
    def best_row(self) -> sweep.Row | None:
        """The row of the best config (on the first chip kind, on a cluster)."""
        if self.best is None:
            return None
        chip = self.chips[0] if self.chips else None
        return next(
            (
                r
                for r in self.rows
                if r.impl == sweep.PALLAS
                and r.config == self.best
                and (chip is None or r.chip == chip)
            ),
            None,
        )

    @property
    def best_by_chip(self) -> dict[str, dict[str, Any] | None]:
        """On a cluster, each chip kind's best config (None where none ran right)."""
        return {chip: best_config(self.rows, chip) for chip in self.chips}

    @property
    def retried(self) -> tuple[sweep.Row, ...]:
        """Rows of configs tried again after their worker was lost (on a cluster)."""
        return tuple(r for r in self.rows if r.retries)

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
        if self.chips:
            for chip, config in self.best_by_chip.items():
                lines.append(
                    f"  best on {chip}: {config_label(config)}"
                    if config is not None
                    else f"  best on {chip}: no config ran and matched the reference"
                )
        elif best is not None:
            lines.append(f"  best: {best.point} ({best.median_ms:.4g} ms)")
        else:
            lines.append("  no config ran and matched the reference")
        for row in self.rows:
            if row.status == "ok":
                what = f"{row.median_ms:.4g} ms"
            else:
                what = f"{row.status}: {row.error.splitlines()[0] if row.error else ''}"
            where = f" on {row.chip}" if row.chip else ""
            retried = f" (retried {row.retries}x: {row.retry_reason})" if row.retries else ""
            cached = " (cached)" if row.cached else ""
            lines.append(f"  {row.impl:6} {row.point}{where}: {what}{cached}{retried}")
        lines += [f"  note: {n}" for n in self.notices]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("bench", self, **kwargs)


def best_config(rows: Sequence[sweep.Row], chip: str | None = None) -> dict[str, Any] | None:
    """The fastest config that ran and matched the reference (on `chip`, when given)."""
    candidates = [
        r
        for r in rows
        if r.impl == sweep.PALLAS
        and (chip is None or r.chip == chip)
        and r.status == "ok"
        and r.correct is not False
        and math.isfinite(r.median_ms)
    ]
    if not candidates:
        return None
    return dict(min(candidates, key=lambda r: r.median_ms).config)
