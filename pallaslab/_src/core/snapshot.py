"""The globals a traced function read, pinned, so that a re-trace sees them as they were.

JAX traces Python: the user's function reads its globals (the kernel function, a
block size, a helper, an index map) when it is called. An inspection runs and lowers
the jaxpr it traced (`jax_adapter.replay_function`), but some work needs the function
itself traced again: lowering for another TPU chip (Pallas asks which chip it is on
while tracing), checking with inputs of other shapes or dtypes, rebuilding the
`pallas_call` for a reproducer. By then a later cell may have redefined any of those
globals. `pin(fn)`, taken when the program is traced, records the value of every
global name read by the Python functions reachable from `fn` (through closures,
defaults, `functools.partial`, wrappers' `__wrapped__`, objects such as BlockSpecs
that hold index maps, and the globals themselves); `Pins.applied()` puts those
values back into their namespaces for the time of a re-trace, and the user's own
values after it.

What is not pinned: attributes of modules and objects (`config.BLOCK`), values
mutated in place, code outside Python functions. Library functions (JAX, NumPy,
pallaslab) are followed through their closures but their own globals are theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import functools
import itertools
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from pallaslab._src.base import sources
from pallaslab._src.core import jax_adapter

# Objects visited at most while looking for functions (a closure may hold a model).
MAX_OBJECTS = 20_000
# Items of one list, tuple, set or dict looked into at most.
MAX_ITEMS = 1_000
# Instructions that read a global name.
_GLOBAL_READS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
# Where a function made by `pinned_function` keeps the pins it applies.
PINS_ATTRIBUTE = "__pallaslab_pins__"

# Plain data: nothing to follow inside.
_DATA = bool | int | float | complex | str | bytes | bytearray | range

_MISSING = object()
_lock = threading.RLock()
_tokens = itertools.count(1)


@dataclasses.dataclass(frozen=True)
class Pins:
    """Global values as a traced function read them.

    Attributes:
        entries: (namespace, ((name, value), ...)) per module namespace read.
        complete: False when the search stopped at `MAX_OBJECTS`.
        token: Tells this snapshot's re-traces apart in JAX's caches.
    """

    entries: tuple[tuple[dict[str, Any], tuple[tuple[str, Any], ...]], ...] = ()
    complete: bool = True
    token: int = dataclasses.field(default_factory=lambda: next(_tokens))

    @property
    def names(self) -> tuple[str, ...]:
        """Every pinned name (for messages and tests)."""
        return tuple(name for _, values in self.entries for name, _ in values)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Within the block, each pinned global has its pinned value; after, the user's.

        What JAX traces within is kept apart from the user's own traces (a jitted
        function of theirs is traced again here, and their next call is not served
        this trace).
        """
        with _lock, jax_adapter.snapshot_scope(self.token):
            saved: list[tuple[dict[str, Any], str, Any]] = []
            try:
                for namespace, values in self.entries:
                    for name, value in values:
                        current = namespace.get(name, _MISSING)
                        if current is value:
                            continue
                        saved.append((namespace, name, current))
                        namespace[name] = value
                yield
            finally:
                for namespace, name, value in reversed(saved):
                    if value is _MISSING:
                        namespace.pop(name, None)
                    else:
                        namespace[name] = value


def pin(root: Any) -> Pins:
    """The globals read by the functions reachable from `root`, with their values now."""
    found: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    seen: set[int] = set()
    stack: list[Any] = [root]
    visited = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or _opaque(obj):
            continue
        seen.add(id(obj))
        visited += 1
        if visited > MAX_OBJECTS:
            return _pins(found, complete=False)
        nested = getattr(obj, PINS_ATTRIBUTE, None) if callable(obj) else None
        if isinstance(nested, Pins):  # a snapshot's own function: its pins stand
            for namespace, values in nested.entries:
                entry = found.setdefault(id(namespace), (namespace, {}))[1]
                for name, value in values:
                    entry.setdefault(name, value)
            continue
        stack.extend(_referents(obj, found))
    return _pins(found, complete=True)


def pinned_function(fn: Callable[..., Any], pins: Pins) -> Callable[..., Any]:
    """`fn`, called with `pins` applied (its name and docs kept)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with pins.applied():
            return fn(*args, **kwargs)

    setattr(call, PINS_ATTRIBUTE, pins)
    return call


def _pins(found: dict[int, tuple[dict[str, Any], dict[str, Any]]], *, complete: bool) -> Pins:
    return Pins(
        entries=tuple(
            (namespace, tuple(values.items())) for namespace, values in found.values() if values
        ),
        complete=complete,
    )


def _opaque(obj: Any) -> bool:
    """Whether nothing worth following is inside `obj` (data, modules, classes)."""
    if obj is None or isinstance(obj, _DATA | types.ModuleType | type):
        return True
    # Arrays (NumPy, JAX) and shapes: data, never code.
    return hasattr(obj, "dtype") and hasattr(obj, "shape")


def _referents(obj: Any, found: dict[int, tuple[dict[str, Any], dict[str, Any]]]) -> list[Any]:
    """What to look at next from `obj`; a function's globals are recorded on the way."""
    if isinstance(obj, types.FunctionType):
        return _function_referents(obj, found)
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if isinstance(obj, types.MethodType):
        return [obj.__func__, obj.__self__]
    if isinstance(obj, list | tuple | set | frozenset):
        return list(obj)[:MAX_ITEMS]
    if isinstance(obj, dict):
        return list(obj.values())[:MAX_ITEMS]
    nexts: list[Any] = []
    attributes = _attributes(obj)
    nexts += list(attributes.values())[:MAX_ITEMS]
    call = vars(type(obj)).get("__call__")
    if isinstance(call, types.FunctionType):  # a callable object of the user's class
        nexts.append(call)
    return nexts


def _attributes(obj: Any) -> dict[str, Any]:
    """The instance attributes of `obj` (its `__dict__` and slots), read statically."""
    found: dict[str, Any] = {}
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        namespace = None
    if isinstance(namespace, dict):
        found.update(namespace)
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()) or ():
            if isinstance(slot, str) and slot not in found and not slot.startswith("__"):
                try:
                    found[slot] = object.__getattribute__(obj, slot)
                except (AttributeError, TypeError):
                    continue
    return found


def _function_referents(
    fn: types.FunctionType, found: dict[int, tuple[dict[str, Any], dict[str, Any]]]
) -> list[Any]:
    nexts: list[Any] = []
    namespace = fn.__globals__
    if not sources.is_library_file(fn.__code__.co_filename):
        values = found.setdefault(id(namespace), (namespace, {}))[1]
        for name in global_reads(fn.__code__):
            if name in namespace:
                value = namespace[name]
                values.setdefault(name, value)
                nexts.append(value)
    for cell in fn.__closure__ or ():
        try:
            nexts.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    nexts += list(fn.__defaults__ or ())
    nexts += list((fn.__kwdefaults__ or {}).values())
    nexts += list(fn.__dict__.values())  # __wrapped__, attributes set on it
    return nexts


@functools.lru_cache(maxsize=4096)
def global_reads(code: types.CodeType) -> frozenset[str]:
    """The global names a code object (and the code nested in it) reads."""
    names: set[str] = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname in _GLOBAL_READS and isinstance(instruction.argval, str):
            names.add(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_reads(const)
    return frozenset(names)
