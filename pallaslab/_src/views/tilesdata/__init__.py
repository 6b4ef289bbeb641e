"""The Tiles tab's data: tile maps aggregated in Python, sent as compact arrays.

Nothing here is per element or per program unless it must be: block positions are
sent per grid axis they depend on (`OperandTiles` keeps them compact), read counts
per compressed cell (`Coverage`), as base64 typed arrays of the narrowest integer
type. A 16384 x 16384 operand in 64 x 64 blocks takes a few hundred KiB.

Whatever the grid, a kernel's data stays within a byte budget (`kernel.PANE_BYTES`):
when it would not, neighbouring coverage cells merge (as for large arrays) and the grid
is sampled, every `stride[a]`-th program along axis `a` (1-D grids as 2-D ones): the
pictures and figures still count every program, and the scrubber steps through the
sampled ones (`shown`).

Modules: `encoding` (compact arrays), `operands` (one operand's blocks and reads),
`figures` (figures of merit, chip fits), `order` (grid axes and run order in words),
`kernel` (one kernel within its budget), `pane` (the tab's model, cached per
inspection), `accesses` (one program's element-level accesses).
"""

from pallaslab._src.views.tilesdata.accesses import MAX_ACCESS_ELEMENTS, accesses_json
from pallaslab._src.views.tilesdata.encoding import decode, encode, merge_cells
from pallaslab._src.views.tilesdata.kernel import kernel_json
from pallaslab._src.views.tilesdata.pane import forget, kernel_data, payload

__all__ = [
    "MAX_ACCESS_ELEMENTS",
    "accesses_json",
    "decode",
    "encode",
    "forget",
    "kernel_data",
    "kernel_json",
    "merge_cells",
    "payload",
]
