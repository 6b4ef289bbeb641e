"""Mosaic GPU kernels of our own, one per style GPU kernels are written in now.

Each is a plain function of its arrays, as a user writes one, with a NumPy reference
(the oracle: the tests run them through JAX's Mosaic GPU interpreter on a CPU and
compare) and the SASS instructions its lowering must hold (`xla-gpu:<chip>`):

- `persistent_double`: a persistent grid, one program per SM (the count asked of the
  device while traced), each looping over its tiles with `plgpu.nd_loop`; TMA copies.
- `warp_specialized_add`: `plgpu.emit_pipeline_warp_specialized`, a memory warpgroup
  feeding a compute warpgroup through shared memory.
- `cluster_scale`: cluster axes (a cluster of two blocks), two warpgroup threads and a
  shared-memory buffer allocated collectively across them (`run_scoped`).
- `wgmma_matmul`: a TMA + `wgmma` matmul over `plgpu.emit_pipeline` (Hopper).
- `tcgen05_matmul`: a Blackwell `tcgen05_mma` into tensor memory (B200 only), read
  back with `async_load_tmem`; JAX's interpreter runs it only from 0.12 on.

Small shapes: the interpreter simulates every thread and copy on the CPU.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

ROWS = 16  # rows of a tile of the elementwise kernels


def persistent_double(x):
    """`x * 2` on a persistent grid: one program per SM, `nd_loop` over the tiles."""
    sms = jax.devices()[0].core_count  # the device asked while traced: 132 on an H100
    rows, cols = x.shape

    def body(x_gmem, o_gmem, x_smem, o_smem, loaded):
        @plgpu.nd_loop((rows // ROWS,), collective_axes="sm")
        def _tile(info):
            (t,) = info.index
            window = pl.ds(t * ROWS, ROWS)
            plgpu.copy_gmem_to_smem(x_gmem.at[window], x_smem, loaded)  # TMA load
            plgpu.barrier_wait(loaded)
            o_smem[...] = x_smem[...] * 2.0
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[window])  # TMA store
            plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(sms,),
        grid_names=("sm",),
        scratch_types=[
            plgpu.SMEM((ROWS, cols), x.dtype),
            plgpu.SMEM((ROWS, cols), x.dtype),
            plgpu.Barrier(num_arrivals=1),
        ],
    )(x)


BLOCK = 64  # the warp-specialized pipeline's block (rows and columns)


def warp_specialized_add(x, y):
    """`x + y`, a memory warpgroup streaming blocks to a compute warpgroup.

    The compute warpgroup stores each sum itself (a TMA store from its own buffer).
    """
    m, n = x.shape
    spec = pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j))

    def body(x_gmem, y_gmem, o_gmem, o_smem):
        def add_block(indices, x_smem, y_smem):
            i, j = indices
            o_smem[...] = x_smem[...] + y_smem[...]  # the compute warpgroup's line
            plgpu.commit_smem()
            window = o_gmem.at[pl.ds(i * BLOCK, BLOCK), pl.ds(j * BLOCK, BLOCK)]
            plgpu.copy_smem_to_gmem(o_smem, window)
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # o_smem is free again

        plgpu.emit_pipeline_warp_specialized(
            add_block,
            grid=(m // BLOCK, n // BLOCK),
            memory_registers=40,
            max_concurrent_steps=2,
            num_compute_wgs=1,
            wg_axis="wg",
            in_specs=[spec, spec],
        )(x_gmem, y_gmem)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        num_threads=2,  # one compute warpgroup and the memory one
        thread_name="wg",
        scratch_types=[plgpu.SMEM((BLOCK, BLOCK), x.dtype)],
    )(x, y)


def cluster_scale(x):
    """`x * 3`: blocks in clusters of two, two warpgroups sharing one SMEM buffer."""
    rows, cols = x.shape
    tile = 2 * ROWS  # a block's rows: ROWS per warpgroup
    blocks = rows // tile

    def body(x_gmem, o_gmem, loaded):
        block = lax.axis_index("g") * 2 + lax.axis_index("c")  # cluster axis "c"
        wg = lax.axis_index("wg")
        rows_of_block = pl.ds(block * tile, tile)

        @functools.partial(
            pl.run_scoped, shared=plgpu.SMEM((tile, cols), x.dtype), collective_axes="wg"
        )
        def _(shared):
            mine = pl.ds(wg * ROWS, ROWS)  # each warpgroup its own rows of `shared`
            plgpu.copy_gmem_to_smem(
                x_gmem.at[rows_of_block].at[mine], shared.at[mine], loaded.at[wg]
            )
            plgpu.barrier_wait(loaded.at[wg])
            shared[mine] = shared[mine] * 3.0
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(shared.at[mine], o_gmem.at[rows_of_block].at[mine])
            plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(blocks // 2,),
        grid_names=("g",),
        cluster=(2,),
        cluster_names=("c",),
        num_threads=2,
        thread_name="wg",
        scratch_types=[plgpu.Barrier(num_arrivals=1, num_barriers=2)],
    )(x)


TILE_M, TILE_N, TILE_K = 64, 128, 64  # one warpgroup's wgmma tile


def wgmma_matmul(a, b):
    """`a @ b` (f16 in, f32 accumulated): TMA-fed `emit_pipeline` steps of `wgmma`."""
    m, k = a.shape
    _, n = b.shape
    swizzle = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))

    def body(a_gmem, b_gmem, o_gmem, o_smem):
        i, j = lax.axis_index("m"), lax.axis_index("n")

        @functools.partial(pl.run_scoped, acc=plgpu.ACC((TILE_M, TILE_N), jnp.float32))
        def _(acc):  # the accumulator lives in registers, allocated on its own
            def step(_, a_smem, b_smem):
                plgpu.wgmma(acc, a_smem, b_smem)  # the tensor-core line
                plgpu.wgmma_wait(1)

            plgpu.emit_pipeline(
                step,
                grid=(k // TILE_K,),
                in_specs=[
                    plgpu.BlockSpec(
                        (TILE_M, TILE_K), lambda s: (i, s), transforms=swizzle, delay_release=1
                    ),
                    plgpu.BlockSpec(
                        (TILE_K, TILE_N), lambda s: (s, j), transforms=swizzle, delay_release=1
                    ),
                ],
                max_concurrent_steps=2,
            )(a_gmem, b_gmem)
            plgpu.wgmma_wait(0)
            o_smem[...] = acc[...].astype(o_smem.dtype)

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


MMA = 128  # the tcgen05 kernel's M, N and K


def tcgen05_matmul(a, b):
    """`a @ b` on Blackwell's tensor cores: `tcgen05_mma` into tensor memory (TMEM)."""
    swizzle = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))

    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, o_smem, acc_tmem, loaded, done):
        plgpu.copy_gmem_to_smem(a_gmem, a_smem, loaded)
        plgpu.copy_gmem_to_smem(b_gmem, b_smem, loaded)
        plgpu.barrier_wait(loaded)
        plgpu.tcgen05_mma(acc_tmem, a_smem, b_smem, done, accumulate=False)  # the MMA line
        plgpu.barrier_wait(done)
        o_smem[...] = plgpu.async_load_tmem(acc_tmem).astype(o_smem.dtype)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_smem, o_gmem)
        plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((MMA, MMA), a.dtype),
        scratch_types=[
            plgpu.SMEM((MMA, MMA), a.dtype, transforms=swizzle),
            plgpu.SMEM((MMA, MMA), b.dtype, transforms=swizzle),
            plgpu.SMEM((MMA, MMA), a.dtype),
            plgpu.TMEM((MMA, MMA), jnp.float32),
            plgpu.Barrier(num_arrivals=2),
            plgpu.Barrier(orders_tensor_core=True),
        ],
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
    )(a, b)


