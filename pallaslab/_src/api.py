"""The public API's own functions: what spans several layers, at the top of them all.

`pallaslab/__init__.py` re-exports these with the layers' own functions. Each one
takes what a user has at hand (a callable and its arguments, or an inspection; a
tile map) and calls down into the layer that owns the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pallaslab._src.core import settings as _settings
from pallaslab._src.core.inspection import Inspection, inspect

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from pallaslab._src.geometry.tilemap import TileMap
    from pallaslab._src.records.hints import Hint


def hints(
    inspection_or_fn: Any,
    *args: Any,
    chip: str | None = None,
    kernel: int | str | None = None,
    target: str | None = None,
    masks: bool = True,
    **kwargs: Any,
) -> list[Hint]:
    """Performance hints for a program's kernels, each tied to a source line.

    Args:
        inspection_or_fn: A function to inspect on `args`, or an inspection
            (then `inspection.hints(...)` says the same).
        *args: The function's example arguments (arrays or ShapeDtypeStructs).
        chip: The chip to advise for ("H100", "v5e"); by default the kernel's
            backend's: an H100 for GPU kernels, a v5e for TPU kernels.
        kernel: One kernel (name or index); by default every kernel.
        target: A GPU target to compile now for registers, spills and occupancy
            ("ptx:sm_90"); without it, compiles already asked for are used.
        masks: Interpret a few programs' bodies to find masks that switch off
            most lanes (costs a fraction of a second the first time).
        **kwargs: The function's keyword arguments.

    Returns:
        The hints, most severe first: `.message`, `.location`, `.figures`, `.chip`.

    Example:
        >>> for hint in pallaslab.hints(matmul, a, b, chip="H100"):
        ...     print(hint)   # file:line: warning: ...
    """
    if isinstance(inspection_or_fn, Inspection):
        if args or kwargs:
            raise TypeError("hints(inspection) takes no arguments: they were traced already")
        inspection = inspection_or_fn
    elif callable(inspection_or_fn):
        inspection = inspect(inspection_or_fn, *args, **kwargs)
    else:
        raise TypeError(
            f"hints takes an inspection or a function, not a {type(inspection_or_fn).__name__}"
        )
    return inspection.hints(kernel, chip=chip, target=target, masks=masks)


def draw_tiles(tiles: TileMap, program: Sequence[int] | None = None, **options: Any) -> Figure:
    """A matplotlib figure of a tile map: one panel per operand, `program`'s blocks lit.

    Args:
        tiles: The tile map (`inspection.tiles(k)`).
        program: The program whose blocks to highlight (grid indices); default the
            first.
        **options: `title`, `panel_width` (inches per operand).
    """
    from pallaslab._src.views import tilesfig  # noqa: PLC0415 - matplotlib on use

    return tilesfig.figure(tiles, program, **options)


def save_tiles(
    tiles: TileMap, path: str | Path, program: Sequence[int] | None = None, **options: Any
) -> Path:
    """Saves `draw_tiles(tiles, program)` for slides; the suffix picks the format.

    Args:
        tiles: The tile map (`inspection.tiles(k)`).
        path: Where to write: .png, .svg or .pdf.
        program: The program whose blocks to highlight.
        **options: As for `draw_tiles`.

    Returns:
        The path written.

    Example:
        >>> pallaslab.save_tiles(inspection.tiles(), "matmul.png", (1, 2))
    """
    from pallaslab._src.views import tilesfig  # noqa: PLC0415 - matplotlib on use

    return tilesfig.save(tiles, path, program, **options)


def settings() -> _settings.Settings:
    """The settings from JupyterLab's settings editor (the defaults without one)."""
    return _settings.load()
