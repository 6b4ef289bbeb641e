"""The library's own tests: each checks its kernel against interpret mode's answer.

They pass without pallaslab; `pytest --pallaslab` finds what interpret mode hides.
"""

import jax
import jax.numpy as jnp
import kernels
import numpy as np

N = 4 * kernels.BLOCK


def test_add():
    x = jnp.arange(N, dtype=jnp.float32)
    np.testing.assert_array_equal(kernels.add(x, x), 2 * x)


def test_last_block_wins():
    x = jnp.arange(N, dtype=jnp.float32)
    # Interpret mode runs the programs in order: the last one's block stays.
    np.testing.assert_array_equal(kernels.last_block_wins(x), 2 * x[-kernels.BLOCK :])


def test_shifted_read():
    x = jnp.arange(N, dtype=jnp.float32)
    assert kernels.shifted_read(x).shape == (N,)


def test_accumulate_unzeroed():
    x = jnp.ones((3, kernels.BLOCK), jnp.float32)
    assert kernels.accumulate_unzeroed(x).shape == (kernels.BLOCK,)


def test_block_sums():
    x = jnp.ones((100,), jnp.float32)
    sums = kernels.block_sums(x)
    np.testing.assert_array_equal(sums[:3], [32.0, 32.0, 32.0])


def test_scale_redundant():
    x = jnp.arange(N, dtype=jnp.float32)
    np.testing.assert_array_equal(kernels.scale_redundant(x), 3 * x)


def test_jitted_vmapped_add():
    x = jnp.ones((3, N), jnp.float32)
    np.testing.assert_array_equal(kernels.jitted_vmapped_add(x, x), 2 * x)


def test_vmapped_race():
    x = jnp.arange(2 * N, dtype=jnp.float32).reshape(2, N)
    np.testing.assert_array_equal(jax.jit(kernels.vmapped_race)(x), 2 * x[:, -kernels.BLOCK :])


def test_doubled_dynamic_grid():
    x = jnp.arange(32, dtype=jnp.float32)
    np.testing.assert_array_equal(jax.jit(kernels.doubled_dynamic_grid)(x, jnp.int32(4)), 2 * x)


def test_threads_add():
    x = jnp.arange(4, dtype=jnp.float32)
    np.testing.assert_array_equal(kernels.threads_add(x), x + 1)


def test_threads_race():
    x = jnp.arange(8, dtype=jnp.float32)
    # The interpreter happened to run thread 0 first, or not: either is what it gives.
    assert kernels.threads_race(x).shape == (8,)


def test_dma_read_before_wait():
    x = jnp.ones((8, 128), jnp.float32)
    # Eager DMAs: the copy is done when started, so interpret mode reads it in time.
    np.testing.assert_array_equal(kernels.dma_read_before_wait(x), x + 1)
