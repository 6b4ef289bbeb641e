"""Kernels written in the styles of the seed documents, with what we expect of them.

Each case builds a callable and example arguments, a reference implementation, and
the facts a correct inspection must report (grid, block shapes, roles, jaxpr
contents). Shared by the core, tile, check, IR and emulator tests.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton


@dataclasses.dataclass(frozen=True)
class KernelFacts:
    """What the inspection must say about one kernel."""

    grid: tuple[int, ...]
    block_shapes: tuple[tuple[int | None, ...], ...]
    roles: tuple[str, ...]
    jaxpr_has: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    reference: Callable[..., Any]
    kernels: tuple[KernelFacts, ...]
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Whether pallaslab's emulator runs every kernel (else Pallas' interpreter does:
    # DMAs, pipelines, mesh kernels).
    emulated: bool = True


def f32(*shape: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.float32)


# 1. Seed 000: the first example, whole arrays, no grid.
def vector_add() -> Case:
    def add_kernel(x_ref, y_ref, o_ref):
        x = x_ref[:]
        y = y_ref[:]
        o_ref[:] = x + y

    add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))
    return Case(
        "vector_add",
        add,
        (f32(8), f32(8)),
        lambda x, y: x + y,
        (KernelFacts((), ((8,), (8,), (8,)), ("in", "in", "out"), ("add",)),),
    )


# 2. The core issue's example: blocked add with BlockSpecs.
def blocked_add() -> Case:
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    add = pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    return Case(
        "blocked_add",
        add,
        (f32(1024), f32(1024)),
        lambda x, y: x + y,
        (KernelFacts((8,), ((128,), (128,), (128,)), ("in", "in", "out"), ("add",)),),
    )


# 3. Seed 002: tiled matmul, fori_loop over K with pl.ds, Triton compiler params.
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


def make_seed_matmul(
    block_m: int = BLOCK_M,
    block_n: int = BLOCK_N,
    block_k: int = BLOCK_K,
    *,
    num_warps: int = 4,
    num_stages: int = 3,
    epilogue: Callable[[Any], Any] | None = None,
    interpret: bool = False,
) -> Callable[..., Any]:
    """The seed tutorial's matmul (002), jitted, for any blocks (and a fused epilogue)."""

    def _matmul_kernel(a_ref, b_ref, c_ref, *, num_k_tiles):
        acc = jnp.zeros((block_m, block_n), dtype=jnp.float32)

        def body(t, acc):
            k_idx = pl.dslice(t * block_k, block_k)
            a_tile = pltriton.load(a_ref.at[:, k_idx])
            b_tile = pltriton.load(b_ref.at[k_idx, :])
            return acc + pltriton.dot(a_tile, b_tile).astype(jnp.float32)

        acc = jax.lax.fori_loop(0, num_k_tiles, body, acc)
        if epilogue is not None:
            acc = epilogue(acc)
        pltriton.store(c_ref, acc.astype(c_ref.dtype))

    @jax.jit
    def matmul(a, b):
        m_, k_ = a.shape
        _, n_ = b.shape
        return pl.pallas_call(
            functools.partial(_matmul_kernel, num_k_tiles=pl.cdiv(k_, block_k)),
            out_shape=jax.ShapeDtypeStruct((m_, n_), a.dtype),
            grid=(pl.cdiv(m_, block_m), pl.cdiv(n_, block_n)),
            in_specs=[
                pl.BlockSpec((block_m, k_), lambda i, j: (i, 0)),
                pl.BlockSpec((k_, block_n), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
            compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
            interpret=interpret,
        )(a, b)

    return matmul


def seed_matmul(m: int = 256, n: int = 256, k: int = 128, dtype: Any = jnp.float32) -> Case:
    spec = lambda *s: jax.ShapeDtypeStruct(s, dtype)  # noqa: E731
    return Case(
        "seed_matmul",
        make_seed_matmul(),
        (spec(m, k), spec(k, n)),
        lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(dtype),
        (
            KernelFacts(
                (m // BLOCK_M, n // BLOCK_N),
                ((BLOCK_M, k), (k, BLOCK_N), (BLOCK_M, BLOCK_N)),
                ("in", "in", "out"),
                ("dot_general", "scan"),
            ),
        ),
    )


# 4. Matmul accumulating into the output across a k grid axis, zeroed with pl.when.
def kacc_matmul(
    m: int = 256, n: int = 256, k: int = 256, bm: int = 128, bn: int = 128, bk: int = 128
) -> Case:
    def kernel(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )
    return Case(
        "kacc_matmul",
        fn,
        (f32(m, k), f32(k, n)),
        lambda x, y: x @ y,
        (
            KernelFacts(
                (m // bm, n // bn, k // bk),
                ((bm, bk), (bk, bn), (bm, bn)),
                ("in", "in", "out"),
                ("cond", "dot_general"),
            ),
        ),
    )


# 5. Row softmax with masked loads (seed 004's Triton-style softmax).
def row_softmax(rows: int = 16, cols: int = 100) -> Case:
    block = pl.next_power_of_2(cols)

    def softmax_kernel(x_ref, o_ref):
        mask = jnp.arange(block) < cols
        row = pltriton.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-float("inf"))
        row_max = jnp.max(row, axis=0)
        numerator = jnp.exp(row - row_max)
        denominator = jnp.sum(numerator, axis=0)
        pltriton.store(o_ref.at[pl.ds(0, block)], numerator / denominator, mask=mask)

    fn = pl.pallas_call(
        softmax_kernel,
        out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
        grid=(rows,),
        in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None, cols), lambda i: (i, 0)),
    )
    return Case(
        "row_softmax",
        fn,
        (f32(rows, cols),),
        lambda x: jax.nn.softmax(x, axis=-1),
        (KernelFacts((rows,), ((None, cols), (None, cols)), ("in", "out"), ("exp", "reduce_max")),),
    )


# 6. Seed 001: a scratch buffer (TPU VMEM) that accumulates.
def with_scratch() -> Case:
    def kernel(x_ref, o_ref, acc_ref):
        acc_ref[...] = x_ref[...] * 2.0
        acc_ref[...] += 1.0
        o_ref[...] = acc_ref[...]

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((512, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(4,),
            in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
        ),
    )
    return Case(
        "with_scratch",
        fn,
        (f32(512, 128),),
        lambda x: x * 2.0 + 1.0,
        (KernelFacts((4,), ((128, 128), (128, 128), (128, 128)), ("in", "out", "scratch")),),
    )


# 7. Seed 000: a templated kernel made by a closure.
def make_kernel(eltwise_kernel: Callable[[Any], Any]) -> Callable[..., None]:
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = eltwise_kernel(x_ref[...] + y_ref[...])

    return add


def templated() -> Case:
    kernel = make_kernel(jnp.exp)
    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    return Case(
        "templated",
        fn,
        (f32(256), f32(256)),
        lambda x, y: jnp.exp(x + y),
        (KernelFacts((2,), ((128,), (128,), (128,)), ("in", "in", "out"), ("exp",)),),
    )


# 8. A vmap of a pallas_call: vmap adds a grid axis and squeezes a batch dimension.
def vmapped() -> Case:
    inner = blocked_add().fn
    return Case(
        "vmapped",
        jax.vmap(inner),
        (f32(3, 1024), f32(3, 1024)),
        lambda x, y: x + y,
        (
            KernelFacts(
                (3, 8), ((None, 128), (None, 128), (None, 128)), ("in", "in", "out"), ("add",)
            ),
        ),
    )


# 9. Two kernels in one jitted function.
def two_kernels() -> Case:
    add = blocked_add().fn
    scale = pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...] * 3.0),
        out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((256,), lambda i: (i,))],
        out_specs=pl.BlockSpec((256,), lambda i: (i,)),
    )

    @jax.jit
    def program(x, y):
        return scale(add(x, y))

    return Case(
        "two_kernels",
        program,
        (f32(1024), f32(1024)),
        lambda x, y: (x + y) * 3.0,
        (
            KernelFacts((8,), ((128,), (128,), (128,)), ("in", "in", "out"), ("add",)),
            KernelFacts((4,), ((256,), (256,)), ("in", "out"), ("mul",)),
        ),
    )


