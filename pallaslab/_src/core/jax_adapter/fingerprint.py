"""What a traced program *is*, as a hashable key: the compile cache's view of a jaxpr.

JAX's own jit cache is keyed on the Python callable, which a re-executed notebook cell
defines anew, so an unchanged cell compiles again. `program_key` describes the program
itself instead: every equation's primitive, parameters (sub-jaxprs walked the same way),
operand and result types, literal values and the contents of closed-over constants,
with variables numbered by position. Two programs get equal keys only when JAX would
lower them alike; a kernel redefined identically gets the key it had.

What a key leaves out, on purpose:
- source locations and debug names (`source_info`, `debug_info`, Pallas' `src_info`):
  they label the compiled program but do not change what it computes, and a notebook
  cell gets a new file name each time it runs;
- the rules a `custom_jvp` / `custom_vjp` function carries for differentiation
  (`jvp_jaxpr_fun`, `fwd_jaxpr_thunk`, `bwd` ...): a traced program has already been
  differentiated where it was, and lowering runs only the primal body.

Everything else that is not plain data (a callback's Python function, an unfamiliar
object) is part of the key by identity and held by it, so its id cannot be reused while
the key lives: the worst outcome of an object the key does not understand is a miss,
never two programs sharing an entry.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.probes import jax_core

try:
    from jax._src import config as _jax_config
except ImportError:  # pragma: no cover - then the trace context is read from public flags
    _jax_config = None  # type: ignore[assignment]

# Attributes that only label a program (where it came from), never change it.
_LABEL_FIELDS = frozenset({"src_info", "source_info", "debug_info"})
# Parameters of custom-derivative calls that only differentiation reads.
_DIFFERENTIATION_ONLY = frozenset(
    {"jvp_jaxpr_fun", "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd", "out_trees"}
)
_CUSTOM_DERIVATIVE_CALLS = frozenset(
    {"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"}
)

_JAXPR_TYPES: tuple[type, ...] = tuple(
    t for t in (getattr(jax_core, "Jaxpr", None), getattr(jax_core, "ClosedJaxpr", None)) if t
)
_LITERAL = getattr(jax_core, "Literal", None)
_DROP_VAR = getattr(jax_core, "DropVar", None)
_EQN_CONTEXT = getattr(jax_core, "JaxprEqnContext", None)


class Identity:
    """Part of a key by identity: equal only to itself, and it keeps the object alive."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"Identity({type(self.obj).__name__} at {id(self.obj):#x})"


@dataclasses.dataclass
class KeyStats:
    """What building a key saw.

    Attributes:
        const_bytes: Bytes of the constants (closed-over arrays, array literals) the
            program holds; compiled programs keep them.
        by_identity: Objects the key holds by identity (each a miss when made anew).
    """

    const_bytes: int = 0
    by_identity: int = 0


def program_key(closed_jaxpr: Any, stats: KeyStats | None = None) -> tuple[Any, ...]:
    """A hashable description of a (closed) jaxpr: equal keys, equal programs."""
    return _Canon(stats or KeyStats()).jaxpr(closed_jaxpr)


def value_key(value: Any, stats: KeyStats | None = None) -> Any:
    """A hashable description of a parameter value (a pallas_call's params, a plan ...)."""
    return _Canon(stats or KeyStats()).value(value)


def array_digest(value: Any) -> tuple[str, tuple[int, ...], str]:
    """(dtype, shape, content hash) of an array: equal for equal contents."""
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise TypeError("an array of Python objects has no content hash")
    flat = np.ascontiguousarray(array).reshape(-1)
    digest = hashlib.blake2b(flat.view(np.uint8).data, digest_size=16)
    return str(array.dtype), tuple(array.shape), digest.hexdigest()


def trace_context() -> Any:
    """JAX's configuration that changes how programs trace and lower.

    What JAX itself puts in its jit cache key (x64, default matmul precision, Pallas'
    interpret-mode switch, pallaslab's emulation request ...).
    """
    context = getattr(_jax_config, "trace_context", None)
    if callable(context):
        return context()
    import jax  # noqa: PLC0415 - only on a JAX without trace_context

    return tuple(
        (name, repr(getattr(jax.config, name, None)))
        for name in ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_dtype_promotion")
    )


class _Canon:
    """Converts JAX objects into nested tuples of plain, hashable values."""

    def __init__(self, stats: KeyStats) -> None:
        self.stats = stats

    # -- jaxprs ---------------------------------------------------------------

    def jaxpr(self, obj: Any) -> tuple[Any, ...]:
        consts = list(getattr(obj, "consts", ()) or ())
        inner = getattr(obj, "jaxpr", obj)
        if not isinstance(inner, _JAXPR_TYPES):
            inner = obj
        # Variables by id: the jaxpr holds them all while it is walked.
        numbers: dict[int, int] = {}

        def bind(var: Any) -> Any:
            numbers[id(var)] = len(numbers)
            return self.value(var.aval)

        constvars = tuple(bind(v) for v in inner.constvars)
        invars = tuple(bind(v) for v in inner.invars)
        eqns = []
        for eqn in inner.eqns:
            name = eqn.primitive.name
            params = eqn.params
            if name in _CUSTOM_DERIVATIVE_CALLS:
                params = {k: v for k, v in params.items() if k not in _DIFFERENTIATION_ONLY}
            operands = tuple(self.atom(a, numbers) for a in eqn.invars)
            results = tuple(
                ("drop", self.value(v.aval))
                if _DROP_VAR is not None and isinstance(v, _DROP_VAR)
                else bind(v)
                for v in eqn.outvars
            )
            eqns.append(
                (
                    name,
                    self.params(params),
                    operands,
                    results,
                    self.eqn_context(getattr(eqn, "ctx", None)),
                )
            )
        outvars = tuple(self.atom(a, numbers) for a in inner.outvars)
        return (
            "jaxpr",
            constvars,
            tuple(self.value(c) for c in consts),
            invars,
            tuple(eqns),
            outvars,
        )

    def atom(self, atom: Any, numbers: dict[int, int]) -> Any:
        if _LITERAL is not None and isinstance(atom, _LITERAL):
            return ("lit", self.value(atom.val), self.value(atom.aval))
        number = numbers.get(id(atom))
        if number is None:  # a variable bound outside: only equal to itself
            self.stats.by_identity += 1
            return ("free", Identity(atom))
        return ("v", number)

    def params(self, params: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            (key, self.value(params[key])) for key in sorted(params) if key not in _LABEL_FIELDS
        )

    def eqn_context(self, ctx: Any) -> Any:
        if ctx is None:
            return None
        if _EQN_CONTEXT is not None and isinstance(ctx, _EQN_CONTEXT):
            names = [
                n
                for cls in type(ctx).__mro__
                for n in getattr(cls, "__slots__", ())
                if n != "__weakref__"
            ]
            return ("ctx", tuple((n, self.value(getattr(ctx, n, None))) for n in names))
        return self.value(ctx)

    # -- values ---------------------------------------------------------------

    def value(self, value: Any) -> Any:
        kind = type(value)
        if value is None or kind in (bool, int, str, bytes):
            return (kind.__name__, value)
        if kind in (float, complex):
            return (kind.__name__, repr(value))  # NaN is equal to itself here
        if isinstance(value, _JAXPR_TYPES):
            return self.jaxpr(value)
        if isinstance(value, np.dtype):
            return ("dtype", str(value))
        if isinstance(value, enum.Enum):
            return value
        if isinstance(value, (tuple, list)):
            return (kind, tuple(self.value(v) for v in value))
        if isinstance(value, dict):
            return (
                kind,
                tuple(sorted(((self.value(k), self.value(v)) for k, v in value.items()), key=repr)),
            )
        if isinstance(value, (set, frozenset)):
            return (kind, tuple(sorted((self.value(v) for v in value), key=repr)))
        if isinstance(value, (np.ndarray, np.generic)) or _is_concrete_array(value):
            try:
                dtype, shape, digest = array_digest(value)
            except TypeError:  # object arrays: by identity
                self.stats.by_identity += 1
                return Identity(value)
            self.stats.const_bytes += int(np.asarray(value).nbytes)
            return ("array", dtype, shape, digest)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return (
                kind,
                tuple(
                    (f.name, self.value(getattr(value, f.name, None)))
                    for f in dataclasses.fields(value)
                    if f.compare and f.name not in _LABEL_FIELDS
                ),
            )
        try:
            hash(value)
        except TypeError:
            self.stats.by_identity += 1
            return Identity(value)
        # Avals, tree definitions, shardings, meshes, dtypes' scalar types, functions:
        # JAX compares these by value where that is meaningful, by identity otherwise
        # (held by the key, so never confused with a later object).
        return value


def _is_concrete_array(value: Any) -> bool:
    """A concrete jax.Array (a tracer is never part of a finished jaxpr)."""
    return (
        hasattr(value, "__array__")
        and hasattr(value, "dtype")
        and hasattr(value, "shape")
        and not isinstance(value, type)
        and not isinstance(value, getattr(jax_core, "Tracer", ()))
    )


def traced_key(traced: Any, leaves: Any, stats: KeyStats | None = None) -> tuple[Any, ...] | None:
    """The key of a `jax.jit(...).trace(...)` result: its program, options and arguments.

    Covers the jitted function's jaxpr, its jit parameters (compiler options,
    shardings, donation), each argument's type and placement, and the pytree
    structure of arguments and results. None when the traced program takes hidden
    constants as arguments (traced under another transformation): not cacheable.
    """
    if getattr(traced, "_consts", None):
        return None
    canon = _Canon(stats or KeyStats())
    params = getattr(traced, "_params", None)
    body = (
        canon.params(params)
        if isinstance(params, dict) and "jaxpr" in params
        else canon.jaxpr(traced.jaxpr)
    )
    metas = getattr(traced, "_meta_tys_flat", None)
    arguments = (
        canon.value(tuple(metas))
        if metas is not None
        else tuple(
            (type(x).__name__, getattr(x, "sharding", None), getattr(x, "committed", None))
            for x in leaves
        )
    )
    return (
        body,
        arguments,
        getattr(traced, "in_tree", None) or getattr(traced, "_in_tree", None),
        getattr(traced, "out_tree", None),
    )
