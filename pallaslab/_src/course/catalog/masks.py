"""Notebook 03: masks and reductions."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pallaslab._src.course.catalog._helpers import case, f32, made, normal
from pallaslab._src.course.spec import Exercise, Mistake

NOTEBOOK = "03_masks_and_reductions"


def _negative(seed: int, rows: int, cols: int) -> jax.Array:
    # Every element below zero: a masked lane that reads 0 would win the max.
    return -jnp.abs(normal(seed, rows, cols)) - 1.0


def _naive_softmax(x):  # type: ignore[no-untyped-def]
    e = jnp.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_other_zero(x):  # type: ignore[no-untyped-def]
    # Masked lanes read as 0 count exp(0 - max) in the denominator.
    cols = x.shape[-1]
    padded = jnp.zeros((*x.shape[:-1], int(pl_next_power_of_2(cols))), x.dtype)
    padded = padded.at[..., :cols].set(x)
    e = jnp.exp(padded - padded.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True))[..., :cols]


def pl_next_power_of_2(n: int) -> int:
    """The smallest power of two at least n (as Pallas' `pl.next_power_of_2`)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


EXERCISES = (
    Exercise(
        id="03.row_max",
        notebook=NOTEBOOK,
        title="A masked reduction",
        task=(
            "Write row_max(x): the max of each row of a float32 (rows, cols) array, one "
            "program per row, loading a power-of-two block of the row with a mask."
        ),
        reference=lambda x: x.max(axis=-1),
        cases=(
            case(f32(8, 128)),
            made(lambda: (_negative(1, 8, 100),), label="x: f32[8,100], all negative"),
            made(lambda: (_negative(2, 4, 33),), label="x: f32[4,33], all negative"),
        ),
        hint="The lanes the mask turns off read the other= value: make it one that never wins.",
        mistakes=(
            Mistake(
                "other-zero",
                lambda x: jnp.maximum(x.max(axis=-1), 0.0),
                "Masked-out lanes read the other= value, 0, which beats every negative value. "
                "Use the identity of your reduction: other=-jnp.inf for a max (0 for a sum).",
            ),
        ),
    ),
    Exercise(
        id="03.softmax",
        notebook=NOTEBOOK,
        title="A softmax that does not overflow",
        task=(
            "Write softmax(x): softmax over the last axis of a float32 (rows, cols) array, "
            "one program per row, right also for large inputs."
        ),
        reference=lambda x: jax.nn.softmax(x, axis=-1),
        cases=(
            case(f32(8, 128)),
            case(f32(16, 100)),
            made(lambda: (normal(3, 4, 128, scale=100.0),), label="x: f32[4,128] * 100"),
        ),
        hint="exp overflows float32 above about 88: subtract the row's max first.",
        mistakes=(
            Mistake(
                "not-stable",
                _naive_softmax,
                "exp(x) overflows float32 for x above about 88, and inf / inf is NaN. "
                "Subtract the row's max before exp: softmax(x) = softmax(x - max(x)), and "
                "then every exp is at most 1.",
            ),
            Mistake(
                "other-zero",
                _softmax_other_zero,
                "Masked-out lanes read the other= value, 0, and exp(0 - max) adds to the sum. "
                "Load with other=-jnp.inf: exp(-inf) is 0.",
            ),
        ),
    ),
    Exercise(
        id="03.chunked_sum",
        notebook=NOTEBOOK,
        title="A loop over chunks with a masked tail",
        task=(
            "Write row_sum(x): the sum of each row of a float32 (rows, cols) array, one "
            "program per row, adding the row up 128 columns at a time in a fori_loop, for "
            "any number of columns."
        ),
        reference=lambda x: x.sum(axis=-1),
        cases=(case(f32(4, 1024)), case(f32(4, 1000)), case(f32(2, 300))),
        hint="Loop pl.cdiv(cols, 128) times and mask the lanes of the last chunk.",
        mistakes=(
            Mistake(
                "drops-tail",
                lambda x: x[:, : x.shape[1] // 128 * 128].sum(axis=-1),
                "Your loop runs cols // 128 times and never adds the last, partial chunk. "
                "Run it pl.cdiv(cols, 128) times and load the last chunk with a mask "
                "(mask=cols_of_chunk < cols, other=0.0: 0 does not change a sum).",
            ),
        ),
    ),
)
