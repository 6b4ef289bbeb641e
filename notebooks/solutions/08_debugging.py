"""Solutions to the exercises of 08_debugging.ipynb."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy(x, block=128):
    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    return pl.pallas_call(
        copy_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // block,),
        in_specs=[pl.BlockSpec((block,), lambda i: (i,))],  # block i, not element i * 128
        out_specs=pl.BlockSpec((block,), lambda i: (i,)),
    )(x)


def block_sums(x, block=128):
    n = x.shape[0]

    def block_sums_kernel(x_ref, o_ref):
        # The last block hangs over the end of x: its lanes past n hold padding.
        index = pl.program_id(0) * block + jax.lax.broadcasted_iota(jnp.int32, (block,), 0)
        o_ref[...] = jnp.sum(jnp.where(index < n, x_ref[...], 0.0), keepdims=True)

    blocks = pl.cdiv(n, block)
    return pl.pallas_call(
        block_sums_kernel,
        out_shape=jax.ShapeDtypeStruct((blocks,), x.dtype),
        grid=(blocks,),
        in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
    )(x)


def matmul_kernel(x_ref, y_ref, o_ref, *, block_k):
    def body(t, acc):
        k = pl.ds(t * block_k, block_k)
        return acc + jnp.dot(x_ref[:, k], y_ref[k, :], preferred_element_type=jnp.float32)

    acc = jnp.zeros(o_ref.shape, jnp.float32)
    o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[1] // block_k, body, acc).astype(o_ref.dtype)


def matmul(x, y, bm=64, bn=64, bk=64):
    (m, k), (_, n) = x.shape, y.shape
    return pl.pallas_call(
        functools.partial(matmul_kernel, block_k=bk),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
    )(x, y)


SOLUTIONS = {"08.index_map": copy, "08.block_sums": block_sums, "08.race_free": matmul}
