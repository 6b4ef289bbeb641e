"""Notebook 09: Mosaic GPU (`plgpu.kernel`, warpgroups, TMA, `wgmma`).

The students' kernels run through JAX's Mosaic GPU interpreter on a CPU, simulating
every CTA, warpgroup and copy: the cases are small.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pallaslab._src.course import requirements
from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "09_mosaic_gpu"
TILE_K = 64  # the K tile of 09.wgmma's pipeline


def f16(*shape: int) -> jax.ShapeDtypeStruct:
    """Seeded random float16 data of this shape (what `wgmma` multiplies)."""
    return jax.ShapeDtypeStruct(shape, jnp.float16)


def _matmul(a, b):  # type: ignore[no-untyped-def]
    return jnp.dot(a, b, preferred_element_type=jnp.float32)


def _first_k_tile_of_a(a, b):  # type: ignore[no-untyped-def]
    # a's window never moves along K: every step multiplies a's first K tile.
    steps = a.shape[1] // TILE_K
    first = a[:, :TILE_K].astype(jnp.float32)
    b_tiles = b.astype(jnp.float32).reshape(steps, TILE_K, b.shape[1]).sum(axis=0)
    return first @ b_tiles


EXERCISES = (
    Exercise(
        id="09.warpgroups",
        notebook=NOTEBOOK,
        title="Two warpgroups, one tile",
        task=(
            "Fix double(x): 2 * x for a float32 (rows, cols) array, rows a multiple of 32. "
            "Each CTA takes 32 rows; its two warpgroups copy, double and store 16 rows each."
        ),
        reference=lambda x: 2 * x,
        cases=(case(f32(64, 128)), case(f32(96, 64))),
        hint=(
            "Each warpgroup's window starts at the CTA's rows plus its own 16: add "
            'lax.axis_index("wg") * 16 to the start.'
        ),
    ),
    Exercise(
        id="09.wgmma",
        notebook=NOTEBOOK,
        title="A wgmma matmul over a TMA pipeline",
        task=(
            "Fix matmul(a, b): a @ b in float32 for float16 a (M, K) and b (K, N), M a "
            "multiple of 64, N of 128, K of 64; each CTA one (64, 128) output tile, "
            "plgpu.emit_pipeline bringing K tiles of a and b in, plgpu.wgmma multiplying them."
        ),
        reference=_matmul,
        cases=(case(f16(128, 128), f16(128, 256)), case(f16(64, 256), f16(256, 128))),
        hint=(
            "Step s of the pipeline must bring in K tile s of both a and b: the index "
            "maps return (i, s) for a and (s, j) for b."
        ),
        mistakes=(
            Mistake(
                "first-k-tile-of-a",
                _first_k_tile_of_a,
                "Every step multiplies a's first K tile: a's index map ignores the step. "
                "Step s must bring tile (i, s) of a, as b's brings (s, j).",
            ),
        ),
        requirements=(requirements.tensor_cores(),),
    ),
)
