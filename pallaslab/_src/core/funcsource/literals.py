"""Plain values as Python text: literals (exact floats, nested arrays), displays, comments.

And a value's short description for messages and comments (`a float32[8] array`).
"""

from __future__ import annotations

import math
import textwrap
import types
from collections.abc import Callable
from typing import Any

import numpy as np


def comment(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 86, initial_indent="# ", subsequent_indent="# "))


def display(opening: str, items: list[str], closing: str, width: int = 72) -> str:
    """A display of items: on one line when short, else one item per line."""
    flat = f"{opening}{', '.join(items)}{closing}"
    if len(flat) <= width and "\n" not in flat:
        return flat
    body = "".join(textwrap.indent(item, "    ") + ",\n" for item in items)
    return f"{opening}\n{body}{closing}"


def float_text(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(value)


def nested_text(array: np.ndarray) -> str:
    """A nested list literal of the array's values, exact (floats round-trip)."""
    if array.dtype.kind == "b":
        return repr(array.tolist())
    if array.dtype.kind in "iu":
        return repr(array.tolist())
    if array.dtype.kind == "c":
        return _listed(array, lambda v: f"complex({float_text(v.real)}, {float_text(v.imag)})")
    return _listed(array.astype(np.float64), lambda v: float_text(float(v)))


def _listed(array: np.ndarray, item: Callable[[Any], str]) -> str:
    if array.ndim == 0:
        return item(array[()])
    return "[" + ", ".join(_listed(sub, item) for sub in array) + "]"


def describe(value: Any) -> str:
    if isinstance(value, types.FunctionType):
        return f"function {value.__qualname__}"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, np.ndarray):
        return f"a {value.dtype}{list(value.shape)} array"
    text = repr(value)
    if len(text) > 60 or " at 0x" in text:
        return f"a {type(value).__module__}.{type(value).__qualname__}"
    return text


def same_plain_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(
            type(a) is type(b) and isinstance(a, (int, float, str, bytes, tuple)) and a == b
        )
    except Exception:
        return False


def importable_kind(value: Any) -> bool:
    """Objects worth looking up as library exports (not plain data)."""
    return not isinstance(value, (bool, int, float, complex, str, bytes, tuple, list, dict))
