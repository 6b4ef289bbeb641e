"""Notebook 07: TPU."""

from __future__ import annotations

import jax.numpy as jnp

from pallaslab._src.course import requirements
from pallaslab._src.course.catalog._helpers import bf16, case, f32
from pallaslab._src.course.spec import Exercise

NOTEBOOK = "07_tpu"


def _matmul(x, y):  # type: ignore[no-untyped-def]
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


EXERCISES = (
    Exercise(
        id="07.tiling",
        notebook=NOTEBOOK,
        title="Blocks a TPU can take",
        task=(
            "Fix the BlockSpecs of add_rows(x, y) (x + y for float32 (rows, 1024) arrays) "
            "so the kernel lowers for TPU v5e: every block's last two dimensions must be "
            "multiples of (8, 128) or the whole array dimension."
        ),
        reference=lambda x, y: x + y,
        cases=(case(f32(64, 1024), f32(64, 1024)), case(f32(16, 1024), f32(16, 1024))),
        hint="A block of (8, 1024) rows, or (16, 512) ...: rows in multiples of 8, columns of 128.",
        requirements=(requirements.lowers_for("mosaic-tpu:v5e"),),
    ),
    Exercise(
        id="07.scratch_matmul",
        notebook=NOTEBOOK,
        title="A VMEM accumulator",
        task=(
            "Complete matmul(x, y) for bfloat16 inputs: a grid (M/128, N/128, K/128) with "
            'k last and "arbitrary", a float32 VMEM scratch accumulator zeroed on the first '
            "k step, and the bfloat16 output written on the last."
        ),
        reference=_matmul,
        cases=(case(bf16(256, 256), bf16(256, 256)), case(bf16(128, 512), bf16(512, 256))),
        hint=(
            "@pl.when(pl.program_id(2) == 0) zeroes the scratch, every step adds its "
            "product, @pl.when(pl.program_id(2) == pl.num_programs(2) - 1) stores it."
        ),
        requirements=(
            requirements.race_free("tpu"),
            requirements.lowers_for("mosaic-tpu:v5e"),
        ),
    ),
    Exercise(
        id="07.smem_scalar",
        notebook=NOTEBOOK,
        title="A scalar in SMEM",
        task=(
            "Write scale(s, x): s[0] * x, where s is a float32 array of one element passed "
            "whole in SMEM, and x a float32 (rows, 128·n) array in (8, 128) blocks."
        ),
        reference=lambda s, x: s[0] * x,
        cases=(case(f32(1), f32(16, 256)), case(f32(1), f32(8, 512))),
        hint="Scalars a kernel reads one at a time belong in SMEM, the scalar core's memory.",
        requirements=(
            requirements.memory_space(0, "smem"),
            requirements.lowers_for("mosaic-tpu:v5e"),
        ),
    ),
)
