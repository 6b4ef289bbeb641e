"""Records of a program checked against a reference: one point per set of inputs.

`CheckResult` gathers the points (sizes x dtypes) of `pallaslab.check` and
`Inspection.check`, with each point's comparison located per output block; plain
Python and NumPy values, shown by the bench view in Jupyter and as text elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from pallaslab._src.base import display
from pallaslab._src.records.kernels import ArraySpec
from pallaslab._src.records.runs import Comparison, RunResult, TileMismatch


@dataclasses.dataclass(frozen=True)
class CheckPoint:
    """One checked set of inputs.

    Attributes:
        label: What was checked, e.g. "size=256 · bfloat16" or "the given inputs".
        size: The size passed to `make_args` (None when inputs were given).
        dtype: The dtype floating inputs were cast to (None when not cast).
        args: Shapes and dtypes of the inputs.
        comparison: How the outputs compare, with mismatches per output block.
        result: The kernel's run (outputs, backend, mode).
        error: Why the point could not be checked ("" when it was).
        program: The name of the program traced for this point.
    """

    label: str
    size: Any
    dtype: str | None
    args: tuple[ArraySpec, ...]
    comparison: Comparison | None
    result: RunResult | None = None
    error: str = ""
    program: str = ""

    @property
    def ok(self) -> bool:
        """Whether the kernel ran and matched the reference."""
        return not self.error and self.comparison is not None and self.comparison.ok


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """A kernel checked against a reference, on one or more sets of inputs.

    Attributes:
        name: The checked program's name.
        points: One entry per set of inputs (size x dtype).
        seed: The seed random inputs were drawn with.
    """

    name: str
    points: tuple[CheckPoint, ...]
    seed: int = 0

    @property
    def ok(self) -> bool:
        """Whether every point matched."""
        return bool(self.points) and all(p.ok for p in self.points)

    @property
    def failing(self) -> tuple[CheckPoint, ...]:
        """The points that did not match (or could not run)."""
        return tuple(p for p in self.points if not p.ok)

    @property
    def max_abs_err(self) -> float:
        """Largest absolute error over all points (NaN when none could be compared)."""
        return _largest(p.comparison.max_abs_err for p in self._compared)

    @property
    def max_rel_err(self) -> float:
        """Largest relative error over all points."""
        return _largest(p.comparison.max_rel_err for p in self._compared)

    @property
    def mismatched(self) -> int:
        """Elements outside tolerance, over all points."""
        return sum(p.comparison.mismatched for p in self._compared)

    @property
    def tiles(self) -> tuple[TileMismatch, ...]:
        """Per output, mismatches per block, for the first failing point (else the first)."""
        point = next((p for p in self.failing if p.comparison), None) or next(
            (p for p in self.points if p.comparison), None
        )
        return point.comparison.tiles if point and point.comparison else ()

    @property
    def heatmap(self) -> TileMismatch | None:
        """The output whose blocks to look at: the first that differs (else the first)."""
        found = self.tiles
        return next((t for t in found if t.bad_tiles), found[0] if found else None)

    @property
    def bad_tiles(self) -> tuple[tuple[int, ...], ...]:
        """Output blocks that differ (first failing point, first differing output).

        A block is named by its index in the output's tiling by the block shape,
        which is the grid index of the program writing it when the output's index
        map is the identity (`lambda i, j: (i, j)`); see `bad_programs` otherwise.
        """
        tile = self.heatmap
        return tile.bad_tiles if tile is not None else ()

    @property
    def bad_programs(self) -> tuple[tuple[int, ...], ...]:
        """Grid indices of the programs whose output block differs."""
        tile = self.heatmap
        return tile.bad_programs if tile is not None else ()

    @property
    def nan_count(self) -> int:
        """NaN elements in outputs where the reference has none, over all points."""
        return sum(t.nan_count for p in self._compared for t in p.comparison.tiles)

    @property
    def inf_count(self) -> int:
        """Infinite elements in outputs where the reference is finite."""
        return sum(t.inf_count for p in self._compared for t in p.comparison.tiles)

    @property
    def _compared(self) -> list[Any]:
        return [p for p in self.points if p.comparison is not None and not p.comparison.problem]

    def summary(self) -> str:
        """One line per point: pass/fail, errors and where the mismatches are."""
        lines = [f"check of {self.name}: {'PASS' if self.ok else 'FAIL'}"]
        lines += [f"  {describe_point(p)}" for p in self.points]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("bench", self, **kwargs)


def describe_point(point: CheckPoint) -> str:
    """One line for one checked point."""
    if point.error:
        return f"{point.label}: could not run: {point.error}"
    comparison = point.comparison
    assert comparison is not None
    if comparison.problem:
        return f"{point.label}: {comparison.problem}"
    errors = (
        f"max abs err {comparison.max_abs_err:.3g}, max rel err {comparison.max_rel_err:.3g} "
        f"(rtol {comparison.rtol:.2g}, atol {comparison.atol:.2g})"
    )
    if comparison.ok:
        return f"{point.label}: ok, {errors}"
    parts = [f"{point.label}: {comparison.mismatched} element(s) differ, {errors}"]
    for tile in comparison.tiles:
        if not tile.bad_tiles and not tile.nan_count and not tile.inf_count:
            continue
        where = f"output {tile.output}"
        if tile.bad_tiles:
            where += f": {len(tile.bad_tiles)} of {tile.counts.size} blocks differ ({tile.pattern})"
        if tile.nan_count or tile.inf_count:
            where += f"; {tile.nan_count} NaN, {tile.inf_count} Inf where the reference is finite"
        parts.append(where)
    return "; ".join(parts)


def _largest(values: Iterable[float]) -> float:
    found = list(values)
    return max(found) if found else float("nan")
