"""Notebook 05: templating by tracing."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pallaslab._src.course import requirements
from pallaslab._src.course.catalog._helpers import case, f32
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "05_templating_by_tracing"
BLOCK = 64


def _fused(x, y, activation=None):  # type: ignore[no-untyped-def]
    out = jnp.dot(x, y, preferred_element_type=jnp.float32)
    return (out if activation is None else activation(out)).astype(x.dtype)


def _block_lower(x, y):  # type: ignore[no-untyped-def]
    out = jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)
    rows, cols = out.shape
    i = jnp.arange(rows)[:, None] // BLOCK
    j = jnp.arange(cols)[None, :] // BLOCK
    return jnp.where(j <= i, out, 0)


def _activation_ignored(x, y, activation=None):  # type: ignore[no-untyped-def]
    return _fused(x, y)


EXERCISES = (
    Exercise(
        id="05.fused",
        notebook=NOTEBOOK,
        title="A fused matmul + activation",
        task=(
            "Write matmul_act(x, y, activation=None): activation(x @ y) in one kernel, for "
            "any activation function given (or none), float32 (M, K) @ (K, N) with "
            "(64, 64) output blocks."
        ),
        reference=_fused,
        cases=(
            case(f32(128, 64), f32(64, 128), activation=jax.nn.relu),
            case(f32(64, 128), f32(128, 64), activation=jnp.tanh),
            case(f32(64, 64), f32(64, 64), activation=None),
        ),
        hint=(
            "Apply activation to the accumulator inside the kernel, before storing; with a "
            "Python 'if activation is not None:' the plain matmul gets no extra code."
        ),
        mistakes=(
            Mistake(
                "activation-ignored",
                _activation_ignored,
                "The activation is never applied: call activation(acc) in the kernel "
                "(a Python 'if activation is None' is fine: it is known while tracing).",
            ),
        ),
        requirements=(requirements.one_kernel(),),
    ),
    Exercise(
        id="05.block_tril",
        notebook=NOTEBOOK,
        title="Skip blocks at run time",
        task=(
            "Write tril_matmul(x, y): x @ y for float32 square matrices, but only the "
            "blocks on or below the diagonal of (64, 64) blocks (j <= i); the others are 0, "
            "and no product is computed for them."
        ),
        reference=_block_lower,
        cases=(case(f32(128, 64), f32(64, 128)), case(f32(256, 64), f32(64, 256))),
        hint=(
            "Program ids are known only when the kernel runs: branch with @pl.when(j <= i) "
            "for the product and @pl.when(j > i) for the zeros."
        ),
        mistakes=(
            Mistake(
                "full-product",
                lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype),
                "You compute every block: the blocks above the diagonal (j > i) must be 0.",
            ),
        ),
        requirements=(
            requirements.body_uses(
                "cond",
                "branch at run time with pl.when (it becomes a cond in the jaxpr), so "
                "the blocks above the diagonal cost no product.",
            ),
        ),
    ),
)
