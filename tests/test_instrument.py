"""The instrumented kernel body: faithful values, and the private JAX shapes it reads.

The instrumented evaluator does every load and store with Pallas' own discharge rule,
so with any probe its outputs must equal Pallas' interpreter (`interpret=True`)
bitwise; GPU-like orders (which use it to share arrays between programs) must equal it
too on kernels without races. The pins of what `core/jax_adapter/instrument/`
reads are in tests/test_jax_adapter.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

import pallaslab
from pallaslab._src.core import emulator, jax_adapter, seeded
from pallaslab._src.core.jax_adapter import instrument
from tests import corpus

CASES = {build.__name__: build for build in corpus.ALL}
# Corpus kernels that race under GPU rules (their GPU orders may differ, by design).
GPU_RACES = {"kacc_matmul"}


def _interpreted(fn, *args):
    return pallaslab.emulate(fn, interpret=True)(*args)


def _assert_identical(want, got):
    for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
        a, b = np.asarray(w), np.asarray(g)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=True), np.nanmax(np.abs(a - b))


@pytest.mark.parametrize("name", sorted(CASES))
def test_probed_runs_give_interpret_modes_values(name):
    case = CASES[name]()
    if not case.emulated:
        pytest.skip("runs in Pallas' interpreter (DMAs or a TPU mesh), not the instrumented body")
    args = seeded.example_arrays(case.args, seed=2)
    want = _interpreted(case.fn, *args)
    probe = instrument.Probe(flags=True)
    for site in jax_adapter.find_kernel_sites(jax.make_jaxpr(case.fn)(*args)):
        call, _ = emulator.analyse(site.params, site.in_avals)
        assert call.instrumented is not None, call.instrumentation_notice
        assert call.instrumented.sites, "every corpus kernel loads or stores"
    # Every kernel of the program through the instrumented body, flags recorded.
    original = emulator.run_call

    def probed(call, plan, args, request=emulator.EMULATE, fill_values=None):
        return emulator.run_probed(call, plan, args, request, fill_values, probe=probe)[0]

    emulator.run_call = probed
    try:
        got = pallaslab.emulate(jax.jit(case.fn))(*args)
    finally:
        emulator.run_call = original
    _assert_identical(want, got)


@pytest.mark.parametrize("name", sorted(set(CASES) - GPU_RACES))
def test_race_free_kernels_give_the_same_values_in_gpu_orders(name):
    case = CASES[name]()
    args = seeded.example_arrays(case.args, seed=3)
    want = _interpreted(case.fn, *args)
    for seed in (0, 1):
        got = pallaslab.emulate(case.fn, order="gpu", seed=seed)(*args)
        # Programs batched in other waves may sum in another order: rounding apart.
        for w, g in zip(
            jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True
        ):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    inspection = pallaslab.inspect(case.fn, *case.args)
    for kernel in inspection.kernels:
        assert inspection.races(kernel.index, "gpu") == [], kernel.name


def test_sites_name_each_load_and_store_with_its_ref_and_facts():
    case = corpus.triton_masked_add()
    (site,) = jax_adapter.find_kernel_sites(jax.make_jaxpr(case.fn)(*case.args))
    body = emulator.analyse(site.params, site.in_avals)[0].instrumented
    assert [(s.kind, s.primitive, s.ref, s.masked, s.other, s.dynamic) for s in body.sites] == [
        ("load", "masked_load", 0, True, True, True),
        ("load", "masked_load", 1, True, True, True),
        ("store", "masked_swap", 2, True, False, True),
    ]
    assert all(s.file.endswith("corpus.py") and s.line for s in body.sites)
    assert body.ref_shapes == ((1000,), (1000,), (1000,)) and body.rank == 1


def test_loops_branches_and_scoped_buffers_are_followed():
    def kernel(x_ref, o_ref):
        def body(t, carry):
            o_ref[pl.ds(t * 8, 8)] = x_ref[pl.ds(t * 8, 8)] + carry
            return carry + 1.0

        jax.lax.fori_loop(0, 4, body, 0.0)

        @pl.when(pl.program_id(0) == 1)
        def _():
            def scoped(tmp_ref):
                tmp_ref[...] = o_ref[pl.ds(0, 8)] * 2.0
                o_ref[pl.ds(0, 8)] = tmp_ref[...]

            pl.run_scoped(scoped, pltpu.VMEM((8,), jnp.float32))

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((32,), lambda i: (i,))],
        out_specs=pl.BlockSpec((32,), lambda i: (i,)),
    )
    x = jnp.arange(64.0)
    (site,) = jax_adapter.find_kernel_sites(jax.make_jaxpr(fn)(x))
    call, plan = emulator.analyse(site.params, site.in_avals)
    body = call.instrumented
    assert {s.ref for s in body.sites} == {0, 1, -1}  # the scoped buffer is -1
    probe = instrument.Probe(flags=True, stats=(1,))

    def run(x):
        outputs, probed = emulator.run_probed(call, plan, [x], probe=probe)
        return outputs, probed.flags, probed.stats

    (out,), flags, stats = jax.jit(run)(x)
    np.testing.assert_array_equal(out, _interpreted(fn, x))
    assert not np.asarray(flags).any()
    # Hand-computed: program p stores every element of its block; p = 1 twice.
    first, last = np.asarray(stats[1]["first_store"]), np.asarray(stats[1]["last_store"])
    np.testing.assert_array_equal(first, np.repeat([0, 1], 32))
    np.testing.assert_array_equal(last, np.repeat([0, 1], 32))


def test_a_body_it_cannot_follow_leaves_runs_and_the_other_checks_intact(monkeypatch):
    def refuse(self, eqn, values):
        raise instrument.UnsupportedError(f"{eqn.primitive.name} (refused by the test)")

    monkeypatch.setattr(instrument.evaluator.Evaluator, "_stateful", refuse)
    # GPU orders fall back to whole blocks (this kernel has one program per block).
    case = corpus.blocked_add()
    x, y = seeded.example_arrays(case.args)
    fn = jax.jit(lambda a, b: case.fn(a, b) + 0.0)  # a fresh function: traced anew
    np.testing.assert_array_equal(pallaslab.emulate(fn, order="gpu", seed=0)(x, y), x + y)
    # Padding leaks are still found; the slices' check says why it did not run.

    def reverse(x_ref, o_ref):
        every = jnp.arange(128) < 128
        o_ref[...] = pltriton.load(x_ref.at[pl.ds(0, 128)], mask=every)[::-1]

    leaky = pl.pallas_call(
        reverse,
        out_shape=jax.ShapeDtypeStruct((200,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    x = jnp.arange(200.0)
    result = pallaslab.inspect(leaky, x).run(x)
    assert [leak.cause for leak in result.leaks] == ["padding"]
    (notice,) = [n for n in result.notices if "slices were not checked" in n]
    assert "refused by the test" in notice
