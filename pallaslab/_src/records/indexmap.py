"""Index maps as small pure expressions: readable text, evaluable with NumPy.

A BlockSpec's index map is traced by JAX into a tiny jaxpr. The adapter translates that
jaxpr into the `Expr` tree defined here, so the rest of pallaslab (tile geometry, views,
race checks) can print an index map as `lambda i, j: (i, 0)` and evaluate it over a
whole grid at once with NumPy, without importing JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# Binary operators printed infix, with their precedence (higher binds tighter).
_INFIX: dict[str, tuple[str, int]] = {
    "or": ("|", 1),
    "xor": ("^", 2),
    "and": ("&", 3),
    "eq": ("==", 4),
    "ne": ("!=", 4),
    "lt": ("<", 4),
    "le": ("<=", 4),
    "gt": (">", 4),
    "ge": (">=", 4),
    "shift_left": ("<<", 5),
    "shift_right_arithmetic": (">>", 5),
    "add": ("+", 6),
    "sub": ("-", 6),
    "mul": ("*", 7),
    "floordiv": ("//", 7),
    "mod": ("%", 7),
}
_ATOM = 10


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero, as XLA's `div` does."""
    q = np.abs(a) // np.maximum(np.abs(b), 1)
    return np.asarray(np.where((a < 0) != (b < 0), -q, q))


def _select_n(pred: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    index = np.asarray(pred).astype(np.int64)
    return np.choose(index, np.broadcast_arrays(*cases))


_NUMPY_OPS: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "neg": np.negative,
    "div": _trunc_div,
    "rem": np.fmod,
    "floordiv": np.floor_divide,
    "mod": np.mod,
    "max": np.maximum,
    "min": np.minimum,
    "abs": np.abs,
    "sign": np.sign,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "not": np.invert,
    "shift_left": np.left_shift,
    "shift_right_arithmetic": np.right_shift,
    "select_n": _select_n,
    "clamp": lambda lo, x, hi: np.clip(x, lo, hi),
}

SUPPORTED_OPS = frozenset(_NUMPY_OPS) | {"arg", "const", "load"}


@dataclasses.dataclass(frozen=True)
class Expr:
    """One node of an index-map expression.

    Attributes:
        op: "arg" (an index-map argument), "const", "load" (reading a scalar-prefetch
            ref), or an operator name from `SUPPORTED_OPS`.
        args: Operand expressions (for "load": the indices into the ref).
        value: The constant for "const"; the argument position for "arg" and "load".
        name: The argument's name for "arg" and "load" (e.g. "i", "idx_ref").
    """

    op: str
    args: tuple[Expr, ...] = ()
    value: int = 0
    name: str = ""

    def evaluate(self, env: Sequence[np.ndarray]) -> np.ndarray:
        """Evaluates the expression; `env[k]` is the value of argument k."""
        if self.op == "arg":
            return np.asarray(env[self.value])
        if self.op == "const":
            return np.asarray(self.value)
        indices = [a.evaluate(env) for a in self.args]
        if self.op == "load":
            table = np.asarray(env[self.value])
            clipped = [
                np.clip(ix, 0, dim - 1) for ix, dim in zip(indices, table.shape, strict=True)
            ]
            return np.asarray(table[tuple(clipped)])
        return np.asarray(_NUMPY_OPS[self.op](*indices))

    def to_text(self) -> str:
        """Renders the expression as Python source."""
        return self._render()[0]

    def _render(self) -> tuple[str, int]:
        if self.op == "arg":
            return self.name, _ATOM
        if self.op == "const":
            return str(self.value), _ATOM if self.value >= 0 else 8
        parts = [a._render() for a in self.args]  # noqa: SLF001 - same class
        if self.op == "load":
            return f"{self.name}[{', '.join(p[0] for p in parts)}]", _ATOM
        if self.op in _INFIX and len(parts) == 2:
            symbol, prec = _INFIX[self.op]
            (left, lp), (right, rp) = parts
            left = left if lp >= prec else f"({left})"
            # Same-precedence right operands need parentheses: a - (b - c).
            right = right if rp > prec else f"({right})"
            return f"{left} {symbol} {right}", prec
        if self.op == "neg":
            text, prec = parts[0]
            return (f"-{text}" if prec >= 8 else f"-({text})"), 8
        if self.op == "not":
            return f"~{parts[0][0]}" if parts[0][1] >= 8 else f"~({parts[0][0]})", 8
        if self.op == "select_n" and len(parts) == 3:
            pred, if_false, if_true = (p[0] for p in parts)
            return f"where({pred}, {if_true}, {if_false})", _ATOM
        name = {"div": "trunc_div", "rem": "fmod"}.get(self.op, self.op)
        return f"{name}({', '.join(p[0] for p in parts)})", _ATOM


