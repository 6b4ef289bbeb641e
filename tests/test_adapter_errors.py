"""Pins the private shapes `jax_adapter.errors` reads to explain errors.

Each test makes JAX fail the way a user's code does and checks that the adapter
still finds what the messages need: the frames converting a BlockSpec (their
`block_spec`/`self`, `origin`, `grid`, `index_map_avals` locals), the pallas_call
wrapper's `kernel` and `grid_spec`, the grid as written in the grid mapping, JAX's
`JaxStackTraceBeforeTransformation` cause, and the logger of failed callbacks.
"""

from __future__ import annotations

import inspect
import logging

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.program import program_of

X = jax.ShapeDtypeStruct((1024,), jnp.float32)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def failing(fn, *args):
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any JAX error will do
        jax.eval_shape(fn, *args)
    return caught.value


def line_of(function) -> int:
    return inspect.getsourcelines(function)[1]


def test_block_spec_context_of_an_index_map_with_too_many_arguments():
    def index_map(i, j):
        return (i,)

    fn = pl.pallas_call(
        copy_kernel,
        out_shape=X,
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), index_map)],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    context = jax_adapter.block_spec_context(failing(fn, X).__traceback__)
    assert context is not None and not context.old_order
    assert (context.origin, context.params) == ("args[0]", ("i", "j"))
    assert (context.num_grid, context.num_prefetch) == (1, 0)
    assert context.location.line == line_of(index_map)


def test_block_spec_context_of_the_old_argument_order():
    def index_map(i):
        return (i,)

    fn = pl.pallas_call(
        copy_kernel,
        out_shape=X,
        grid=(8,),
        in_specs=[pl.BlockSpec(index_map, (128,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    context = jax_adapter.block_spec_context(failing(fn, X).__traceback__)
    assert context is not None and context.old_order
    assert context.location.line == line_of(index_map)


def test_pallas_call_context_of_a_kernel_that_is_not_a_function():
    def index_map(i):
        return (i,)

    fn = pl.pallas_call(
        42,
        out_shape=X,
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), index_map)],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    context = jax_adapter.pallas_call_context(failing(fn, X).__traceback__)
    assert context is not None and context.kernel == 42
    assert [loc.line for loc in context.in_specs] == [line_of(index_map)]
    assert len(context.out_specs) == 1


def test_written_grid():
    fn = pl.pallas_call(
        copy_kernel,
        out_shape=X,
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    site = program_of(pallaslab.inspect(fn, X)).sites[0]
    assert jax_adapter.written_grid(site.params) == (8,)


def test_op_traceback_points_at_the_operation_that_failed_to_lower():
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref):
        pltpu.prng_seed(0)  # no CPU lowering for this primitive
        o_ref[...] = x_ref[...]

    fn = pl.pallas_call(kernel, out_shape=X, interpret=True)
    with pytest.raises(Exception) as caught:  # noqa: PT011
        jax.jit(fn).lower(jnp.zeros(1024)).compile()
    found = jax_adapter.op_traceback(caught.value)
    assert found is not None
    lines = []
    while found is not None:
        if found.tb_frame.f_code.co_filename == __file__:
            lines.append(found.tb_lineno)
        found = found.tb_next
    assert line_of(kernel) + 1 in lines


def test_failed_callbacks_are_not_logged_inside_the_block(caplog):
    def kernel(x_ref, o_ref):
        jax.debug.callback(lambda v: 1 // int(v), 0 * x_ref[0])
        o_ref[...] = x_ref[...]

    fn = pallaslab.emulate(
        pl.pallas_call(
            kernel,
            out_shape=X,
            grid=(1,),
            in_specs=[pl.BlockSpec((1024,), lambda i: (0,))],
            out_specs=pl.BlockSpec((1024,), lambda i: (0,)),
        )
    )
    caplog.set_level(logging.ERROR, logger="jax._src.debugging")

    def logged() -> int:
        return len([r for r in caplog.records if r.name == "jax._src.debugging"])

    with pytest.raises(Exception, match="ZeroDivision"):  # without the block: logged
        jax.block_until_ready(fn(jnp.ones(1024)))
    before = logged()
    assert before >= 1
    with jax_adapter.quiet_failed_callbacks(), pytest.raises(Exception, match="ZeroDivision"):
        jax.block_until_ready(fn(jnp.ones(1024)))
    assert logged() == before
