"""Notebook 08: debugging."""

from __future__ import annotations

import jax.numpy as jnp

from pallaslab._src.course import requirements
from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise

NOTEBOOK = "08_debugging"


def _matmul(x, y):  # type: ignore[no-untyped-def]
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


def _block_sums(x, block=128):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    padded = jnp.pad(x, (0, -n % block))
    return padded.reshape(-1, block).sum(axis=1)


EXERCISES = (
    Exercise(
        id="08.index_map",
        notebook=NOTEBOOK,
        title="Block indices, not offsets",
        task=(
            "Fix copy(x) (a float32 vector, a multiple of 128 long) so its blocks stay in "
            "the array."
        ),
        reference=lambda x: x,
        cases=(case(f32(512)), case(f32(1024))),
        hint="An index map returns which block, not which element: block i starts at i * 128.",
    ),
    Exercise(
        id="08.block_sums",
        notebook=NOTEBOOK,
        title="Keep padding out of the result",
        task=(
            "Fix block_sums(x): the sum of each block of 128 elements of a float32 vector "
            "of any length (the last block may be partial), with no padding in any sum."
        ),
        reference=_block_sums,
        cases=(case(f32(1024)), case(f32(1000)), case(f32(200))),
        hint=(
            "Zero the lanes past the end before summing: element i * 128 + lane exists "
            "only if it is below len(x) (jax.lax.broadcasted_iota gives the lanes)."
        ),
    ),
    Exercise(
        id="08.race_free",
        notebook=NOTEBOOK,
        title="Right on TPU, right on GPU",
        task=(
            "Rewrite matmul(x, y) so it is right on GPU too: a grid over output blocks "
            "only, and a fori_loop over K inside the kernel."
        ),
        reference=_matmul,
        cases=(case(f32(128, 128), f32(128, 128)), case(f32(128, 256), f32(256, 64))),
        hint="Loop over K inside the kernel: one program per output block.",
        requirements=(requirements.race_free("gpu"), requirements.race_free("tpu")),
    ),
)
