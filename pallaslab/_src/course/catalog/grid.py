"""Notebook 02: grid, `program_id` and BlockSpec."""

from __future__ import annotations

from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "02_grid_and_blockspec"


def _transposed_in_place(x, block=64):  # type: ignore[no-untyped-def]
    # Each (block, block) tile transposed where it stands: index maps left as (i, j).
    # Only square arrays get that far: for others the input's blocks leave the array.
    rows, cols = x.shape
    if rows != cols:
        raise ValueError("defined for square arrays only")
    tiles = x.reshape(rows // block, block, cols // block, block)
    return tiles.transpose(0, 3, 2, 1).reshape(rows, cols)


def _blocks_not_transposed(x, block=64):  # type: ignore[no-untyped-def]
    # Input block (j, i) copied to output block (i, j) without transposing it.
    rows, cols = x.shape
    tiles = x.reshape(rows // block, block, cols // block, block)
    return tiles.transpose(2, 1, 0, 3).reshape(cols, rows)


EXERCISES = (
    Exercise(
        id="02.transpose",
        notebook=NOTEBOOK,
        title="Transpose by index map",
        task=(
            "Write transpose(x) for a float32 (M, N) array (M and N multiples of 64) with "
            "(64, 64) blocks and a grid over the output's blocks."
        ),
        reference=lambda x: x.T,
        cases=(case(f32(128, 128)), case(f32(128, 256)), case(f32(320, 64))),
        hint=(
            "Output block (i, j) is input block (j, i), transposed: swap the indices in the "
            "input's index map and transpose the block in the kernel."
        ),
        mistakes=(
            Mistake(
                "blocks-in-place",
                _transposed_in_place,
                "Each block is transposed where it stands: output block (i, j) must come "
                "from input block (j, i). Swap the indices in the input's index map "
                "(lambda i, j: (j, i)); the Tiles tab shows which block each program reads.",
            ),
            Mistake(
                "not-transposed",
                _blocks_not_transposed,
                "The blocks land in the right places but are not transposed: transpose the "
                "block in the kernel (x_ref[...].T).",
            ),
        ),
    ),
    Exercise(
        id="02.scale_heads",
        notebook=NOTEBOOK,
        title="Squeezed dimensions and program_id",
        task=(
            "Write scale_heads(x, s): x is float32 (batch, heads, seq, dim), s is float32 "
            "(heads,); head h of every batch element is multiplied by s[h]. One program per "
            "(batch, head), blocks (None, None, seq, dim)."
        ),
        reference=lambda x, s: x * s[None, :, None, None],
        cases=(case(f32(2, 4, 16, 128), f32(4)), case(f32(3, 5, 8, 64), f32(5))),
        hint="The head of a program is pl.program_id(1) on a grid (batch, heads).",
        mistakes=(
            Mistake(
                "batch-axis",
                lambda x, s: x * s[: x.shape[0], None, None, None],
                "You scale by s[batch]: on a grid (batch, heads), pl.program_id(0) is the "
                "batch element and pl.program_id(1) the head.",
            ),
        ),
    ),
    Exercise(
        id="02.any_length",
        notebook=NOTEBOOK,
        title="Arrays that are not a whole number of blocks",
        task=("Write double(x): 2 * x for a float32 vector of any length, in blocks of 128."),
        reference=lambda x: 2 * x,
        cases=(case(f32(1024)), case(f32(1000)), case(f32(100))),
        hint="The grid needs pl.cdiv(n, 128) programs: one more when n is not a multiple of 128.",
    ),
)
