"""Mosaic GPU kernels of our own, one per style, for the Tiles tab, SMEM budgets and hints.

Each builder returns `(fn, args)`: a function calling one `plgpu.kernel` and the
`jax.ShapeDtypeStruct`s to inspect it with, small enough to trace in well under a
second on a CPU. None asks the device anything while it is traced: the persistent
kernel takes the SM count as a parameter (`num_sms`), as the brief allows.

- `tma_wgmma_matmul`: `plgpu.emit_pipeline` over K with tiled and swizzled SMEM
  windows (TMA copies in), `plgpu.wgmma` into a register accumulator, the result
  stored through SMEM with a TMA copy out.
- `warp_specialized_matmul`: `plgpu.emit_pipeline_warp_specialized`: a memory
  warpgroup issues the copies, two compute warpgroups each multiply half the tile.
- `persistent_matmul`: one CTA per SM (`num_sms`), `plgpu.nd_loop` over the output
  tiles, a pipeline per tile.
- `manual_copies`: no pipeline: SMEM scratch, a barrier, `copy_gmem_to_smem`,
  `barrier_wait`, arithmetic in registers, `copy_smem_to_gmem` and its wait.
- `tcgen05_matmul`: Blackwell: operands copied to SMEM by TMA, `plgpu.tcgen05_mma`
  into a TMEM accumulator, completion on a barrier.

The figures the tests expect are computed by hand in the tests from these shapes.
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

F16 = jnp.float16


def _kernel(body, out, *, scratch=(), **mesh):
    """`plgpu.kernel` under the names of the installed JAX (`out_type` from 0.10.2 on)."""
    names = inspect.signature(plgpu.kernel).parameters
    if "out_type" in names:
        return plgpu.kernel(body, out_type=out, scratch_types=scratch, **mesh)
    return plgpu.kernel(body, out_shape=out, scratch_shapes=scratch, **mesh)


def swizzled(dtype, minor: int, swizzle: int | None = None):
    """Tiling and swizzle for an SMEM window whose minor dimension is `minor` elements.

    The swizzle is the largest of 128, 64, 32 bytes that the row divides (Mosaic
    GPU's own `find_swizzle` choice) unless given.
    """
    itemsize = jnp.dtype(dtype).itemsize
    if swizzle is None:
        swizzle = next(s for s in (128, 64, 32) if (minor * itemsize) % s == 0)
    elems = swizzle // itemsize
    return (plgpu.TilingTransform((8, elems)), plgpu.SwizzleTransform(swizzle))


def tma_wgmma_matmul(
    m=256,
    n=256,
    k=512,
    *,
    tile_m=128,
    tile_n=128,
    tile_k=64,
    steps=3,
    dtype=F16,
    swizzle=None,
    acc_dtype=jnp.float32,
):
    """C = A @ B: a pipeline over K feeding `wgmma`, the tile written back by TMA."""
    in_transforms = swizzled(dtype, tile_k, swizzle)
    b_transforms = swizzled(dtype, tile_n, swizzle)
    out_transforms = swizzled(dtype, tile_n)

    def kernel(a_gmem, b_gmem, o_gmem, o_smem):
        mi = lax.axis_index("m")
        ni = lax.axis_index("n")

        @functools.partial(pl.run_scoped, acc_ref=plgpu.ACC((tile_m, tile_n), acc_dtype))
        def _(acc_ref):
            def step(_, a_smem, b_smem):
                plgpu.wgmma(acc_ref, a_smem, b_smem)  # wgmma-line
                plgpu.wgmma_wait(1)

            plgpu.emit_pipeline(  # pipeline-line
                step,
                grid=(k // tile_k,),
                in_specs=[
                    plgpu.BlockSpec(
                        (tile_m, tile_k), lambda kk: (mi, kk), transforms=in_transforms
                    ),
                    plgpu.BlockSpec((tile_k, tile_n), lambda kk: (kk, ni), transforms=b_transforms),
                ],
                max_concurrent_steps=steps,
            )(a_gmem, b_gmem)
            o_smem[...] = acc_ref[...].astype(dtype)

        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(  # store-line
            o_smem, o_gmem.at[pl.ds(mi * tile_m, tile_m), pl.ds(ni * tile_n, tile_n)]
        )
        plgpu.wait_smem_to_gmem(0)

    def matmul(a, b):
        return _kernel(  # tma-call-line
            kernel,
            jax.ShapeDtypeStruct((m, n), dtype),
            scratch=[plgpu.SMEM((tile_m, tile_n), dtype, transforms=out_transforms)],
            grid=(m // tile_m, n // tile_n),
            grid_names=("m", "n"),
        )(a, b)

    args = (jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype))
    return matmul, args


def warp_specialized_matmul(m=256, n=256, k=256, *, tile_m=64, tile_k=64, steps=2, dtype=F16):
    """C = A @ B with a memory warpgroup feeding two compute warpgroups (N split in two)."""
    tile_n = 2 * 64  # each compute warpgroup takes 64 columns
    transforms = swizzled(dtype, tile_k)

    def kernel(a_gmem, b_gmem, o_gmem):
        mi = lax.axis_index("m")
        ni = lax.axis_index("n")
        wg = lax.axis_index("wg")
        wg_cols = pl.ds(wg * 64, 64)

        def compute_context(eval_pipeline):
            @functools.partial(pl.run_scoped, acc_ref=plgpu.ACC((tile_m, 64), jnp.float32))
            def _(acc_ref):
                eval_pipeline(acc_ref)
                o_gmem[pl.ds(mi * tile_m, tile_m), pl.ds(ni * tile_n + wg * 64, 64)] = acc_ref[
                    ...
                ].astype(dtype)

        def body(_, a_smem, b_smem, acc_ref):
            plgpu.wgmma(acc_ref, a_smem, b_smem.at[:, wg_cols])
            plgpu.wgmma_wait(0)
            return acc_ref

        plgpu.emit_pipeline_warp_specialized(  # ws-pipeline-line
            body,
            grid=(k // tile_k,),
            memory_registers=40,
            in_specs=[
                plgpu.BlockSpec((tile_m, tile_k), lambda kk: (mi, kk), transforms=transforms),
                plgpu.BlockSpec((tile_k, tile_n), lambda kk: (kk, ni), transforms=transforms),
            ],
            max_concurrent_steps=steps,
            wg_axis="wg",
            num_compute_wgs=2,
            compute_context=compute_context,
        )(a_gmem, b_gmem)

    def matmul(a, b):
        return _kernel(
            kernel,
            jax.ShapeDtypeStruct((m, n), dtype),
            grid=(m // tile_m, n // tile_n),
            grid_names=("m", "n"),
            num_threads=3,
            thread_name="wg",
        )(a, b)

    args = (jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype))
    return matmul, args


def persistent_matmul(
    m=512, n=512, k=256, *, num_sms=132, tile_m=128, tile_n=128, tile_k=64, steps=2, dtype=F16
):
    """C = A @ B with `num_sms` CTAs, each looping over output tiles (`plgpu.nd_loop`)."""
    m_tiles, n_tiles = m // tile_m, n // tile_n
    a_transforms = swizzled(dtype, tile_k)
    b_transforms = swizzled(dtype, tile_n)

    def kernel(a_gmem, b_gmem, o_gmem):
        @plgpu.nd_loop((m_tiles, n_tiles), collective_axes="sm")  # tile-loop-line
        def _tile(loop_info):
            mi, ni = loop_info.index

            @functools.partial(pl.run_scoped, acc_ref=plgpu.ACC((tile_m, tile_n), jnp.float32))
            def _(acc_ref):
                def step(_, a_smem, b_smem):
                    plgpu.wgmma(acc_ref, a_smem, b_smem)
                    plgpu.wgmma_wait(1)

                plgpu.emit_pipeline(
                    step,
                    grid=(k // tile_k,),
                    in_specs=[
                        plgpu.BlockSpec(
                            (tile_m, tile_k), lambda kk: (mi, kk), transforms=a_transforms
                        ),
                        plgpu.BlockSpec(
                            (tile_k, tile_n), lambda kk: (kk, ni), transforms=b_transforms
                        ),
                    ],
                    max_concurrent_steps=steps,
                )(a_gmem, b_gmem)
                o_gmem[pl.ds(mi * tile_m, tile_m), pl.ds(ni * tile_n, tile_n)] = acc_ref[
                    ...
                ].astype(dtype)

    def matmul(a, b):
        return _kernel(  # persistent-grid-line
            kernel, jax.ShapeDtypeStruct((m, n), dtype), grid=(num_sms,), grid_names=("sm",)
        )(a, b)

    args = (jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype))
    return matmul, args


def manual_copies(rows=512, cols=128, *, block_rows=64, dtype=jnp.float32):
    """y = 2x + 1, row blocks copied by hand through two SMEM slots and a barrier each."""
    blocks = rows // block_rows

    def kernel(x_gmem, o_gmem, x_smem, o_smem, barriers):
        def fetch(i):
            plgpu.copy_gmem_to_smem(  # manual-load-line
                x_gmem.at[pl.ds(i * block_rows, block_rows)], x_smem.at[i % 2], barriers.at[i % 2]
            )

        fetch(0)

        @pl.loop(0, blocks)
        def _(i):
            @pl.when(i + 1 < blocks)
            def _():
                fetch(i + 1)

            plgpu.barrier_wait(barriers.at[i % 2])
            plgpu.wait_smem_to_gmem(1, wait_read_only=True)
            o_smem[i % 2] = x_smem[i % 2] * 2 + 1
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(  # manual-store-line
                o_smem.at[i % 2], o_gmem.at[pl.ds(i * block_rows, block_rows)]
            )

        plgpu.wait_smem_to_gmem(0)

    def scale(x):
        return _kernel(
            kernel,
            jax.ShapeDtypeStruct((rows, cols), dtype),
            scratch=[
                plgpu.SMEM((2, block_rows, cols), dtype),
                plgpu.SMEM((2, block_rows, cols), dtype),
                plgpu.Barrier(num_barriers=2),
            ],
            grid=(1,),
            grid_names=("x",),
        )(x)

    return scale, (jax.ShapeDtypeStruct((rows, cols), dtype),)


def tcgen05_matmul(m=128, n=128, k=128, *, dtype=F16):
    """C = A @ B on Blackwell: TMA into swizzled SMEM, `tcgen05_mma` into TMEM."""
    transforms = swizzled(dtype, 64)

    def kernel(a_gmem, b_gmem, o_gmem, a_smem, b_smem, acc_tmem, tma_barrier, mma_barrier):
        plgpu.copy_gmem_to_smem(a_gmem, a_smem, tma_barrier)
        plgpu.barrier_wait(tma_barrier)
        plgpu.copy_gmem_to_smem(b_gmem, b_smem, tma_barrier)
        plgpu.barrier_wait(tma_barrier)
        plgpu.tcgen05_mma(acc_tmem, a_smem, b_smem, mma_barrier, accumulate=False)  # tcgen05-line
        plgpu.barrier_wait(mma_barrier)
        o_gmem[...] = plgpu.async_load_tmem(acc_tmem).astype(dtype)

    def matmul(a, b):
        return _kernel(
            kernel,
            jax.ShapeDtypeStruct((m, n), dtype),
            scratch=[
                plgpu.SMEM((m, k), dtype, transforms=transforms),
                plgpu.SMEM((k, n), dtype, transforms=transforms),
                plgpu.TMEM((m, n), jnp.float32),
                plgpu.Barrier(),
                plgpu.Barrier(orders_tensor_core=True),
            ],
            grid=(1,),
            grid_names=("x",),
        )(a, b)

    args = (jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype))
    return matmul, args


def pallas_call_matmul(
    m=256, n=256, k=256, *, block=(128, 128, 64), steps=2, dtype=F16, interpret=None
):
    """C = A @ B as a `pallas_call` with Mosaic GPU params: K is the sequential axis.

    `interpret`: passed to `pallas_call` (Mosaic GPU's interpreter's params, say).
    """
    bm, bn, bk = block
    transforms = swizzled(dtype, bk)
    b_transforms = swizzled(dtype, bn)

    def kernel(a_smem, b_smem, o_smem, acc_ref):
        plgpu.wgmma(acc_ref, a_smem, b_smem)
        plgpu.wgmma_wait(0)

        @pl.when(pl.program_id(2) == k // bk - 1)
        def _():
            o_smem[...] = acc_ref[...].astype(dtype)

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            plgpu.BlockSpec((bm, bk), lambda i, j, kk: (i, kk), transforms=transforms),
            plgpu.BlockSpec((bk, bn), lambda i, j, kk: (kk, j), transforms=b_transforms),
        ],
        out_specs=plgpu.BlockSpec((bm, bn), lambda i, j, kk: (i, j), transforms=b_transforms),
        scratch_shapes=[plgpu.ACC((bm, bn), jnp.float32)],
        compiler_params=plgpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "sequential"),
            max_concurrent_steps=steps,
        ),
        **({"interpret": interpret} if interpret is not None else {}),
    )
    args = (jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype))
    return fn, args


def pl_kernel_rows(rows=256, cols=128, *, ctas=2, closed_over=False):
    """y = 2x by row blocks on a GPU mesh: `pl.kernel`, or `pl.core_map` (closed over refs)."""
    block = rows // ctas
    out = jax.ShapeDtypeStruct((rows, cols), jnp.float32)

    def body(x_ref, o_ref):
        i = lax.axis_index("x")
        o_ref[pl.ds(i * block, block)] = x_ref[pl.ds(i * block, block)] * 2  # rows-line

    def scale(x):
        mesh = plgpu.Mesh(grid=(ctas,), grid_names=("x",))
        if not closed_over:
            names = inspect.signature(pl.kernel).parameters
            out_kw = {"out_type": out} if "out_type" in names else {"out_shape": out}
            return pl.kernel(body, mesh=mesh, **out_kw)(x)

        def stateful(refs):
            x_ref, o_ref = refs
            pl.core_map(mesh)(lambda: body(x_ref, o_ref))

        return pl.run_state(stateful)((x, jnp.zeros_like(x)))[1]

    return scale, (out,)
