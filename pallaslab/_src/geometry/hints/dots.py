"""Hint rules on matrix products: tensor-core and MXU shapes, upcasts, low-precision sums."""

from __future__ import annotations

import math

from pallaslab._src.geometry.hints.inputs import HintInputs, make_hint
from pallaslab._src.records import hardware
from pallaslab._src.records.hints import DotInfo, FigureValue, Hint

# Tensor-core instructions take at least 16 per dimension; Hopper's wgmma 64 rows.
TENSOR_CORE_MIN = 16
WGMMA_ROWS = 64
# The share of the MXU below which a hint is given.
MXU_INFO, MXU_WARNING = 0.5, 0.25

_LOW_PRECISION = frozenset({"bfloat16", "float16"})


def _float_dot(dot: DotInfo) -> bool:
    return all("float" in d for d in (dot.lhs_dtype, dot.rhs_dtype, dot.out_dtype))


def _dot_words(dot: DotInfo) -> str:
    batch = f"{dot.batch} x " if dot.batch > 1 else ""
    return f"{batch}{dot.m}x{dot.k} by {dot.k}x{dot.n}"


def small_dot(inputs: HintInputs) -> list[Hint]:
    """Products too small for the tensor cores or the MXU."""
    found = []
    chip = inputs.chip
    for dot in inputs.dots:
        if not _float_dot(dot):
            continue
        dims = [("m", dot.m), ("n", dot.n), ("k", dot.k)]
        if isinstance(chip, hardware.Tpu):
            size = chip.mxu_size
            used = (dot.k / (math.ceil(dot.k / size) * size)) * (
                dot.n / (math.ceil(dot.n / size) * size)
            )
            if used >= MXU_INFO:
                continue
            found.append(
                make_hint(
                    inputs,
                    "small-dot",
                    "warning" if used < MXU_WARNING else "info",
                    f"This dot multiplies {_dot_words(dot)}: {chip.name}'s MXU is a {size}x"
                    f"{size} systolic array, and a product with K={dot.k} and N={dot.n} keeps "
                    f"{used:.0%} of it busy per pass. Blocks that give the dot K and N of "
                    f"{size} or more (multiples of {size}) fill it.",
                    dot.location,
                    [*dims, ("MXU size", size), ("MXU use %", round(100 * used, 1))],
                )
            )
            continue
        smallest = min(dot.m, dot.n, dot.k)
        if smallest < TENSOR_CORE_MIN:
            found.append(
                make_hint(
                    inputs,
                    "small-dot",
                    "warning",
                    f"This dot multiplies {_dot_words(dot)}: tensor-core instructions take "
                    f"tiles of at least {TENSOR_CORE_MIN} in every dimension, so Triton pads "
                    f"this product or refuses it, and most of the work is wasted. Make the "
                    f"block dimensions that reach the dot {TENSOR_CORE_MIN} or more.",
                    dot.location,
                    [*dims, ("tensor-core minimum", TENSOR_CORE_MIN)],
                )
            )
        elif (
            isinstance(chip, hardware.Gpu)
            and chip.compute_capability >= (9, 0)
            and dot.m % WGMMA_ROWS
        ):
            found.append(
                make_hint(
                    inputs,
                    "small-dot",
                    "info",
                    f"This dot multiplies {_dot_words(dot)}: on {chip.name}, the fastest "
                    f"tensor-core instructions (wgmma) work on {WGMMA_ROWS} rows per warp "
                    f"group; with M={dot.m}, Triton falls back to the older mma instructions. "
                    f"A block with a multiple of {WGMMA_ROWS} rows feeding the dot can use wgmma.",
                    dot.location,
                    [*dims, ("wgmma rows", WGMMA_ROWS)],
                )
            )
    return found


def dot_upcast(inputs: HintInputs) -> list[Hint]:
    """bfloat16 / float16 data widened to float32 just before a dot."""
    found = []
    chip = inputs.chip
    for dot in inputs.dots:
        source = dot.lhs_from or dot.rhs_from
        if source not in _LOW_PRECISION or "float32" not in (dot.lhs_dtype, dot.rhs_dtype):
            continue
        if isinstance(chip, hardware.Tpu):
            cost = (
                f"on {chip.name}'s MXU, float32 products take several bfloat16 passes, and "
                "the float32 operands take twice the VMEM and vector registers"
            )
            figures: list[tuple[str, FigureValue]] = [("bf16 peak TFLOP/s", chip.bf16_flops / 1e12)]
        else:
            cost = (
                f"on {chip.name}, float32 operands run the tensor cores as TF32 at no more "
                "than half the bfloat16 rate (or without tensor cores at full float32 "
                "precision), and take twice the registers and shared memory"
            )
            figures = [
                ("bf16 tensor-core peak TFLOP/s", chip.bf16_flops / 1e12),
                ("fp32 peak TFLOP/s", chip.fp32_flops / 1e12),
            ]
        found.append(
            make_hint(
                inputs,
                "dot-upcast",
                "warning",
                f"This dot multiplies float32 values converted from {source}: {cost}. Give "
                f"the dot the {source} values and pass preferred_element_type=jnp.float32 "
                "to get a float32 result from the same products.",
                dot.location,
                [("converted from", source), ("dot dtype", "float32"), *figures],
            )
        )
    return found


def dot_low_precision_sum(inputs: HintInputs) -> list[Hint]:
    """A dot returning bfloat16 / float16 whose result is widened or summed."""
    found = []
    for dot in inputs.dots:
        if dot.out_dtype not in _LOW_PRECISION or not (dot.accumulated or dot.widened_to):
            continue
        then = "summed" if dot.accumulated else f"converted to {dot.widened_to}"
        found.append(
            make_hint(
                inputs,
                "dot-low-precision-result",
                "warning",
                f"This dot returns {dot.out_dtype} and its result is then {then}: each "
                f"product over K={dot.k} is rounded to {dot.out_dtype} first, throwing away "
                "precision the tensor cores and the MXU computed in float32 anyway. Pass "
                "preferred_element_type=jnp.float32 to the dot (same speed) and keep the "
                "accumulator in float32.",
                dot.location,
                [("result dtype", dot.out_dtype), ("k", dot.k)],
            )
        )
    return found
