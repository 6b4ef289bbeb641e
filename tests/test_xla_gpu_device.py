"""Compile-only against on-device: does `xla-gpu:<chip>` show what the GPU really runs?

Run on a GPU machine with `pallaslab[gpu-compile]` (or JAX's CUDA plugin and NVIDIA's
tools): `JAX_PLATFORMS=cuda python -m pytest tests/test_xla_gpu_device.py -m gpu -s`.
The same kernels are compiled twice by the same JAX, in the same kind of worker: for
a compile-only device made from pallaslab's description of this GPU's chip, and for
the GPU itself. Pallas kernels are compiled as written, so their PTX, registers and
SASS must agree; XLA's own fusions may not (with a GPU, XLA autotunes): the
differences are printed (`-s`). Skipped without a GPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest

import pallaslab
from pallaslab._src.core import gpu_target_config, gpu_toolchain
from pallaslab._src.core.lowering import compare, xla_gpu
from tests import corpus
from tests.test_xla_gpu import add_then_gelu, mosaic_gpu_matmul

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_toolchain.problem() is not None, reason="needs pallaslab[gpu-compile]"),
]


def _local_chip() -> str:
    kind = jax.devices("gpu")[0].device_kind
    for chip in gpu_target_config.CHIPS:
        if kind.startswith(f"NVIDIA {chip}"):
            return chip
    pytest.skip(f"no target description for this GPU ({kind})")


def _both(make, monkeypatch):
    """(compile-only, on-device) lowerings of the first kernel, each on a fresh inspection."""
    chip = _local_chip()
    fn, args = make()
    compile_only = pallaslab.inspect(fn, *args).lower(f"xla-gpu:{chip}")
    real = functools.partial(xla_gpu.compile_exports, on_device=True)
    monkeypatch.setattr(xla_gpu, "compile_exports", real)
    on_device = pallaslab.inspect(fn, *args).lower(f"xla-gpu:{chip}")
    assert compile_only.ok, compile_only.error
    assert on_device.ok, on_device.error
    print(
        f"\n{make.__name__} on {chip}: " + compare.compare_lowered(compile_only, on_device).summary
    )
    return compile_only, on_device


def _mosaic_matmul():
    half = jax.ShapeDtypeStruct((1024, 1024), jnp.float16)
    return mosaic_gpu_matmul, (half, half)


def _seed_matmul():
    case = corpus.seed_matmul(dtype=jnp.bfloat16)
    return case.fn, case.args


def _add_in_a_program():
    x = jax.ShapeDtypeStruct((1 << 20,), jnp.float32)
    return add_then_gelu, (x, x)


def _attention():
    from jax.experimental.pallas.ops.gpu import attention_mgpu

    config = attention_mgpu.TuningConfig(block_q=64, block_kv=128, max_concurrent_steps=2)
    qkv = jax.ShapeDtypeStruct((1, 2048, 4, 128), jnp.float16)
    return functools.partial(attention_mgpu.attention, config=config), (qkv, qkv, qkv)


@pytest.mark.parametrize("make", [_mosaic_matmul, _seed_matmul, _add_in_a_program, _attention])
def test_pallas_kernels_compile_the_same_without_the_gpu(make, monkeypatch):
    compile_only, on_device = _both(make, monkeypatch)
    assert compile_only.stage("ptx").text == on_device.stage("ptx").text
    a, b = compile_only.resources, on_device.resources
    assert (a.registers_per_thread, a.spill_store_bytes, a.shared_bytes) == (
        b.registers_per_thread,
        b.spill_store_bytes,
        b.shared_bytes,
    )
    assert compare.sass_counts(compile_only.text) == compare.sass_counts(on_device.text)
    # What XLA made around the kernel: printed, not asserted (it autotunes on a GPU).
    program = [s.name for s in compile_only.stages if s.name == "hlo (program)"]
    if program:
        same = compile_only.stage(program[0]).text == on_device.stage(program[0]).text
        print(f"  optimised HLO of the program: {'the same' if same else 'differs'}")


def test_fit_and_control_codes_agree_with_the_on_device_build(monkeypatch):
    # Issue 22: the memory fit and the static cost read from a compile-only build are
    # those of the code the GPU runs (Pallas kernels are compiled as written).
    from pallaslab._src.core import cost

    chip = _local_chip()
    compile_only, on_device = _both(_mosaic_matmul, monkeypatch)
    assert compile_only.resources.shared_bytes == on_device.resources.shared_bytes
    a, b = cost.of_lowered(compile_only), cost.of_lowered(on_device)
    assert a.total_instructions == b.total_instructions
    assert a.cycles_estimate == b.cycles_estimate  # the same control codes
    fn, args = _mosaic_matmul()
    row = pallaslab.inspect(fn, *args).fit_table(chips=[chip]).chip(chip)
    assert row.verdict == "fits" and row.needed == compile_only.resources.shared_bytes
