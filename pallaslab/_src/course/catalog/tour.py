"""Notebook 00, the tour: a first kernel of one's own."""

from __future__ import annotations

import jax.numpy as jnp

from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "00_tour"

EXERCISES = (
    Exercise(
        id="00.relu",
        notebook=NOTEBOOK,
        title="ReLU without a Python if",
        task=(
            "Write relu(x): max(x, 0) elementwise for a float32 vector whose length is a "
            "multiple of 128, in blocks of 128."
        ),
        reference=lambda x: jnp.maximum(x, 0),
        cases=(case(f32(1024)), case(f32(4096))),
        hint=(
            "Compute max(x, 0) for the whole block at once: jnp.maximum(x_ref[...], 0) "
            "(or jnp.where): elementwise operations need no branch."
        ),
        mistakes=(
            Mistake(
                "identity",
                lambda x: x,
                "Your kernel copies x: negative values must become 0.",
            ),
        ),
    ),
    Exercise(
        id="00.axpy",
        notebook=NOTEBOOK,
        title="a * x + y with a captured constant",
        task=(
            "Write axpy(x, y, a=2.0): a * x + y for float32 vectors (length a multiple of "
            "128), where a is a Python float the kernel captures from the enclosing function."
        ),
        reference=lambda x, y, a: a * x + y,
        cases=(case(f32(1024), f32(1024), a=2.0), case(f32(2048), f32(2048), a=-0.5)),
        hint="Multiply x's block by the factor a before adding y's block.",
        mistakes=(
            Mistake(
                "ignores-a",
                lambda x, y, a: x + y,
                "Your kernel computes x + y: multiply by the factor a. The kernel function can "
                "read a from the function around it (a closure): while tracing it is a "
                "constant, baked into the kernel.",
            ),
            Mistake(
                "times-y",
                lambda x, y, a: a * (x + y),
                "Your kernel computes a * (x + y): only x is scaled.",
            ),
        ),
    ),
)
