"""Notebook 04: the tiled matmul."""

from __future__ import annotations

import jax.numpy as jnp

from pallaslab._src.course.catalog._helpers import bf16, case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "04_tiled_matmul"
BLOCK_K = 32


def _dot(a, b):  # type: ignore[no-untyped-def]
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def _last_k_block(a, b):  # type: ignore[no-untyped-def]
    # `acc = dot(...)` instead of `acc += dot(...)`: only the last K block survives.
    k = a.shape[1]
    last = (k - 1) // BLOCK_K * BLOCK_K
    return _dot(a[:, last:], b[last:, :])


def _first_k_block(a, b):  # type: ignore[no-untyped-def]
    return _dot(a[:, :BLOCK_K], b[:BLOCK_K, :])


def _batch_zero(a, b):  # type: ignore[no-untyped-def]
    return jnp.broadcast_to(_dot(a[0], b[0]), (a.shape[0], a.shape[1], b.shape[2]))


EXERCISES = (
    Exercise(
        id="04.k_loop",
        notebook=NOTEBOOK,
        title="Accumulate over K",
        task=(
            "Complete matmul(a, b): one program per (BLOCK_M, BLOCK_N) output block, a "
            "fori_loop over K in steps of BLOCK_K = 32 that adds each product of a tile of "
            "a and a tile of b into a float32 accumulator."
        ),
        reference=_dot,
        cases=(
            case(f32(64, 96), f32(96, 64)),
            case(f32(128, 256), f32(256, 128)),
            case(bf16(64, 128), bf16(128, 128)),
        ),
        hint=(
            "Each step adds jnp.dot(a_tile, b_tile, preferred_element_type=jnp.float32) "
            "into the carry and returns it; the loop runs K // BLOCK_K times."
        ),
        mistakes=(
            Mistake(
                "overwrites-accumulator",
                _last_k_block,
                "Only the last K block's product survives: the loop body replaces the "
                "accumulator instead of adding to it. Return acc + jnp.dot(...).",
            ),
            Mistake(
                "one-step",
                _first_k_block,
                "Only the first K block is multiplied: the loop must run K // BLOCK_K times "
                "and slice the tiles at pl.ds(t * BLOCK_K, BLOCK_K).",
            ),
        ),
    ),
    Exercise(
        id="04.batched",
        notebook=NOTEBOOK,
        title="A batched matmul",
        task=(
            "Write bmm(a, b): a is (batch, M, K), b is (batch, K, N), the result (batch, M, "
            "N) is a[i] @ b[i] for each i; a grid (batch, M // 64, N // 64) and blocks with "
            "the batch dimension squeezed (None)."
        ),
        reference=lambda a, b: jnp.einsum(
            "bmk,bkn->bmn", a, b, preferred_element_type=jnp.float32
        ).astype(a.dtype),
        cases=(case(f32(2, 64, 64), f32(2, 64, 128)), case(f32(3, 128, 32), f32(3, 32, 64))),
        hint="The first grid axis is the batch element: every index map must pass it on.",
        mistakes=(
            Mistake(
                "batch-zero",
                _batch_zero,
                "Every batch element gets a[0] @ b[0]: the index maps return 0 for the batch "
                "dimension. Pass the batch index on: lambda b, i, j: (b, i, 0).",
            ),
        ),
    ),
)
