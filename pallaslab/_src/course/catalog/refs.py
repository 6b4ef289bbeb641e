"""Notebook 01: Refs and `pallas_call`."""

from __future__ import annotations

import jax.numpy as jnp

from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "01_refs_and_pallas_call"


def _scale_rows(x):  # type: ignore[no-untyped-def]
    return x * jnp.arange(1, x.shape[0] + 1, dtype=x.dtype)[:, None]


EXERCISES = (
    Exercise(
        id="01.affine",
        notebook=NOTEBOOK,
        title="Write into the output ref",
        task="Write affine(x): 2 * x + 1 for a float32 array of any shape, with no grid.",
        reference=lambda x: 2 * x + 1,
        cases=(case(f32(8, 128)), case(f32(3, 5)), case(f32(1000))),
        hint="Read the input with x_ref[...] and store into the output ref: o_ref[...] = value.",
        mistakes=(Mistake("forgets-plus-one", lambda x: 2 * x, "You compute 2 * x: add 1."),),
    ),
    Exercise(
        id="01.sum_and_diff",
        notebook=NOTEBOOK,
        title="Two outputs",
        task=(
            "Write sum_and_diff(x, y): returns the pair (x + y, x - y) from one kernel with "
            "two outputs."
        ),
        reference=lambda x, y: (x + y, x - y),
        cases=(case(f32(8, 128), f32(8, 128)), case(f32(16, 32), f32(16, 32))),
        hint=(
            "Give out_shape a tuple of two jax.ShapeDtypeStructs; the kernel then takes "
            "two output refs after its input refs."
        ),
        mistakes=(
            Mistake(
                "swapped-outputs",
                lambda x, y: (x - y, x + y),
                "Your outputs come out swapped. Output refs follow the input refs in the "
                "order of out_shape: the first output ref is the first result.",
            ),
        ),
    ),
    Exercise(
        id="01.scale_rows",
        notebook=NOTEBOOK,
        title="Sub-refs with .at",
        task=(
            "Write scale_rows(x): row i of the result is row i of x times (i + 1), for a "
            "float32 (rows, cols) array, with the helper scale_row(src, dst, factor) "
            "called once per row on sub-refs."
        ),
        reference=_scale_rows,
        cases=(case(f32(4, 128)), case(f32(8, 64))),
        hint="Pass x_ref.at[i] and o_ref.at[i]: each is a Ref to row i.",
        mistakes=(
            Mistake(
                "whole-refs",
                lambda x: x * x.shape[0],
                "Every call of the helper overwrites the whole output, so only the last row's "
                "factor survives. Pass sub-refs: x_ref.at[i] is a Ref to row i (no data is "
                "read), and writing through o_ref.at[i] writes row i only.",
            ),
        ),
    ),
)
