"""Which programs of a grid touch the same block, and when that is a race.

Pure geometry over evaluated index maps: no JAX. The emulator uses `sharing_axes` to
decide which grid axes it may run as one batch; `find_races` applies each backend's
rules to the same facts (see `finding`); outputs whose programs share memory on a GPU
are decided element by element (`shared`); `summarize` puts them in words.

Modules: `windows` (block windows over a grid), `conflict` (`Conflict`), `finding`
(block-level rules per backend), `shared` (element-level races in shared memory),
`summary` (sentences for the inspector).
"""

from pallaslab._src.geometry.races.conflict import BACKENDS, Backend, Conflict
from pallaslab._src.geometry.races.finding import find_races, needs_elements, parallel_axes
from pallaslab._src.geometry.races.shared import SharedAccesses, whole_array
from pallaslab._src.geometry.races.summary import axis_names, summarize
from pallaslab._src.geometry.races.windows import program_coordinates, sharing_axes

__all__ = [
    "BACKENDS",
    "Backend",
    "Conflict",
    "SharedAccesses",
    "axis_names",
    "find_races",
    "needs_elements",
    "parallel_axes",
    "program_coordinates",
    "sharing_axes",
    "summarize",
    "whole_array",
]