def arg(position: int, name: str) -> Expr:
    """An index-map argument: a grid index or a scalar-prefetch ref."""
    return Expr("arg", value=position, name=name)


def const(value: int) -> Expr:
    """An integer constant."""
    return Expr("const", value=int(value))


def apply(op: str, *args: Expr) -> Expr:
    """An operator applied to operand expressions, folding constants."""
    if op not in _NUMPY_OPS:
        raise ValueError(f"unsupported index-map operation: {op}")
    if all(a.op == "const" for a in args):
        folded = np.asarray(_NUMPY_OPS[op](*(np.asarray(a.value) for a in args)))
        return const(int(folded))
    return Expr(op, tuple(args))


def load(position: int, name: str, indices: Sequence[Expr]) -> Expr:
    """Reading one element of the scalar-prefetch ref at argument `position`."""
    return Expr("load", tuple(indices), value=position, name=name)


@dataclasses.dataclass(frozen=True)
class IndexMap:
    """A BlockSpec's index map: grid indices (and prefetch refs) to block indices.

    Attributes:
        arg_names: Names of the index map's parameters: the grid indices first, then
            one per scalar-prefetch operand.
        num_grid_args: How many of `arg_names` are grid indices.
        outputs: One expression per block index, or None when the index map uses an
            operation pallaslab cannot evaluate without JAX.
        text: The index map rendered as Python (`lambda i, j: (i, 0)`), or JAX's
            own jaxpr text when `outputs` is None.
        source_file: File of the index map function ("" when unknown, and for
            index maps JAX makes itself: those are no one's source).
        source_line: Line of the index map function (0 when unknown).
        sizes: Per block dimension, the size of the slice the index map returns
            with `pl.ds(start, size)` (for `pl.BoundedSlice` dimensions; then
            `outputs` holds the start), or None for dimensions indexed by one
            integer. Empty when no dimension is a slice.
        default: JAX made this index map: the operand has no BlockSpec, or one
            without an index map. Every program gets block 0 of each dimension
            (with no block shape either: the whole array).
    """

    arg_names: tuple[str, ...]
    num_grid_args: int
    outputs: tuple[Expr, ...] | None
    text: str
    source_file: str = ""
    source_line: int = 0
    sizes: tuple[Expr | None, ...] = ()
    default: bool = False

    @property
    def evaluable(self) -> bool:
        """Whether `evaluate` can compute this index map with NumPy."""
        return self.outputs is not None

    def grid_args_used(self) -> frozenset[int]:
        """Positions of the grid indices the block indices (and slice sizes) read.

        An index map that ignores a grid axis gives the same block all along it, so
        only the axes read need evaluating (`lambda i, j: (i, 0)` reads axis 0).
        """
        exprs = [*(self.outputs or ()), *(s for s in self.sizes if s is not None)]
        found: set[int] = set()
        for expr in exprs:
            found |= _args_read(expr)
        return frozenset(a for a in found if a < self.num_grid_args)

    @property
    def uses_prefetch(self) -> bool:
        """Whether the block indices depend on scalar-prefetch values."""
        exprs = [*(self.outputs or ()), *(s for s in self.sizes if s is not None)]
        return self.outputs is not None and any(_reads_prefetch(e) for e in exprs)

    def evaluate(
        self, grid_indices: Sequence[np.ndarray], prefetch: Sequence[np.ndarray] = ()
    ) -> tuple[np.ndarray, ...]:
        """Block indices for many programs at once.

        Args:
            grid_indices: One integer array per grid axis, all broadcastable to one
                shape (e.g. `np.indices(grid)`, or `np.ix_`-style open grids, which
                keep results that ignore an axis small); an entry names one program.
            prefetch: The scalar-prefetch operands' values, in order.

        Returns:
            One integer array per block dimension, broadcast to the grid arrays' shape
            (a read-only view where the value ignores some grid axes).

        Raises:
            ValueError: If the index map is not evaluable, or prefetch values are
                missing for an index map that reads them.
        """
        return self._evaluate(self.outputs, grid_indices, prefetch)

    def evaluate_sizes(
        self, grid_indices: Sequence[np.ndarray], prefetch: Sequence[np.ndarray] = ()
    ) -> tuple[np.ndarray | None, ...]:
        """Slice sizes (see `sizes`) for many programs at once; None where no slice."""
        if not self.sizes:
            return (None,) * len(self.outputs or ())
        exprs = tuple(const(0) if s is None else s for s in self.sizes)
        values = self._evaluate(exprs, grid_indices, prefetch)
        return tuple(None if s is None else v for s, v in zip(self.sizes, values, strict=True))

    def _evaluate(
        self,
        exprs: tuple[Expr, ...] | None,
        grid_indices: Sequence[np.ndarray],
        prefetch: Sequence[np.ndarray],
    ) -> tuple[np.ndarray, ...]:
        if exprs is None:
            raise ValueError(f"index map cannot be evaluated without JAX: {self.text}")
        if len(grid_indices) != self.num_grid_args:
            raise ValueError(
                f"index map takes {self.num_grid_args} grid indices, got {len(grid_indices)}"
            )
        num_prefetch = len(self.arg_names) - self.num_grid_args
        if self.uses_prefetch and len(prefetch) != num_prefetch:
            raise ValueError(
                f"index map reads {num_prefetch} scalar-prefetch operand(s); pass their values"
            )
        env: list[np.ndarray] = [np.asarray(g, dtype=np.int64) for g in grid_indices]
        env += [np.asarray(p) for p in prefetch] or [np.zeros(1)] * num_prefetch
        shape = np.broadcast_shapes(*(g.shape for g in env[: self.num_grid_args]), ())
        return tuple(
            np.broadcast_to(np.asarray(e.evaluate(env), dtype=np.int64), shape) for e in exprs
        )


