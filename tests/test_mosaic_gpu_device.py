"""Mosaic GPU kernels on a real GPU: the kernels the Tiles and hints tests map, run for real.

On a Hopper (H100, H200) or Blackwell (B200) GPU: `JAX_PLATFORMS=cuda python -m pytest
tests/test_mosaic_gpu_device.py -m gpu` (`scripts/device-check` runs it in `gpu-tests`).
Oracles: NumPy's products of the same inputs (the kernels the SMEM budgets, copy maps
and hints are checked on compute what they claim), the device's own SM count against
the chip table the persistent-grid hint reads, and the device's refusal of the kernel
the SMEM hint calls an error. Skipped without a GPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallaslab
from pallaslab._src.records import hardware
from tests import mosaic_gpu_pipelines as kernels

pytestmark = pytest.mark.gpu


def _chip() -> hardware.Gpu:
    kind = jax.devices("gpu")[0].device_kind
    for gpu in hardware.GPUS.values():
        if kind.startswith(f"NVIDIA {gpu.name}"):
            return gpu
    pytest.skip(f"not a GPU of pallaslab's chip table ({kind})")


def _hopper() -> hardware.Gpu:
    gpu = _chip()
    if gpu.compute_capability[0] != 9:
        pytest.skip(f"wgmma needs a Hopper GPU ({gpu.name} is {gpu.arch})")
    return gpu


def _operands(*shapes):
    keys = jax.random.split(jax.random.key(0), len(shapes))
    return [
        jax.random.normal(k, s.shape, jnp.float32).astype(s.dtype)
        for k, s in zip(keys, shapes, strict=True)
    ]


@pytest.mark.parametrize(
    "builder",
    [kernels.tma_wgmma_matmul, kernels.warp_specialized_matmul, kernels.pallas_call_matmul],
)
def test_hopper_matmuls_compute_the_product(builder):
    _hopper()
    fn, shapes = builder()
    a, b = _operands(*shapes)
    expected = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
    np.testing.assert_allclose(
        np.asarray(jax.jit(fn)(a, b), np.float32), expected, rtol=2e-2, atol=2e-1
    )


def test_the_persistent_matmul_on_the_devices_sm_count():
    gpu = _hopper()
    device = jax.devices("gpu")[0]
    assert device.core_count == gpu.sms  # what the persistent-grid hint compares with
    fn, shapes = kernels.persistent_matmul(num_sms=device.core_count)
    a, b = _operands(*shapes)
    expected = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
    np.testing.assert_allclose(
        np.asarray(jax.jit(fn)(a, b), np.float32), expected, rtol=2e-2, atol=2e-1
    )
    found = pallaslab.hints(fn, *shapes, chip=gpu.name, masks=False)
    assert [h for h in found if h.id == "mosaic-persistent-grid"] == []


def test_manual_copies_compute_the_kernel():
    _hopper()
    fn, shapes = kernels.manual_copies()
    (x,) = _operands(*shapes)
    np.testing.assert_allclose(np.asarray(jax.jit(fn)(x)), 2 * np.asarray(x) + 1, rtol=1e-6)


def test_the_device_refuses_what_the_smem_hint_calls_an_error():
    gpu = _hopper()
    fn, shapes = kernels.tma_wgmma_matmul(n=512, tile_n=256, steps=6)
    (hint,) = [
        h for h in pallaslab.hints(fn, *shapes, chip=gpu.name, masks=False) if h.id == "mosaic-smem"
    ]
    with pytest.raises(Exception, match="shared memory"):
        jax.jit(fn)(*_operands(*shapes)).block_until_ready()
    assert hint.figure("limit bytes") == gpu.max_shared_memory_per_block


def test_tcgen05_on_blackwell():
    gpu = _chip()
    if gpu.compute_capability[0] != 10:
        pytest.skip(f"tcgen05 needs a Blackwell GPU ({gpu.name} is {gpu.arch})")
    fn, shapes = kernels.tcgen05_matmul()
    a, b = _operands(*shapes)
    expected = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
    np.testing.assert_allclose(
        np.asarray(jax.jit(fn)(a, b), np.float32), expected, rtol=2e-2, atol=2e-1
    )
