"""How many programs pallaslab enumerates at once, and the error beyond that.

Per-program facts (block starts, program coordinates, run schedules) are NumPy arrays
with one entry per program. A grid is a product of sizes, so `grid=(2**20, 2**20)`
is a trillion programs: materialising that runs out of memory before anything is
shown. Everything that enumerates programs checks `MAX_PROGRAMS` first and raises
`GridTooLargeError` (a `ValueError`) saying what it could not do; tile maps and
block checks stay exact on large grids by computing only along the grid axes an
index map depends on (`grid.open_grid`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Programs (or entries of one per-program array) computed at once, at most.
MAX_PROGRAMS = 1 << 24


class GridTooLargeError(ValueError):
    """A grid has more programs than a computation can enumerate.

    Attributes:
        programs: Programs in the grid (or in the part that had to be enumerated).
        limit: The most that computation takes.
        task: What could not be done ("run it on CPU", "check its races").
    """

    def __init__(self, programs: int, limit: int, task: str) -> None:
        super().__init__(
            f"the grid has {programs:,} programs, more than the {limit:,} pallaslab can {task}"
        )
        self.programs = programs
        self.limit = limit
        self.task = task


def check_programs(grid: Sequence[int], task: str, limit: int = MAX_PROGRAMS) -> int:
    """The number of programs in `grid`; raises when it is over `limit`.

    Raises:
        GridTooLargeError: If the grid has more than `limit` programs.
        ValueError: If a grid size is negative.
    """
    if any(int(n) < 0 for n in grid):
        raise ValueError(f"grid sizes must not be negative: grid={tuple(grid)}")
    count = math.prod(int(n) for n in grid)
    if count > limit:
        raise GridTooLargeError(count, limit, task)
    return count
