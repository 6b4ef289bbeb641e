"""Solutions to the exercises of 07_tpu.ipynb."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_rows(x, y, rows=8):
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))  # (8, 1024): (8, 128)-aligned
    return pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // rows,),
        in_specs=[spec, spec],
        out_specs=spec,
    )(x, y)


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, block=128):
    (m, k), (_, n) = x.shape, y.shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // block, n // block, k // block),
        in_specs=[
            pl.BlockSpec((block, block), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((block, block), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((block, block), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((block, block), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(x, y)


def scale(s, x):
    def scale_kernel(s_ref, x_ref, o_ref):
        o_ref[...] = s_ref[0] * x_ref[...]

    block = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(
        scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 8, x.shape[1] // 128),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), block],
        out_specs=block,
    )(s, x)


SOLUTIONS = {"07.tiling": add_rows, "07.scratch_matmul": matmul, "07.smem_scalar": scale}
