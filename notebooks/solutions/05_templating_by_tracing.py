"""Solutions to the exercises of 05_templating_by_tracing.ipynb."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 64


def matmul_act(x, y, activation=None):
    (m, k), (_, n) = x.shape, y.shape

    def kernel(x_ref, y_ref, o_ref):
        acc = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
        if activation is not None:  # known while tracing: no branch in the kernel
            acc = activation(acc)
        o_ref[...] = acc.astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // BLOCK, n // BLOCK),
        in_specs=[
            pl.BlockSpec((BLOCK, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, BLOCK), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
    )(x, y)


def tril_matmul(x, y):
    (m, k), (_, n) = x.shape, y.shape

    def kernel(x_ref, y_ref, o_ref):
        i, j = pl.program_id(0), pl.program_id(1)

        @pl.when(j <= i)
        def _():
            acc = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
            o_ref[...] = acc.astype(o_ref.dtype)

        @pl.when(j > i)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // BLOCK, n // BLOCK),
        in_specs=[
            pl.BlockSpec((BLOCK, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, BLOCK), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
    )(x, y)


SOLUTIONS = {"05.fused": matmul_act, "05.block_tril": tril_matmul}