# ---------------------------------------------------------------------------
# The cases: arguments, the NumPy reference, what the lowering must hold.


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel of the corpus.

    Attributes:
        name: The kernel's style.
        fn: The function calling it.
        args: Example arguments (small).
        reference: NumPy's answer on `args`.
        sass: SASS mnemonics its lowering must hold, per chip ("H100", "B200").
        chips: The chips it lowers for (a `tcgen05` kernel only for Blackwell).
        rtol: Tolerance against the reference (f16 inputs are summed in f32).
        interpretable: Whether JAX's Mosaic GPU interpreter runs it (a callable of
            nothing, asked when the test runs: it depends on the installed JAX).
    """

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    reference: Callable[..., np.ndarray]
    sass: dict[str, tuple[str, ...]]
    chips: tuple[str, ...] = ("H100", "B200")
    rtol: float = 1e-6
    interpretable: Callable[[], bool] = lambda: True


def _f32(*shape: int, seed: int = 0) -> jax.Array:
    return jax.random.uniform(jax.random.key(seed), shape, jnp.float32)


def _f16(*shape: int, seed: int = 0) -> jax.Array:
    return jax.random.uniform(jax.random.key(seed), shape, jnp.float16)


def interpreter_runs_tcgen05() -> bool:
    """Whether the installed JAX's Mosaic GPU interpreter runs `tcgen05_mma` (0.12 on)."""
    from pallaslab._src.core import jax_adapter

    return jax_adapter.gpu_interpreter_runs("tcgen05_mma")