def same_structure(a: IndexMap, b: IndexMap) -> bool:
    """Whether two index maps compute the same block indices, whatever their names.

    Compared as expressions: `lambda i, j: (i, 0)` and `lambda m, n: (m, 0)` are the
    same map; `(0, i)` and `(0, j)` are not. Maps pallaslab cannot evaluate are
    compared by their (JAX) text.
    """
    if a.num_grid_args != b.num_grid_args or len(a.arg_names) != len(b.arg_names):
        return False
    if a.outputs is None or b.outputs is None:
        return a.outputs is None and b.outputs is None and a.text == b.text
    return [_anonymous(e) for e in a.outputs] == [_anonymous(e) for e in b.outputs] and [
        None if e is None else _anonymous(e) for e in a.sizes
    ] == [None if e is None else _anonymous(e) for e in b.sizes]


def renamed(index_map: IndexMap, arg_names: Sequence[str]) -> str:
    """The index map as Python with other parameter names (another version's, to compare)."""
    if index_map.outputs is None or len(arg_names) != len(index_map.arg_names):
        return index_map.text
    outputs = [_named(e, arg_names) for e in index_map.outputs]
    sizes = [None if e is None else _named(e, arg_names) for e in index_map.sizes]
    return render_lambda(arg_names, outputs, sizes)


def _anonymous(expr: Expr) -> Expr:
    return dataclasses.replace(expr, name="", args=tuple(_anonymous(a) for a in expr.args))


def _named(expr: Expr, names: Sequence[str]) -> Expr:
    name = names[expr.value] if expr.op in ("arg", "load") else expr.name
    return dataclasses.replace(expr, name=name, args=tuple(_named(a, names) for a in expr.args))


def _args_read(expr: Expr) -> set[int]:
    found = {expr.value} if expr.op == "arg" else set()
    for sub in expr.args:
        found |= _args_read(sub)
    return found


def _reads_prefetch(expr: Expr) -> bool:
    return expr.op == "load" or any(_reads_prefetch(a) for a in expr.args)


def render_lambda(
    arg_names: Sequence[str], outputs: Sequence[Expr], sizes: Sequence[Expr | None] = ()
) -> str:
    """`lambda i, j: (i, 0)` for the given argument names and output expressions.

    Dimensions with a slice size (see `IndexMap.sizes`) read `pl.ds(start, size)`.
    """
    sizes = list(sizes) or [None] * len(outputs)
    body = ", ".join(
        e.to_text() if size is None else f"pl.ds({e.to_text()}, {size.to_text()})"
        for e, size in zip(outputs, sizes, strict=True)
    )
    if len(outputs) == 1:
        body += ","
    return f"lambda {', '.join(arg_names)}: ({body})"
