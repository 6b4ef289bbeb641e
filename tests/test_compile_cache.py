"""The compile cache: programs compiled once by what they are, bounded, never confused.

Compiles are counted (`compile_cache.compile_cache_info().misses`), never timed. Each kernel here is
built by a factory, so a "re-run" is a new Python function with the same code, as a
notebook cell run again makes it.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.bench import harness
from pallaslab._src.core import (
    compile_cache,
    emulator,
    jax_adapter,
    running,
    seeded,
    settings,
)
from tests import corpus


@pytest.fixture(autouse=True)
def fresh_cache():
    compile_cache.clear_compile_cache()
    compile_cache.set_compile_cache_limits(
        compile_cache.DEFAULT_MAX_ENTRIES, compile_cache.DEFAULT_MAX_BYTES
    )
    yield
    compile_cache.set_compile_cache_limits(
        compile_cache.DEFAULT_MAX_ENTRIES, compile_cache.DEFAULT_MAX_BYTES
    )
    compile_cache.clear_compile_cache()


def compiles() -> int:
    return compile_cache.compile_cache_info().misses


def blocked_add(scale: float = 1.0, index_map=None, constant=None):
    """A blocked add made anew at each call: `x + scale * y`, plus a closed-over constant."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + scale * y_ref[...]

    index_map = index_map or (lambda i: (i,))
    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((16,), index_map)] * 2,
        out_specs=pl.BlockSpec((16,), index_map),
    )
    if constant is None:
        return call
    return lambda x, y: call(x, y) + jnp.tile(constant, 4)


X = jnp.arange(64.0, dtype=jnp.float32)
Y = jnp.linspace(-1.0, 1.0, 64, dtype=jnp.float32)


def run(fn, *args, **kwargs):
    return pallaslab.inspect(fn, *args).run(*args, **kwargs)


def test_an_identical_kernel_defined_again_is_not_compiled_again():
    first = run(blocked_add(), X, Y)
    after_first = compiles()
    second = run(blocked_add(), X, Y)
    assert after_first >= 1
    assert compiles() == after_first  # the re-run compiled nothing
    assert compile_cache.compile_cache_info().hits >= 1
    np.testing.assert_array_equal(first.values[0], second.values[0])


def test_an_edited_kernel_is_compiled():
    run(blocked_add(scale=1.0), X, Y)
    before = compiles()
    edited = run(blocked_add(scale=2.0), X, Y)
    assert compiles() == before + 1
    np.testing.assert_array_equal(edited.values[0], np.asarray(X + 2.0 * Y))


def test_closed_over_arrays_are_keyed_by_content():
    # Same jaxpr text (a constant is printed by name), different values.
    ones, twos = np.ones(16, np.float32), np.full(16, 2.0, np.float32)
    a = run(blocked_add(constant=jnp.asarray(ones)), X, Y)
    b = run(blocked_add(constant=jnp.asarray(twos)), X, Y)
    assert compiles() == 2
    np.testing.assert_array_equal(a.values[0], np.asarray(X + Y + 1.0))
    np.testing.assert_array_equal(b.values[0], np.asarray(X + Y + 2.0))
    run(blocked_add(constant=jnp.asarray(ones.copy())), X, Y)  # equal contents
    assert compiles() == 2


def test_index_maps_are_part_of_the_key():
    forward = run(blocked_add(), X, Y)
    backward = run(blocked_add(index_map=lambda i: (3 - i,)), X, Y)
    assert compiles() == 2
    np.testing.assert_array_equal(forward.values[0], backward.values[0])  # same blocks, same sums
    shifted = run(
        pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2.0),
            out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
            grid=(4,),
            in_specs=[pl.BlockSpec((16,), lambda i: ((i + 1) % 4,))],
            out_specs=pl.BlockSpec((16,), lambda i: (i,)),
        ),
        X,
    )
    np.testing.assert_array_equal(shifted.values[0], np.roll(np.asarray(X) * 2.0, -16))


def test_equal_programs_with_different_options_do_not_share_an_entry():
    case = corpus.seed_matmul(128, 128, 64)
    args = seeded.example_arrays(case.args)
    expected = np.asarray(case.reference(*args))
    emulated = pallaslab.inspect(case.fn, *args).run(*args, check=False)
    interpreted = running.run(
        pallaslab.inspect(case.fn, *args), args, {}, interpret=True, check=False
    )
    assert (emulated.mode, interpreted.mode) == ("emulated", "interpret")
    assert compiles() == 2
    for result in (emulated, interpreted):
        np.testing.assert_allclose(result.values[0], expected, rtol=2e-5, atol=2e-4)

    # The same jaxpr under other compiler options, or another emulation order.
    fn = blocked_add()
    with running.kernel_scope():
        compile_cache.compile_function(fn, (X, Y))
        compile_cache.compile_function(
            fn, (X, Y), compiler_options={"xla_backend_optimization_level": 0}
        )
        with emulator.scope(emulator.Request(order="gpu", seed=3)):
            compile_cache.compile_function(fn, (X, Y))
    assert compile_cache.compile_cache_info().entries == 5


