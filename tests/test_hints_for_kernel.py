"""Hints for the kernel at hand: its style, the chosen target or chip, grouped, after a failed check.

A plain `pallas_call` (no compiler params) runs on GPUs and TPUs alike: inspected on a
CPU it gets both families' advice, each saying which chip it is for, and what would
stop it compiling on a TPU is a warning there, not an error of the kernel. Triton
params make it a GPU kernel; TPU params a TPU one. Once a target is chosen
(`lower("ptx:sm_90")`, `--target`), the hints are that chip's, its compile's
occupancy included. Advice shared by several operands is one hint naming them all,
and a failed check comes before everything. Oracles: the chips each family means
(`hardware.py`), the block shapes as written, the reference's mismatch.
"""

from __future__ import annotations

import importlib.util
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.utils.capture import capture_output
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

import pallaslab
from pallaslab._src.core.hints import CHECK_FAILED
from pallaslab._src.views.tabs import overview

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)
S = jax.ShapeDtypeStruct
F32 = jnp.float32


def matmul(bm=32, bn=64, k=64, *, params=None, b_map=lambda i, j: (0, j)):
    """A plain matmul; blocks of 64 columns break the TPU's (8, 128) rule."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)

    return pl.pallas_call(
        kernel,
        out_shape=S((128, 256), F32),
        grid=(128 // bm, 256 // bn),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), pl.BlockSpec((k, bn), b_map)],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        compiler_params=params,
    )


ARGS = (S((128, 64), F32), S((64, 256), F32))


def test_a_kernel_without_params_gets_both_families_each_for_its_chip():
    found = pallaslab.inspect(matmul(), *ARGS).hints(masks=False)
    assert {h.chip for h in found} == {"H100", "v5e"}
    tiling = [h for h in found if h.id == "tpu-tiling"]
    assert len(tiling) == 1 and tiling[0].subjects == ("y_ref", "o_ref")
    # Not an error of this kernel: it says nothing of TPUs.
    assert tiling[0].severity == "warning" and tiling[0].message.startswith("On v5e: ")
    assert all(h.severity != "error" for h in found)
    assert all(h.message.startswith(f"On {h.chip}: ") for h in found)


def test_a_triton_kernel_gets_gpu_advice_only():
    triton = pltriton.CompilerParams(num_warps=4, num_stages=2)
    found = pallaslab.inspect(matmul(params=triton), *ARGS).hints(masks=False)
    assert found and {h.chip for h in found} == {"H100"}
    assert not any(h.id.startswith("tpu-") for h in found)
    assert not any(h.message.startswith("On ") for h in found)


def test_a_tpu_kernel_gets_tpu_errors():
    tpu = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel"))
    found = pallaslab.inspect(matmul(params=tpu), *ARGS).hints(masks=False)
    assert {h.chip for h in found} == {"v5e"}
    (tiling,) = [h for h in found if h.id == "tpu-tiling"]
    assert tiling.severity == "error" and found[0] is tiling


def test_the_chosen_chip_or_target_decides():
    inspection = pallaslab.inspect(matmul(), *ARGS)
    assert {h.chip for h in inspection.hints(chip="v6e", masks=False)} == {"v6e"}
    assert {h.chip for h in inspection.hints(target="ptx:sm_80", masks=False)} == {"A100"}
    inspection.lower("mosaic-tpu:v6e", 0)
    assert {h.chip for h in inspection.hints(masks=False)} == {"v6e"}


@needs_triton
def test_after_a_gpu_target_the_hints_are_that_chips_with_its_occupancy():
    # 128 x 128 blocks of f32 with a K of 128: 3 stages of shared memory, few blocks
    # per SM (JAX's default Triton params: 4 warps, 3 stages).
    inspection = pallaslab.inspect(matmul(128, 128, 128), S((128, 128), F32), S((128, 256), F32))
    lowered = inspection.lower("ptx:sm_90")
    (row,) = [o for o in lowered.resources.occupancy if o.gpu == "H100"]
    assert row.fraction <= 0.25
    found = inspection.hints(masks=False)
    assert {h.chip for h in found} == {"H100"}
    (occupancy,) = [h for h in found if h.id == "occupancy"]
    assert occupancy.figure("occupancy %") == pytest.approx(round(100 * row.fraction, 1))
    assert overview._hints(inspection, inspection.kernels[0], masks=False)["hints"][0]["chip"] == (
        "H100"
    )


def test_four_operands_with_one_problem_are_one_hint():
    def add3(x_ref, y_ref, z_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...] + z_ref[...]

    spec = pl.BlockSpec((64, 4), lambda i, j: (i, j))
    fn = pl.pallas_call(
        add3,
        out_shape=S((256, 256), F32),
        grid=(4, 64),
        in_specs=[spec] * 3,
        out_specs=spec,
        compiler_params=pltriton.CompilerParams(num_warps=4),
    )
    found = pallaslab.hints(fn, *(S((256, 256), F32),) * 3, masks=False)
    narrow = [h for h in found if h.id == "gpu-narrow-rows"]
    assert len(narrow) == 1
    assert narrow[0].subjects == ("x_ref", "y_ref", "z_ref", "o_ref")
    assert narrow[0].message.count("is read in runs of 16 contiguous bytes") == 4
    assert narrow[0].message.count("GPU memory moves 32-byte sectors") == 1


def test_a_failed_check_comes_first():
    a = jnp.asarray(np.random.default_rng(0).standard_normal((128, 64)), F32)
    b = jnp.asarray(np.random.default_rng(1).standard_normal((64, 256)), F32)
    buggy = pallaslab.inspect(matmul(b_map=lambda i, j: (0, i)), a, b)
    buggy = buggy.with_result(buggy.run(ref=lambda x, y: x @ y))
    assert not buggy.result.comparison.ok
    found = buggy.hints(masks=False)
    assert found[0].id == CHECK_FAILED and found[0].severity == "error"
    assert "does not match the reference" in found[0].message
    assert found[0].figure("mismatched elements") == buggy.result.comparison.mismatched
    model = overview._hints(buggy, buggy.kernels[0], masks=False)
    assert model["hints"][0]["id"] == CHECK_FAILED
    fixed = pallaslab.inspect(matmul(), a, b)
    fixed = fixed.with_result(fixed.run(ref=lambda x, y: x @ y))
    assert not any(h.id == CHECK_FAILED for h in fixed.hints(masks=False))


CELL = textwrap.dedent(
    """\
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    mm = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((128, 256), jnp.float32),
        grid=(4, 4),
        in_specs=[pl.BlockSpec((32, 64), lambda i, j: (i, 0)),
                  pl.BlockSpec((64, 64), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((32, 64), lambda i, j: (i, j)),
    )
    a = jnp.ones((128, 64)); b = jnp.ones((64, 256))
    """
)


@needs_triton
def test_the_magic_target_picks_the_chip(ip):
    with capture_output():
        result = ip.run_cell("%%kernel mm(a, b) --no-run --target ptx:sm_90\n" + CELL)
    assert result.success, result.error_in_exec
    inspection = ip.user_ns["_kernel"]
    found = inspection.hints(masks=False)
    assert found and {h.chip for h in found} == {"H100"}
    assert not any(h.id == "tpu-tiling" for h in found)
