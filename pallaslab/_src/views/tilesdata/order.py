"""The grid's axes named, and the order each backend runs its programs in, in words."""

from __future__ import annotations

from pallaslab._src.geometry.tilemap import TileMap


def axis_names(tiles: TileMap) -> list[str]:
    """Names of the grid axes: given ones, else the index maps' parameter names."""
    kernel = tiles.kernel
    if kernel.grid_names:
        return list(kernel.grid_names)
    rank = len(tiles.grid)
    for operand in kernel.operands:
        index_map = operand.index_map
        if index_map is not None and index_map.num_grid_args == rank:
            names = list(index_map.arg_names[:rank])
            if all(names) and len(set(names)) == rank:
                return names
    return ["ijklmn"[a] if a < 6 else f"g{a}" for a in range(rank)]


def order_text(tiles: TileMap, schedule: str) -> str:
    """How the backend orders the programs, in one or two sentences."""
    names = axis_names(tiles)
    if schedule == "gpu":
        return (
            "GPU: all programs run at once, in an unspecified order (one per thread "
            "block). The play button steps through them in row-major order only to show "
            "each one; a program must not depend on another's blocks."
        )
    text = (
        "TPU: programs run one after another in row-major order (the last grid axis "
        "changes fastest); a block is copied only when it differs from the previous "
        "program's."
    )
    semantics = tiles.kernel.dimension_semantics
    if semantics:
        parallel = [n for n, s in zip(names, semantics, strict=False) if s == "parallel"]
        arbitrary = [n for n, s in zip(names, semantics, strict=False) if s != "parallel"]
        if parallel:
            text += (
                f" Parallel axes ({', '.join(parallel)}) may be split between TensorCores "
                "on chips with two."
            )
        if arbitrary:
            text += f" Arbitrary axes ({', '.join(arbitrary)}) run in order on one core."
    return text