def test_compiler_params_are_part_of_the_key():
    # Emulated alike, but a kernel asking for 4 warps is not the one asking for 8.
    args = seeded.example_arrays(corpus.seed_matmul(128, 128, 64).args)
    for warps in (4, 8):
        pallaslab.inspect(corpus.make_seed_matmul(num_warps=warps), *args).run(*args, check=False)
    assert compiles() == 2


def test_callbacks_are_keyed_by_identity():
    # Two programs alike but for the Python function they call back: never shared.
    def program(callback):
        def fn(x):
            shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return jax.pure_callback(callback, shape, x) + blocked_add()(x, x)

        return fn

    def double(x):
        return np.asarray(x) * 2

    def negate(x):
        return -np.asarray(x)

    a = run(program(double), X)
    b = run(program(negate), X)
    np.testing.assert_array_equal(a.values[0], np.asarray(X * 2 + 2 * X))
    np.testing.assert_array_equal(b.values[0], np.asarray(-X + 2 * X))
    assert compiles() == 2


def test_custom_derivative_rules_do_not_defeat_the_cache():
    # jax.nn.relu is a custom_jvp function: its rule is made anew at each trace.
    def make():
        def kernel(x_ref, o_ref):
            o_ref[...] = jax.nn.relu(x_ref[...])

        call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64,), jnp.float32))
        return lambda x: jax.nn.gelu(call(x))

    first = run(make(), Y)
    before = compiles()
    second = run(make(), Y)
    assert compiles() == before
    np.testing.assert_array_equal(first.values[0], second.values[0])


def test_the_entry_bound_evicts_least_recently_used():
    compile_cache.set_compile_cache_limits(max_entries=2)
    for scale in (1.0, 2.0, 3.0):
        run(blocked_add(scale), X, Y)
    info = compile_cache.compile_cache_info()
    assert (info.entries, info.misses, info.evictions) == (2, 3, 1)
    run(blocked_add(3.0), X, Y)  # the most recent one is kept
    assert compiles() == 3
    run(blocked_add(1.0), X, Y)  # the oldest was evicted: compiled again
    assert compiles() == 4


def test_the_byte_bound_counts_held_constants():
    big = jnp.asarray(np.arange(16, dtype=np.float32))
    compile_cache.set_compile_cache_limits(max_bytes=32)  # less than the 64-byte constant
    run(blocked_add(constant=big), X, Y)
    run(blocked_add(constant=big), X, Y)
    info = compile_cache.compile_cache_info()
    assert (info.entries, info.misses, info.evictions) == (0, 2, 2)
    compile_cache.set_compile_cache_limits(max_bytes=compile_cache.DEFAULT_MAX_BYTES)
    run(blocked_add(constant=big), X, Y)
    assert compile_cache.compile_cache_info().bytes >= big.nbytes


def test_zero_entries_turns_the_cache_off_and_results_stay_bitwise_equal():
    case = corpus.seed_matmul(128, 128, 64)
    args = seeded.example_arrays(case.args)
    cached = [pallaslab.inspect(corpus.make_seed_matmul(), *args).run(*args) for _ in range(2)]
    compile_cache.set_compile_cache_limits(max_entries=0)
    fresh = pallaslab.inspect(corpus.make_seed_matmul(), *args).run(*args)
    assert compile_cache.compile_cache_info().entries == 0
    plain = jax.jit(pallaslab.emulate(corpus.make_seed_matmul()))(*args)
    for result in (*cached, fresh):
        np.testing.assert_array_equal(result.values[0], np.asarray(plain))