def cases() -> list[Case]:
    """The corpus, with fresh arguments."""
    x = _f32(4 * 2 * ROWS, 128)
    a, b = _f16(128, 128, seed=1), _f16(128, 256, seed=2)
    ta, tb = _f16(MMA, MMA, seed=3), _f16(MMA, MMA, seed=4)

    def mm(p, q):
        return np.asarray(p, np.float32) @ np.asarray(q, np.float32)

    return [
        Case(
            "persistent_double",
            persistent_double,
            (x,),
            lambda x: np.asarray(x) * 2,
            # TMA loads; the stores of whole rows are bulk copies (cp.async.bulk).
            {"H100": ("UTMALDG", "UBLKCP"), "B200": ("UTMALDG", "UBLKCP")},
        ),
        Case(
            "warp_specialized_add",
            warp_specialized_add,
            (_f32(2 * BLOCK, 2 * BLOCK, seed=5), _f32(2 * BLOCK, 2 * BLOCK, seed=6)),
            lambda x, y: np.asarray(x) + np.asarray(y),
            # TMA loads and stores; the memory warpgroup gives registers back (setmaxnreg).
            {
                "H100": ("UTMALDG", "UTMASTG", "USETMAXREG"),
                "B200": ("UTMALDG", "UTMASTG", "USETMAXREG"),
            },
        ),
        Case(
            "cluster_scale",
            cluster_scale,
            (x,),
            lambda x: np.asarray(x) * 3,
            # The cluster's barrier (barrier.cluster) around TMA loads.
            {
                "H100": ("UTMALDG", "UCGABAR_ARV", "UCGABAR_WAIT"),
                "B200": ("UTMALDG", "UCGABAR_ARV", "UCGABAR_WAIT"),
            },
        ),
        Case(
            "wgmma_matmul",
            wgmma_matmul,
            (a, b),
            mm,
            {"H100": ("HGMMA", "UTMALDG")},
            chips=("H100",),
            rtol=2e-3,
        ),
        Case(
            "tcgen05_matmul",
            tcgen05_matmul,
            (ta, tb),
            lambda p, q: mm(p, q).astype(np.float16),
            {"B200": ("UTCHMMA", "UTMALDG")},
            chips=("B200",),
            rtol=2e-2,
            interpretable=interpreter_runs_tcgen05,
        ),
    ]
