"""What the layers above the core may ask of a traced program, as plain values.

The bench, the course and the magic never hold the program itself (its jaxpr, its
kernels as JAX bound them): they ask here, with an inspection. Each function returns
records, text, or the user's own callables and arrays.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import jax_adapter, snapshot
from pallaslab._src.core.comparison import Placement, compare, compare_located, placed_locator
from pallaslab._src.core.comparison import placements as _placements
from pallaslab._src.core.program import Traced, program_of, require_call
from pallaslab._src.records import Comparison

# Object addresses ("<function f at 0x7f...>") differ from run to run.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def example_call(traced: Traced) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    """The inspected call: the callable and its example arguments, as given.

    Arguments given as shapes stay `jax.ShapeDtypeStruct`s (seed them with
    `core.seeded.materialize` to run them).

    Raises:
        ValueError: When no single call was traced (kernels recorded while a cell ran).
    """
    program = require_call(traced, "call it again")
    assert program.flat_fn is not None
    assert program.rebuild is not None
    if program.fn is None:  # built by hand: the callable over the traced leaves
        return program.flat_fn, tuple(program.examples()), {}
    args, kwargs = program.rebuild(program.examples())
    if program.pins is not None:  # traced again, as inspected: its globals pinned
        return snapshot.pinned_function(program.fn, program.pins), args, kwargs
    return program.fn, args, kwargs


def compare_outputs(
    traced: Traced,
    outputs: Any,
    expected: Any,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> Comparison:
    """The outputs of the inspected callable on `args` against a reference.

    Mismatches are located per block of the kernels that write each output; index
    maps that read scalar-prefetch values get those of `args` (the examples' without).

    Args:
        traced: The inspection of the program that gave `outputs`.
        outputs: Its outputs (any pytree of arrays).
        expected: The reference's outputs (any pytree of arrays).
        args: The arguments it ran on, laid out as for the inspected call.
        kwargs: Its keyword arguments.
        rtol: Relative tolerance (default: fit for each output's dtype).
        atol: Absolute tolerance (default: fit for each output's dtype).
    """
    program = program_of(traced)
    leaves = (
        program.leaves_of(args, kwargs)
        if program is not None and program.split is not None
        else None
    )
    flat = [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)]
    return compare_located(traced, flat, expected, leaves=leaves, rtol=rtol, atol=atol)


def output_placements(
    traced: Traced, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
) -> tuple[Placement, ...]:
    """Where each output's mismatches lie on the kernel blocks that write it.

    Plain records, for a comparison made where the program is not (a tuning worker):
    `compare_placed` there locates mismatches as `compare_outputs` does here.
    """
    program = program_of(traced)
    leaves = (
        program.leaves_of(args, kwargs)
        if program is not None and program.split is not None
        else None
    )
    return _placements(traced, leaves)


def compare_placed(outputs: Any, expected: Any, placed: Sequence[Placement] = ()) -> Comparison:
    """Outputs against a reference, mismatches located with `output_placements`' result."""
    flat = [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)]
    return compare(flat, expected, locate=placed_locator(placed) if placed else None)


def fingerprint(traced: Traced) -> str:
    """What was traced, as a digest: the jaxpr (kernel bodies included) and constants.

    Two programs with the same fingerprint compute the same thing; "" when no single
    call was traced.
    """
    program = program_of(traced)
    if program is None or program.closed_jaxpr is None:
        return ""
    return _jaxpr_digest(program.closed_jaxpr)


def callable_fingerprint(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> str:
    """`fingerprint` of any callable traced on these arguments (a reference, say).

    Raises:
        Exception: Whatever tracing raises (NumPy inside the callable, say).
    """
    return _jaxpr_digest(jax.make_jaxpr(fn)(*args, **kwargs))


def values_digest(tree: Any) -> str:
    """A digest of a pytree's values: arrays by shape, dtype and bytes; others by repr."""
    digest = hashlib.blake2b(digest_size=16)
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
            array = np.asarray(leaf)
            digest.update(f"{array.shape}{array.dtype}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        else:
            digest.update(_ADDRESS.sub("0x", repr(leaf)).encode())
    return digest.hexdigest()


def _jaxpr_digest(closed: Any) -> str:
    text, _ = jax_adapter.jaxpr_text(closed)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_ADDRESS.sub("0x", text).encode())
    digest.update(values_digest(jax_adapter.jaxpr_constants(closed)).encode())
    return digest.hexdigest()


def lower_for(traced: Traced, platform: str) -> None:
    """Lowers the whole traced call for a platform ("cuda", "tpu"), to see that it can.

    On a machine without that platform's device the adapter lowers for an abstract
    one (jax 0.11+).

    Raises:
        Exception: The lowering's error (a `TypeError` naming `lowering_platforms`
            when this JAX cannot lower for another platform at all).
    """
    program = require_call(traced, "lower it")
    assert program.lowering_fn is not None
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in program.args]
    jax_adapter.lower_module(program.lowering_fn, specs, platform)


def operations_outside_kernels(traced: Traced) -> list[str]:
    """The primitives the program runs outside its kernels, each named once, in order.

    Calls that only wrap what they call (`jit`, `custom_vjp` ...) are left out;
    [] when no single call was traced.
    """
    program = program_of(traced)
    if program is None or program.closed_jaxpr is None:
        return []
    return [
        name
        for name in jax_adapter.primitives_outside_kernels(program.closed_jaxpr)
        if name not in jax_adapter.CALL_PRIMITIVES
    ]
