"""Solutions to the exercises of 03_masks_and_reductions.ipynb."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def row_max(x):
    rows, cols = x.shape
    block = pl.next_power_of_2(cols)

    def row_max_kernel(x_ref, o_ref):
        mask = jnp.arange(block) < cols
        row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-jnp.inf)
        o_ref[...] = jnp.max(row)

    return pl.pallas_call(
        row_max_kernel,
        out_shape=jax.ShapeDtypeStruct((rows,), x.dtype),
        grid=(rows,),
        in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None,), lambda i: (i,)),
    )(x)


def softmax_kernel(x_ref, o_ref, *, cols, block):
    mask = jnp.arange(block) < cols
    row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-jnp.inf)
    numerator = jnp.exp(row - jnp.max(row))
    plgpu.store(o_ref.at[pl.ds(0, block)], numerator / jnp.sum(numerator), mask=mask)


def softmax(x):
    rows, cols = x.shape
    kernel = functools.partial(softmax_kernel, cols=cols, block=pl.next_power_of_2(cols))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows,),
        in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None, cols), lambda i: (i, 0)),
    )(x)


def row_sum(x, chunk=128):
    rows, cols = x.shape

    def row_sum_kernel(x_ref, o_ref):
        def body(t, total):
            columns = t * chunk + jnp.arange(chunk)
            part = plgpu.load(x_ref.at[pl.ds(t * chunk, chunk)], mask=columns < cols, other=0.0)
            return total + jnp.sum(part)

        o_ref[...] = jax.lax.fori_loop(0, pl.cdiv(cols, chunk), body, jnp.float32(0))

    return pl.pallas_call(
        row_sum_kernel,
        out_shape=jax.ShapeDtypeStruct((rows,), x.dtype),
        grid=(rows,),
        in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None,), lambda i: (i,)),
    )(x)


SOLUTIONS = {"03.row_max": row_max, "03.softmax": softmax, "03.chunked_sum": row_sum}
