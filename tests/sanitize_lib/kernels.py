"""A tiny kernel library, one kernel per kind of problem `pytest --pallaslab` finds.

Lines the plugin must name are marked with a comment `# marks: NAME` (the tests look
the line numbers up by that mark, so the file can change).
"""

from __future__ import annotations

import functools
import importlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import tpu as pltpu

# Public from jax 0.12; before, only in the interpreter's own module.
InterpretGPUParams = (
    getattr(plgpu, "InterpretGPUParams", None)
    or importlib.import_module("jax._src.pallas.mosaic_gpu.interpret.params").InterpretGPUParams
)

BLOCK = 32


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    """Clean: each program adds its own block."""
    n = x.shape[0]
    spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
    return pl.pallas_call(
        _add_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n // BLOCK,),
        in_specs=[spec, spec],
        out_specs=spec,
        interpret=True,
    )(x, y)


def _last_block_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def last_block_wins(x):
    """Races: every program writes its own values into the one output block."""
    n = x.shape[0]
    return pl.pallas_call(
        _last_block_kernel,
        out_shape=jax.ShapeDtypeStruct((BLOCK,), x.dtype),
        grid=(n // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (0,)),  # marks: race
        interpret=True,
    )(x)


def _shifted_read_kernel(x_ref, o_ref):
    shift = pl.program_id(0) + 1
    o_ref[...] = x_ref[pl.ds(shift * 8, BLOCK)]  # marks: out-of-bounds


def shifted_read(x):
    """Reads past its block: the slice starts inside it and runs over its end."""
    n = x.shape[0]
    spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
    return pl.pallas_call(
        _shifted_read_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n // BLOCK,),
        in_specs=[spec],
        out_specs=spec,
        interpret=True,
    )(x)


def _accumulate_kernel(x_ref, o_ref):
    o_ref[...] += x_ref[...]  # marks: uninitialized


def accumulate_unzeroed(x):
    """Reads memory nothing wrote: the accumulator is never zeroed."""
    rows = x.shape[0]
    return pl.pallas_call(
        _accumulate_kernel,
        out_shape=jax.ShapeDtypeStruct((BLOCK,), x.dtype),
        grid=(rows,),
        in_specs=[pl.BlockSpec((None, BLOCK), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (0,)),
        interpret=True,
    )(x)


def _block_sum_kernel(x_ref, o_ref):
    o_ref[...] = jnp.full((1,), jnp.sum(x_ref[...]), o_ref.dtype)


def block_sums(x):
    """Padding leak: the last block hangs over the array's end and is summed whole."""
    n = x.shape[0]
    blocks = pl.cdiv(n, BLOCK)
    return pl.pallas_call(
        _block_sum_kernel,
        out_shape=jax.ShapeDtypeStruct((blocks,), x.dtype),
        grid=(blocks,),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],  # marks: padding
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
        interpret=True,
    )(x)


def _scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def scale_redundant(x):
    """Same values written twice: grid axis 0 repeats the work of axis 1 (wasted, legal)."""
    n = x.shape[0]
    spec = pl.BlockSpec((BLOCK,), lambda r, i: (i,))  # marks: same-value
    return pl.pallas_call(
        _scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2, n // BLOCK),
        in_specs=[spec],
        out_specs=spec,
        interpret=True,
    )(x)


@functools.partial(jax.jit, static_argnames=())
def jitted_vmapped_add(x, y):
    """Clean, run only under jit and vmap."""
    return jax.vmap(add)(x, y)


def vmapped_race(x):
    """Races under vmap: `last_block_wins` per row."""
    return jax.vmap(last_block_wins)(x)


def doubled_dynamic_grid(x, n):
    """Clean, on a grid sized at run time (`n` is traced)."""
    spec = pl.BlockSpec((8,), lambda i: (i,))
    return pl.pallas_call(
        _double_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n,),
        in_specs=[spec],
        out_specs=spec,
        interpret=True,
    )(x)


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


# -- Kernels pallaslab's emulator does not model: checked in JAX's interpreters ----------


def _threads_add_kernel(x_ref, o_ref):
    thread = jax.lax.axis_index("t")
    o_ref[thread] = x_ref[thread] + 1


def threads_add(x):
    """Clean (Mosaic GPU): each of 4 threads adds one to its own element."""
    return plgpu.kernel(
        _threads_add_kernel,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        num_threads=4,
        thread_name="t",
        interpret=InterpretGPUParams(),
    )(x)


def _threads_race_kernel(x_ref, o_ref, smem_ref):
    thread = jax.lax.axis_index("t")

    @pl.when(thread == 0)
    def _():
        smem_ref[...] = x_ref[...] * 2.0  # marks: thread-race

    @pl.when(thread == 1)
    def _():
        o_ref[...] = smem_ref[...]  # no barrier: thread 1 may read before thread 0 wrote


def threads_race(x):
    """Races (Mosaic GPU): one thread writes shared memory another reads, unordered."""
    return plgpu.kernel(
        _threads_race_kernel,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_types=[plgpu.SMEM(x.shape, x.dtype)],
        num_threads=2,
        thread_name="t",
        interpret=InterpretGPUParams(),
    )(x)


def _dma_read_before_wait_kernel(x_hbm, o_ref, x_vmem, semaphore):
    copy = pltpu.make_async_copy(x_hbm, x_vmem, semaphore)
    copy.start()  # marks: dma-race
    o_ref[...] = x_vmem[...] + 1.0  # the copy may still be under way
    copy.wait()


def dma_read_before_wait(x):
    """Races (TPU DMA): the copy's destination is read before the copy is waited for."""
    return pl.pallas_call(
        _dma_read_before_wait_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams(dma_execution_mode="eager"),
    )(x)
