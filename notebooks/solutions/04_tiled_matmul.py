"""Solutions to the exercises of 04_tiled_matmul.ipynb."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32


def matmul_kernel(a_ref, b_ref, c_ref, *, num_k_tiles):
    def body(t, acc):
        k = pl.ds(t * BLOCK_K, BLOCK_K)
        return acc + jnp.dot(a_ref[:, k], b_ref[k, :], preferred_element_type=jnp.float32)

    acc = jnp.zeros((BLOCK_M, BLOCK_N), jnp.float32)
    acc = jax.lax.fori_loop(0, num_k_tiles, body, acc)
    c_ref[...] = acc.astype(c_ref.dtype)


def matmul(a, b):
    (m, k), (_, n) = a.shape, b.shape
    return pl.pallas_call(
        functools.partial(matmul_kernel, num_k_tiles=k // BLOCK_K),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // BLOCK_M, n // BLOCK_N),
        in_specs=[
            pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
    )(a, b)


def bmm(a, b, block=64):
    batch, m, k = a.shape
    n = b.shape[2]

    def bmm_kernel(a_ref, b_ref, o_ref):
        acc = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = acc.astype(o_ref.dtype)

    return pl.pallas_call(
        bmm_kernel,
        out_shape=jax.ShapeDtypeStruct((batch, m, n), a.dtype),
        grid=(batch, m // block, n // block),
        in_specs=[
            pl.BlockSpec((None, block, k), lambda b, i, j: (b, i, 0)),
            pl.BlockSpec((None, k, block), lambda b, i, j: (b, 0, j)),
        ],
        out_specs=pl.BlockSpec((None, block, block), lambda b, i, j: (b, i, j)),
    )(a, b)


SOLUTIONS = {"04.k_loop": matmul, "04.batched": bmm}