def reversed_blocks():
    """Reverses each 128-block of a 200-vector: the edge block's padding leaks out."""

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...][::-1]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((200,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )


def test_checks_run_again_compile_nothing():
    # Padding leaks and confirmed races (a k-loop accumulating in its output, under
    # GPU rules): both checks run the kernel again in programs of their own.
    x = jnp.arange(200.0, dtype=jnp.float32)
    kacc = corpus.kacc_matmul()
    for build, args, leaks, races in (
        (reversed_blocks, (x,), True, False),  # its edge block's padding leaks out
        (lambda: corpus.kacc_matmul().fn, tuple(seeded.example_arrays(kacc.args)), False, True),
    ):
        first = pallaslab.inspect(build(), *args).run(*args, check=True)
        assert bool(first.leaks) == leaks
        assert any(c.confirmed for c in first.race_checks) == races
        before = compiles()
        again = pallaslab.inspect(build(), *args).run(*args, check=True)
        assert compiles() == before
        assert again.leaks == first.leaks and again.race_checks == first.race_checks


def test_race_orders_are_not_confused_with_the_grid_order():
    case = corpus.kacc_matmul()
    args = seeded.example_arrays(case.args)
    result = pallaslab.inspect(case.fn, *args).run(*args, check=True)
    gpu = [c for c in result.race_checks if c.backend == "gpu"]
    assert gpu and gpu[0].confirmed  # the GPU orders differ from the grid order


def test_the_timing_harness_reuses_compiled_programs():
    a = jnp.ones((128, 64), jnp.float32)
    b = jnp.ones((64, 128), jnp.float32)
    first = harness.prepare(corpus.make_seed_matmul(), (a, b), {})
    before = compiles()
    second = harness.prepare(corpus.make_seed_matmul(), (a, b), {})
    assert compiles() == before
    np.testing.assert_array_equal(np.asarray(first.run()), np.asarray(second.run()))


def test_a_cell_run_again_compiles_nothing(ip):
    cell = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + {scale} * y_ref[...]

add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                     grid=(2,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
                     out_specs=pl.BlockSpec((128,), lambda i: (i,)))
x = jnp.arange(256.0); y = 2 * x
"""
    ip.run_cell_magic("kernel", "add(x, y)", cell.format(scale=1.0))
    before = compiles()
    ip.run_cell_magic("kernel", "add(x, y)", cell.format(scale=1.0))
    assert compiles() == before
    ip.run_cell_magic("kernel", "add(x, y)", cell.format(scale=3.0))  # one line edited
    assert compiles() == before + 1
    np.testing.assert_array_equal(ip.user_ns["_kernel"].result.values[0], np.arange(256.0) * 7.0)


def test_info_reads_well():
    run(blocked_add(), X, Y)
    run(blocked_add(), X, Y)
    text = str(pallaslab.compile_cache_info())
    assert "1 compiled program(s)" in text and "1 hit(s), 1 compile(s)" in text


# ---------------------------------------------------------------------------
# JAX's persistent compilation cache, opt-in.


@pytest.fixture
def persistent_off():
    yield
    compile_cache.use_persistent_cache(enabled=False)
    compile_cache.follow_setting(False)


def test_the_persistent_cache_writes_compiled_programs_to_disk(tmp_path, persistent_off):
    assert jax.config.jax_compilation_cache_dir is None
    directory = pallaslab.use_persistent_cache(tmp_path / "xla")
    assert directory == tmp_path / "xla"
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
    run(blocked_add(scale=5.0), X, Y)
    assert any(directory.iterdir())  # the program, saved
    assert pallaslab.use_persistent_cache(enabled=False) is None
    assert jax.config.jax_compilation_cache_dir is None
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0


def test_the_setting_turns_the_persistent_cache_on_for_kernel_cells(
    ip, tmp_path, monkeypatch, persistent_off
):
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "user-settings"))
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path / "app"))
    path = settings.user_settings_file()
    path.parent.mkdir(parents=True)
    target = tmp_path / "compiled"
    path.write_text(
        json.dumps({"persistentCompileCache": True, "persistentCompileCacheDir": str(target)})
    )
    loaded = settings.load()
    assert (loaded.persistent_compile_cache, loaded.persistent_compile_cache_dir) == (
        True,
        str(target),
    )
    ip.run_cell_magic("kernel", "--no-run", "x = 1")
    assert compile_cache.persistent_cache_dir() == target
    path.write_text(json.dumps({"persistentCompileCache": False}))
    ip.run_cell_magic("kernel", "--no-run", "x = 1")
    assert compile_cache.persistent_cache_dir() is None


def test_a_persistent_cache_directory_that_cannot_be_made_is_one_warning(tmp_path, persistent_off):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    problem = compile_cache.follow_setting(True, str(blocker / "xla"))
    assert problem is not None and "persistent compile cache is off" in problem
    assert compile_cache.persistent_cache_dir() is None


# ---------------------------------------------------------------------------
# The private shapes the key reads (jax_adapter/fingerprint.py).


def test_traced_programs_have_the_shape_the_key_reads():
    traced = jax.jit(lambda x: x * 2.0, compiler_options={"xla_cpu_enable_fast_math": False}).trace(
        X
    )
    params = traced._params
    assert "jaxpr" in params and "compiler_options_kvs" in params
    assert len(traced._meta_tys_flat) == 1 and not traced._consts
    assert traced.out_tree is not None
    eqn = traced.jaxpr.jaxpr.eqns[0]
    assert eqn.ctx is not None and type(eqn.ctx).__slots__
    assert jax_adapter.trace_context() == jax_adapter.trace_context()
    with emulator.scope(emulator.Request(order="gpu")):
        assert emulator.Request(order="gpu") in jax_adapter.trace_context()


@pytest.mark.gpu
def test_on_a_gpu_compiled_kernels_are_reused_and_their_code_is_counted():
    # Run with JAX_PLATFORMS=cuda: the seed matmul compiles to a Triton kernel.
    a = jax.random.normal(jax.random.key(0), (512, 256), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (256, 512), jnp.float32)
    first = pallaslab.inspect(corpus.make_seed_matmul(), a, b).run(a, b, check=False)
    before = compiles()
    second = pallaslab.inspect(corpus.make_seed_matmul(), a, b).run(a, b, check=False)
    assert first.mode == "compiled" and compiles() == before
    np.testing.assert_array_equal(first.values[0], second.values[0])
    assert compile_cache.compile_cache_info().bytes > 0  # the GPU reports its code size
