"""Kernels whose static pages and summaries are pinned as golden text (tests/golden/).

Kept in their own file: the pages show this file's lines, so editing the shared
corpus does not move them. Change a kernel here and the goldens change with it
(`pytest tests/test_golden.py --update-golden`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def f32(*shape: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add():
    """A blocked vector add: 8 programs, a block of 128 each."""
    return pl.pallas_call(
        add_kernel,
        out_shape=f32(1024),
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )


def kacc_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...])


def kacc(m=128, n=128, k=256, bm=64, bn=64, bk=128):
    """A matmul accumulating into its output over a k grid axis: a GPU race, not a TPU one."""
    return pl.pallas_call(
        kacc_kernel,
        out_shape=f32(m, n),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
    )


def last_row_kernel(x_ref, o_ref):
    bump = jnp.where(pl.program_id(0) == pl.num_programs(0) - 1, 1.0, 0.0)
    o_ref[...] = x_ref[...] + bump


def last_row_wrong():
    """Right but for the last row of blocks: the check's heatmap has a row of red."""
    return pl.pallas_call(
        last_row_kernel,
        out_shape=f32(64, 96),
        grid=(4, 3),
        in_specs=[pl.BlockSpec((16, 32), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((16, 32), lambda i, j: (i, j)),
    )
