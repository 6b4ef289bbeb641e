"""What a cell's kernels are checked for around their run, stopping the cell with a message.

Before: a grid that cannot run, a block wholly outside its array. After: a reference
that does not match the call's outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pallaslab._src.core import jax_adapter, tiling
from pallaslab._src.core.cell_code import CellFailedError
from pallaslab._src.core.diagnose import Diagnosis, pallas_call_line
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.core.program import Program
from pallaslab._src.records import SourceLocation


def _stop_at(
    location: SourceLocation | None,
    name_source: Callable[[str], str | None],
    kind: str,
    summary: str,
    hint: str,
) -> CellFailedError:
    """Stops the cell with a finding of pallaslab's own, at `location` if it is the user's."""
    label = name_source(location.file) if location else None
    diagnosis = Diagnosis(
        kind, summary, hint, location=location if label else None, label=label or ""
    )
    return CellFailedError(diagnosis, None)


def check_grids(
    inspection: Inspection, program: Program, name_source: Callable[[str], str | None]
) -> None:
    """Stops with a clear message at a grid with a negative size."""
    for kernel, site in zip(inspection.kernels, program.sites, strict=True):
        written = jax_adapter.written_grid(site.params)
        if not any(n is not None and n < 0 for n in written):
            continue
        hints = [
            SourceLocation(o.index_map.source_file, o.index_map.source_line)
            for o in kernel.operands
            if o.index_map is not None and o.index_map.source_file
        ]
        files = [kernel.call_site.file] if kernel.call_site else []
        location = pallas_call_line(hints, "grid", files) or kernel.call_site
        shown = tuple("?" if n is None else n for n in written)
        raise _stop_at(
            location,
            name_source,
            "grid",
            f"kernel {kernel.name} has grid={shown}: a grid size cannot be negative.",
            "Each grid entry is how many programs run along that axis, e.g. "
            "grid=(n // 128,) for blocks of 128 along an array of n.",
        )


def check_blocks(
    inspection: Inspection,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name_source: Callable[[str], str | None],
) -> None:
    """Stops with a clear message when a block lies wholly outside its array."""
    for kernel, stray in tiling.stray_blocks(inspection, args, kwargs)[:1]:
        index_map = stray.operand.index_map
        location = (
            SourceLocation(index_map.source_file, index_map.source_line)
            if index_map and index_map.source_file
            else kernel.call_site
        )
        raise _stop_at(
            location,
            name_source,
            "block-out-of-bounds",
            f"in kernel {kernel.name}, {stray.describe()}",
            "Every block needs at least one element inside its array: check the "
            "grid and the index map (an index map returns block indices, not "
            "element offsets).",
        )


def check_reference(
    inspection: Inspection, magic_line: SourceLocation, name_source: Callable[[str], str | None]
) -> None:
    """A reference of another shape or dtype is a mistake in the magic line."""
    result = inspection.result
    if result is None or result.comparison is None or not result.comparison.problem:
        return
    raise CellFailedError(
        Diagnosis(
            "reference",
            f"--ref does not match {inspection.name}: {result.comparison.problem}.",
            "The reference must compute the same outputs: same shapes, same dtypes "
            "(cast with .astype(...) if needed).",
            location=magic_line,
            label=name_source(magic_line.file) or "",
        ),
        None,
    )
