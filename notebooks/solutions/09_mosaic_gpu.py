"""Solutions to the exercises of 09_mosaic_gpu.ipynb."""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS = 16  # rows of one warpgroup


def double(x):
    rows, cols = x.shape

    def body(x_gmem, o_gmem, x_smem, loaded):
        cta, wg = lax.axis_index("cta"), lax.axis_index("wg")
        mine = pl.ds(wg * ROWS, ROWS)  # this warpgroup's rows of the CTA's buffer
        window = pl.ds(cta * 2 * ROWS + wg * ROWS, ROWS)  # and of x: its own 16 rows
        plgpu.copy_gmem_to_smem(x_gmem.at[window], x_smem.at[mine], loaded.at[wg])
        plgpu.barrier_wait(loaded.at[wg])
        x_smem[mine] = x_smem[mine] * 2
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(x_smem.at[mine], o_gmem.at[window])
        plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // (2 * ROWS),),
        grid_names=("cta",),
        num_threads=2,
        thread_name="wg",
        scratch_types=[
            plgpu.SMEM((2 * ROWS, cols), x.dtype),
            plgpu.Barrier(num_arrivals=1, num_barriers=2),
        ],
    )(x)


TILE_M, TILE_N, TILE_K = 64, 128, 64
SWIZZLE = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


def matmul(a, b):
    m, k = a.shape
    _, n = b.shape

    def body(a_gmem, b_gmem, o_gmem, o_smem):
        i, j = lax.axis_index("m"), lax.axis_index("n")

        @functools.partial(pl.run_scoped, acc=plgpu.ACC((TILE_M, TILE_N), jnp.float32))
        def _(acc):
            def step(_, a_smem, b_smem):
                plgpu.wgmma(acc, a_smem, b_smem)
                plgpu.wgmma_wait(1)

            plgpu.emit_pipeline(
                step,
                grid=(k // TILE_K,),
                in_specs=[
                    plgpu.BlockSpec(
                        (TILE_M, TILE_K), lambda s: (i, s), transforms=SWIZZLE, delay_release=1
                    ),
                    plgpu.BlockSpec(
                        (TILE_K, TILE_N), lambda s: (s, j), transforms=SWIZZLE, delay_release=1
                    ),
                ],
                max_concurrent_steps=2,
            )(a_gmem, b_gmem)
            plgpu.wgmma_wait(0)
            o_smem[...] = acc[...]

        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(
            o_smem, o_gmem.at[pl.ds(i * TILE_M, TILE_M), pl.ds(j * TILE_N, TILE_N)]
        )
        plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // TILE_M, n // TILE_N),
        grid_names=("m", "n"),
        scratch_types=[plgpu.SMEM((TILE_M, TILE_N), jnp.float32)],
    )(a, b)


SOLUTIONS = {"09.warpgroups": double, "09.wgmma": matmul}