# 10. A kernel under jax.grad through custom_vjp: a forward and a backward kernel.
def _square_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * x_ref[...]


def _square_grad_kernel(x_ref, g_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...] * g_ref[...]


def _square(x):
    return pl.pallas_call(
        _square_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )(x)


@jax.custom_vjp
def square(x):
    return _square(x)


def _square_fwd(x):
    return _square(x), x


def _square_bwd(x, g):
    grad = pl.pallas_call(
        _square_grad_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )(x, g)
    return (grad,)


square.defvjp(_square_fwd, _square_bwd)


def grad_custom_vjp() -> Case:
    fn = jax.grad(lambda x: jnp.sum(square(x)))
    return Case(
        "grad_custom_vjp",
        fn,
        (f32(256),),
        lambda x: 2.0 * x,
        (
            KernelFacts((2,), ((128,), (128,)), ("in", "out"), ("mul",)),
            KernelFacts((2,), ((128,), (128,), (128,)), ("in", "in", "out"), ("mul",)),
        ),
    )


# 11. Scalar prefetch: the index map reads which block to fetch from a table.
def scalar_prefetch() -> Case:
    def kernel(order_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(8,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, order: (order[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, order: (i, 0)),
        ),
    )
    order = jnp.array([7, 6, 5, 4, 3, 2, 1, 0], dtype=jnp.int32)

    def reference(order, x):
        return x.reshape(8, 8, 128)[order].reshape(64, 128) + 1.0

    return Case(
        "scalar_prefetch",
        fn,
        (order, f32(64, 128)),
        reference,
        (KernelFacts((8,), ((8,), (8, 128), (8, 128)), ("in", "in", "out")),),
    )


# 12. pl.Element blocks with padding: a 3-point stencil whose blocks overlap by a
# halo row on each side; the first and last blocks start and end in the padding.
HALO_ROWS, HALO_BLOCK = 64, 8


def element_halo() -> Case:
    def stencil_kernel(x_ref, o_ref):
        i = pl.program_id(0)
        # Rows i*8-1 .. i*8+8 of x: the padding rows (outside x) hold garbage.
        rows = i * HALO_BLOCK - 1 + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)
        x = jnp.where((rows >= 0) & (rows < HALO_ROWS), x_ref[...], 0.0)
        o_ref[...] = x[:-2] + x[1:-1] + x[2:]

    # Element dimensions take element offsets (into the padded array); on TPU, every
    # dimension of such a block is an Element one.
    fn = pl.pallas_call(
        stencil_kernel,
        out_shape=jax.ShapeDtypeStruct((HALO_ROWS, 8, 128), jnp.float32),
        grid=(HALO_ROWS // HALO_BLOCK,),
        in_specs=[
            pl.BlockSpec(
                (pl.Element(HALO_BLOCK + 2, (1, 1)), pl.Element(8), pl.Element(128)),
                lambda i: (i * HALO_BLOCK, 0, 0),
            )
        ],
        out_specs=pl.BlockSpec((HALO_BLOCK, 8, 128), lambda i: (i, 0, 0)),
    )

    def reference(x):
        padded = jnp.pad(x, ((1, 1), (0, 0), (0, 0)))
        return padded[:-2] + padded[1:-1] + padded[2:]

    return Case(
        "element_halo",
        fn,
        (f32(HALO_ROWS, 8, 128),),
        reference,
        (KernelFacts((8,), ((10, 8, 128), (8, 8, 128)), ("in", "out"), ("add", "select_n")),),
    )


# 13. pltpu.emit_pipeline: the kernel takes whole arrays in HBM (pl.ANY) and runs its
# own pipeline of blocks over them (the Pallas TPU pipelining tutorial's style).
def _pipelined_add_kernel(x_hbm, y_hbm, o_hbm):
    def add_block(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    block = pl.BlockSpec((128, 128), lambda i, j: (i, j))
    pltpu.emit_pipeline(add_block, grid=(4, 2), in_specs=[block, block], out_specs=block)(
        x_hbm, y_hbm, o_hbm
    )


def pipelined_add() -> Case:
    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    fn = pl.pallas_call(
        _pipelined_add_kernel,
        out_shape=jax.ShapeDtypeStruct((512, 256), jnp.float32),
        in_specs=[anywhere, anywhere],
        out_specs=anywhere,
    )
    return Case(
        "pipelined_add",
        fn,
        (f32(512, 256), f32(512, 256)),
        lambda x, y: x + y,
        (
            KernelFacts(
                (), ((512, 256), (512, 256), (512, 256)), ("in", "in", "out"), ("dma_start",)
            ),
        ),
        emulated=False,
    )


# 14. pl.kernel on a TPU TensorCore mesh: refs in HBM, copied block by block into a
# VMEM buffer with DMAs, a chip-dependent op (jnp.sign); the mesh is made where the
# program is traced (on CPU, pallaslab says which TPU it is).
MESH_ROWS, MESH_BLOCK = 256, 64


def _mesh_sign_body(x_hbm, o_hbm, buf, sem):
    def step(b, carry):
        rows = pl.ds(b * MESH_BLOCK, MESH_BLOCK)
        pltpu.make_async_copy(x_hbm.at[rows], buf, sem).start()
        pltpu.make_async_copy(x_hbm.at[rows], buf, sem).wait()
        x = buf[...]
        buf[...] = jnp.sign(x) * jnp.sqrt(jnp.abs(x))
        pltpu.make_async_copy(buf, o_hbm.at[rows], sem).start()
        pltpu.make_async_copy(buf, o_hbm.at[rows], sem).wait()
        return carry

    jax.lax.fori_loop(0, MESH_ROWS // MESH_BLOCK, step, 0)


def tpu_mesh_kernel() -> Case:
    def signed_sqrt(x):
        mesh = pltpu.create_tensorcore_mesh("core")
        return pl.kernel(
            _mesh_sign_body,
            out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
            mesh=mesh,
            scratch_types=[pltpu.VMEM((MESH_BLOCK, 128), jnp.float32), pltpu.SemaphoreType.DMA],
        )(x)

    return Case(
        "tpu_mesh_kernel",
        jax.jit(signed_sqrt),
        (f32(MESH_ROWS, 128),),
        lambda x: jnp.sign(x) * jnp.sqrt(jnp.abs(x)),
        (
            KernelFacts(
                (1,),
                ((MESH_ROWS, 128), (MESH_ROWS, 128), (MESH_BLOCK, 128), ()),
                ("in", "out", "scratch", "scratch"),
                ("dma_start", "sign"),
            ),
        ),
        emulated=False,
    )


# 15. Scalar prefetch choosing the OUTPUT block: each program scatters its block of
# x to the row block `dest[i]` (a permutation), so races depend on the table.
def scatter_blocks(dest: tuple[int, ...] = (3, 0, 6, 1, 7, 2, 5, 4)) -> Case:
    def kernel(dest_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    n = len(dest)
    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8 * n, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(n,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, dest: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, dest: (dest[i], 0)),
        ),
    )
    table = jnp.array(dest, dtype=jnp.int32)

    def reference(dest, x):
        blocks = x.reshape(n, 8, 128) * 2.0
        return jnp.zeros_like(blocks).at[dest].set(blocks).reshape(8 * n, 128)

    return Case(
        "scatter_blocks",
        fn,
        (table, f32(8 * n, 128)),
        reference,
        (KernelFacts((n,), ((n,), (8, 128), (8, 128)), ("in", "in", "out")),),
    )


# 16. The Triton puzzles' style: whole arrays (no BlockSpecs), each program picks its
# part with program_id, pl.ds and masks; a ragged tail.
def triton_masked_add(n: int = 1000, block: int = 128) -> Case:
    def add_kernel(x_ref, y_ref, o_ref):
        pid = pl.program_id(0)
        offsets = pid * block + jnp.arange(block)
        mask = offsets < n
        x = pltriton.load(x_ref.at[pl.ds(pid * block, block)], mask=mask, other=0.0)
        y = pltriton.load(y_ref.at[pl.ds(pid * block, block)], mask=mask, other=0.0)
        pltriton.store(o_ref.at[pl.ds(pid * block, block)], x + y, mask=mask)

    fn = pl.pallas_call(
        add_kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32), grid=(pl.cdiv(n, block),)
    )
    return Case(
        "triton_masked_add",
        fn,
        (f32(n), f32(n)),
        lambda x, y: x + y,
        (
            KernelFacts(
                (pl.cdiv(n, block),),
                ((n,), (n,), (n,)),
                ("in", "in", "out"),
                ("program_id", "mask="),
            ),
        ),
    )


# 17. A 2-D whole-array kernel: each program takes rows and columns with pl.ds, a
# masked ragged edge of columns, and a row reduction kept per program.
def triton_rows_2d(rows: int = 64, cols: int = 200, bm: int = 16, bn: int = 128) -> Case:
    def kernel(x_ref, o_ref, s_ref):
        i, j = pl.program_id(0), pl.program_id(1)
        col_ok = (j * bn + jnp.arange(bn)) < cols
        window = (pl.ds(i * bm, bm), pl.ds(j * bn, bn))
        x = pltriton.load(x_ref.at[window], mask=col_ok[None, :], other=0.0)
        pltriton.store(o_ref.at[window], jnp.tanh(x), mask=col_ok[None, :])
        s_ref[pl.ds(i * bm, bm), pl.ds(j, 1)] = jnp.sum(x, axis=1, keepdims=True)

    grid = (rows // bm, pl.cdiv(cols, bn))
    fn = pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((rows, cols), jnp.float32),
            jax.ShapeDtypeStruct((rows, grid[1]), jnp.float32),
        ),
        grid=grid,
    )

    def reference(x):
        padded = jnp.pad(x, ((0, 0), (0, grid[1] * bn - cols)))
        return jnp.tanh(x), padded.reshape(rows, grid[1], bn).sum(axis=-1)

    return Case(
        "triton_rows_2d",
        fn,
        (f32(rows, cols),),
        reference,
        (
            KernelFacts(
                grid,
                ((rows, cols), (rows, cols), (rows, grid[1])),
                ("in", "out", "out"),
                ("tanh", "mask="),
            ),
        ),
    )


ALL: tuple[Callable[[], Case], ...] = (
    vector_add,
    blocked_add,
    seed_matmul,
    kacc_matmul,
    row_softmax,
    with_scratch,
    templated,
    vmapped,
    two_kernels,
    grad_custom_vjp,
    scalar_prefetch,
    element_halo,
    pipelined_add,
    tpu_mesh_kernel,
    scatter_blocks,
    triton_masked_add,
    triton_rows_2d,
)
