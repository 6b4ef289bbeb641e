"""Scalar integer arithmetic of a kernel body, evaluated for every program at once.

A value is a NumPy array over the programs (shape `(P,)`), a 0-d array when every
program has the same, or None when it depends on data the walker does not follow
(a loaded value, a float). Only what decides control flow and copy windows is
evaluated: integer and boolean scalars (loop counters, indices, predicates).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Value = np.ndarray | None


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (`lax.div` on integers), 0 where b is 0."""
    safe = np.where(b == 0, 1, b)
    quotient = np.abs(a) // np.abs(safe)
    return np.where(b == 0, 0, np.sign(a) * np.sign(safe) * quotient)


def _c_rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the dividend's sign (`lax.rem` on integers), 0 where b is 0."""
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, a - _c_div(a, safe) * safe)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _c_div,
    "rem": _c_rem,
    "max": np.maximum,
    "min": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "shift_left": np.left_shift,
    "shift_right_arithmetic": np.right_shift,
    "shift_right_logical": np.right_shift,
}
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "not": lambda a: ~a if a.dtype == np.bool_ else np.invert(a),
}
# Primitives that return their (first) operand's value unchanged, as far as indices go.
_IDENTITY = frozenset(
    {
        "copy",
        "copy_p",
        "multiple_of",
        "optimization_barrier",
        "pvary",
        "squeeze",
        "reshape",
        "broadcast_in_dim",
        "reduce_precision",
        "stop_gradient",
    }
)


def is_scalar(aval: Any) -> bool:
    """Whether an abstract value is an integer or boolean scalar (or one element)."""
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return False
    try:
        kind = np.dtype(dtype).kind
    except TypeError:  # extended dtypes (barriers, semaphores)
        return False
    return kind in "biu" and int(np.prod(shape, dtype=np.int64)) == 1


def literal(value: Any) -> Value:
    """A constant as a value: integer and boolean scalars; None for anything else."""
    array = np.asarray(value)
    if array.size != 1 or array.dtype.kind not in "biu":
        return None
    return array.reshape(()).astype(np.bool_ if array.dtype.kind == "b" else np.int64)


def evaluate(name: str, params: dict[str, Any], inputs: list[Value], out_aval: Any) -> Value:
    """One primitive on per-program values; None when it is not index arithmetic.

    `out_aval`: the result's, to check it is a scalar (None: the caller checked).
    """
    if (out_aval is not None and not is_scalar(out_aval)) or any(v is None for v in inputs):
        return None
    values = [v for v in inputs if v is not None]
    if name in _BINARY and len(values) == 2:
        # Integer arrays wrap silently; division by zero is guarded in `_c_div`.
        result = _BINARY[name](values[0], values[1])
    elif name in _UNARY and len(values) == 1:
        result = _UNARY[name](values[0])
    elif name in _IDENTITY and values:
        result = values[0]
    elif name == "convert_element_type" and values:
        kind = np.dtype(params["new_dtype"]).kind
        result = values[0] != 0 if kind == "b" else values[0].astype(np.int64)
    elif name == "select_n" and len(values) >= 2:
        which = values[0].astype(np.int64)
        result = np.choose(which, np.broadcast_arrays(*values[1:]))
    elif name == "clamp" and len(values) == 3:
        result = np.clip(values[1], values[0], values[2])
    elif name == "integer_pow" and values:
        result = values[0] ** int(params["y"])
    else:
        return None
    return np.asarray(result)


def combine(mask: np.ndarray, branches: list[tuple[np.ndarray, Value]]) -> Value:
    """One value from branches taken by disjoint sets of programs (None if any is unknown)."""
    taken = [(m, v) for m, v in branches if m.any() and v is not None]
    if not taken or len(taken) != sum(1 for m, _ in branches if m.any()):
        return None
    out = np.zeros(mask.shape, dtype=np.result_type(*[v for _, v in taken]))
    for where, value in taken:
        out = np.where(where, value, out)
    return out


def as_mask(value: Value, programs: int) -> np.ndarray | None:
    """A value as a boolean per program (None if unknown)."""
    if value is None:
        return None
    return np.broadcast_to(value != 0, (programs,))
