"""The script being written: names bound to values, expressions, functions with their closures.

`Script` is the writer `funcsource` offers; see the package's docstring for what it
writes and how what cannot be written is reported.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import functools
import importlib
import inspect
import keyword
import sys
import textwrap
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pallaslab._src.base import sources
from pallaslab._src.core.funcsource.literals import (
    comment,
    describe,
    display,
    float_text,
    importable_kind,
    nested_text,
    same_plain_value,
)
from pallaslab._src.core.funcsource.public_names import PublicNames
from pallaslab._src.core.funcsource.reading import (
    NotWritableError,
    decorated,
    definition_names,
    function_source,
    global_names,
    without_decorators,
)

#: Arrays up to this many elements are written as literals.
MAX_LITERAL_ELEMENTS = 4096


class _Reserved:
    """Stands for a name the script defines for itself."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"the script's own {self.name}"


class Script:
    """The definitions of a script, written as the code being written needs them.

    `bind(name, value)` makes `name` mean `value` in the script (the name code read
    from its globals must keep); `expression(value)` gives Python text evaluating to
    `value`, defining what it needs on the way. `text()` renders imports, then
    definitions in dependency order.

    Args:
        public: Where library objects are imported from.
        writers: Hooks tried first for values this module does not know (e.g. JAX
            arrays, Pallas specs): each returns Python text or None.
        aliases: The names modules get when the code did not name them itself
            ("jax.numpy": "jnp").
    """

    def __init__(
        self,
        public: PublicNames,
        writers: Sequence[Callable[[Script, Any], str | None]] = (),
        aliases: dict[str, str] | None = None,
    ) -> None:
        self.public = public
        self.writers = list(writers)
        self.aliases = dict(aliases or {})
        self.problems: list[str] = []
        self._imports: dict[str, str] = {}  # name -> import line
        self._definitions: list[str] = []
        self._bound: dict[str, Any] = {}  # script name -> object
        self._names_of: dict[int, str] = {}  # id(object) -> script name
        self._keep: list[Any] = []
        self._in_progress: set[int] = set()
        self.needs_placeholder = False

    # -- names ----------------------------------------------------------------

    def reserve(self, names: Sequence[str]) -> None:
        """Names the caller's own code defines: code reading them as globals is a problem."""
        for name in names:
            self._bound.setdefault(name, _Reserved(name))

    def taken(self, name: str) -> bool:
        """Whether the script already binds `name`."""
        return name in self._bound or name in self._imports

    def fresh(self, preferred: str) -> str:
        """An unused name like `preferred`."""
        base = preferred if preferred.isidentifier() and not keyword.iskeyword(preferred) else "v"
        name, n = base, 1
        while self.taken(name) or name in dir(builtins):
            n += 1
            name = f"{base}_{n}"
        return name

    def module(self, module_name: str, preferred: str) -> str:
        """A name bound to the module (the user's own name for it when there is one)."""
        module = importlib.import_module(module_name)
        for name, value in self._bound.items():
            if value is module:
                return name
        name = preferred if not self.taken(preferred) else self.fresh(preferred)
        self._import_module(name, module)
        return name

    def _remember(self, name: str, value: Any) -> None:
        self._bound[name] = value
        self._names_of.setdefault(id(value), name)
        self._keep.append(value)

    def _import_module(self, name: str, module: types.ModuleType) -> None:
        full = module.__name__
        parent, _, last = full.rpartition(".")
        if full == name:
            line = f"import {full}"
        elif not parent:
            line = f"import {full} as {name}"
        elif last == name:
            line = f"from {parent} import {last}"
        else:
            line = f"from {parent} import {last} as {name}"
        self._imports[name] = line
        self._remember(name, module)

    # -- binding names code reads ------------------------------------------------

    def bind(self, name: str, value: Any, reader: str = "") -> None:
        """Makes `name` mean `value` in the script (for code that reads `name`)."""
        if name in self._bound:
            if isinstance(self._bound[name], _Reserved):
                self._problem(
                    name,
                    f"{reader or 'the code'} reads a global '{name}', a name the script uses "
                    "for itself: rename it in your code",
                )
                return
            if self._bound[name] is value or same_plain_value(self._bound[name], value):
                return
            self._problem(
                name,
                f"{reader or 'the code'} reads '{name}' as {describe(value)}, but another "
                f"function read it as {describe(self._bound[name])}; the script keeps the first",
            )
            return
        if isinstance(value, types.ModuleType):
            if value.__name__.split(".")[0] == "pallaslab":
                self.placeholder(name, value, "pallaslab is not needed to run this script")
                return
            self._import_module(name, value)
            return
        found = self.public.find(value) if importable_kind(value) else None
        if found is not None:
            module, attribute = found
            line = (
                f"from {module} import {attribute}"
                if attribute == name
                else f"from {module} import {attribute} as {name}"
            )
            if module.split(".")[0] == "pallaslab":
                self.placeholder(name, value, "pallaslab is not needed to run this script")
                return
            self._imports[name] = line
            self._remember(name, value)
            return
        if isinstance(value, types.FunctionType):
            self._define_function(value, name)
            return
        wrapped = getattr(value, "__wrapped__", None)
        if isinstance(wrapped, types.FunctionType) and not isinstance(value, functools.partial):
            # A decorated function (`@jax.jit def f`): its source, decorators included,
            # makes the wrapper again.
            if decorated(wrapped):
                self._define_function(wrapped, name, wrapper=value)
            else:
                self.placeholder(
                    name, value, f"it wraps {wrapped.__qualname__} without a decorator line"
                )
            return
        try:
            text = self.expression(value)
        except NotWritableError as error:
            self.placeholder(name, value, str(error))
            return
        self._definitions.append(f"{name} = {text}")
        self._remember(name, value)

    def placeholder(self, name: str, value: Any, why: str) -> None:
        """Binds `name` to a stand-in that fails clearly when used; notes the problem."""
        self.needs_placeholder = True
        self._problem(name, f"'{name}' ({describe(value)}) could not be written: {why}")
        note = comment(f"NOT WRITTEN: {name} = {describe(value)} ({why}); define it here by hand.")
        self._definitions.append(f"{note}\n{name} = _NotWritten({name!r}, {describe(value)!r})")
        self._remember(name, value)

    def _problem(self, name: str, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)

    # -- expressions -------------------------------------------------------------

    def expression(self, value: Any) -> str:
        """Python text that evaluates to `value` in the script.

        Raises:
            NotWritableError: For a value that cannot be written.
        """
        for writer in self.writers:
            text = writer(self, value)
            if text is not None:
                return text
        if value is None or isinstance(value, (bool, int, str, bytes)):
            return repr(value)
        if isinstance(value, float):
            return float_text(value)
        if isinstance(value, complex):
            return f"complex({float_text(value.real)}, {float_text(value.imag)})"
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            cls = self.expression(type(value))
            return f"{cls}({', '.join(self.expression(v) for v in value)})"
        if isinstance(value, (tuple, list)):
            items = [self.expression(v) for v in value]
            if isinstance(value, tuple):
                return f"({items[0]},)" if len(items) == 1 else display("(", items, ")")
            return display("[", items, "]")
        if isinstance(value, dict):
            pairs = [f"{self.expression(k)}: {self.expression(v)}" for k, v in value.items()]
            return display("{", pairs, "}")
        if isinstance(value, (set, frozenset)):
            items = sorted((self.expression(v) for v in value), key=str)
            inner = "[" + ", ".join(items) + "]"
            return f"{type(value).__name__}({inner})"
        if isinstance(value, np.dtype):
            return f"{self.module('numpy', 'np')}.dtype({str(value)!r})"
        if isinstance(value, (np.ndarray, np.generic)):
            return self._array(np.asarray(value), scalar=isinstance(value, np.generic))
        if isinstance(value, types.ModuleType):
            name = value.__name__
            return self.module(name, self.aliases.get(name, name.rsplit(".", 1)[-1]))
        known = self._names_of.get(id(value))
        if known is not None and self._bound.get(known) is value:
            return known
        if isinstance(value, enum.Enum):
            found = self.public.find(value)
            if found is not None:
                return self._imported(value, found)
            return f"{self.expression(type(value))}.{value.name}"
        if isinstance(value, functools.partial):
            partial = self.module("functools", "functools")
            args = [self.expression(value.func)]
            args += [self.expression(a) for a in value.args]
            args += [f"{k}={self.expression(v)}" for k, v in value.keywords.items()]
            return f"{partial}.partial({', '.join(args)})"
        found = self.public.find(value) if importable_kind(value) else None
        if found is not None:
            return self._imported(value, found)
        if isinstance(value, types.FunctionType):
            if value.__name__ == "<lambda>" and not value.__closure__:
                source = function_source(value)
                self._bind_globals(value, source)
                return source
            return self._define_function(value, self.fresh(value.__name__))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value)
        raise NotWritableError(f"{describe(value)} has no source form")

    def _imported(self, value: Any, found: tuple[str, str]) -> str:
        module, attribute = found
        if module.split(".")[0] == "pallaslab":
            raise NotWritableError("it is pallaslab's, which the script must not need")
        alias = self.module(module, self.aliases.get(module, module.rsplit(".", 1)[-1]))
        return f"{alias}.{attribute}"

    def _array(self, array: np.ndarray, *, scalar: bool) -> str:
        if array.dtype.hasobject:
            raise NotWritableError("an array of Python objects")
        if array.size > MAX_LITERAL_ELEMENTS:
            raise NotWritableError(
                f"a {array.dtype}{list(array.shape)} array is too large to write as a "
                f"literal (over {MAX_LITERAL_ELEMENTS} elements); pass it as an input"
            )
        np_name = self.module("numpy", "np")
        dtype = str(array.dtype)
        if dtype in np.sctypeDict or dtype in ("bool", "float16", "float32", "float64"):
            dtype_text = f"{np_name}.dtype({dtype!r})"
        else:  # bfloat16, float8 ...: NumPy knows them through ml_dtypes, as JAX does
            dtype_text = f"{self.module('ml_dtypes', 'ml_dtypes')}.{dtype}"
        values = nested_text(array.astype(np.float64) if array.dtype.kind == "V" else array)
        if scalar:
            return f"{np_name}.asarray({values}, dtype={dtype_text})[()]"
        return f"{np_name}.asarray({values}, dtype={dtype_text}).reshape({tuple(array.shape)})"

    def _dataclass(self, value: Any) -> str:
        cls = type(value)
        found = self.public.find(cls)
        if found is None:
            raise NotWritableError(f"{describe(value)}: its class is not importable")
        constructor = self._imported(cls, found)
        try:
            accepted: Any = inspect.signature(cls).parameters
        except (TypeError, ValueError):
            accepted = {}
        arguments = []
        for field in dataclasses.fields(value):
            parameter = accepted.get(field.name)
            if not field.init or (accepted and parameter is None):
                continue  # not a constructor argument (a custom __init__ derives it)
            current = getattr(value, field.name)
            default = (
                parameter.default
                if parameter is not None and parameter.default is not inspect.Parameter.empty
                else field.default
            )
            if default is not dataclasses.MISSING and same_plain_value(current, default):
                continue
            arguments.append(f"{field.name}={self.expression(current)}")
        return constructor + display("(", arguments, ")")

    # -- functions ----------------------------------------------------------------

    def _define_function(self, fn: types.FunctionType, name: str, wrapper: Any = None) -> str:
        """Writes `fn` so that the script name `name` is it; returns `name`.

        With `wrapper`, `name` is what `fn`'s decorators make of it; without, the
        decorators are left out (`@functools.partial(pl.pallas_call, ...)` above a
        kernel makes a call of it, and the kernel itself is wanted).
        """
        if id(fn) in self._in_progress:  # a cycle: the name is already being defined
            return name
        self._in_progress.add(id(fn))
        self._remember(name, fn if wrapper is None else wrapper)
        try:
            source = function_source(fn)
            if wrapper is None:
                source = without_decorators(source)
        except NotWritableError as error:
            del self._bound[name]
            self._in_progress.discard(id(fn))
            self.placeholder(name, fn, str(error))
            return name
        self._bind_globals(fn, source)
        where = _where(fn)
        free = list(fn.__code__.co_freevars)
        cells = dict(zip(free, fn.__closure__ or (), strict=True))
        is_lambda = fn.__name__ == "<lambda>"
        # The name the source defines: `__name__` may be anything (set by hand, or
        # crafted), and is never pasted into the script as code.
        defined = _defined_name(source)
        if not free and (is_lambda or name == defined):
            body = f"{name} = {source}" if is_lambda else source.rstrip("\n")
            self._definitions.append(f"{comment(f'{fn.__qualname__}, from {where}')}\n{body}")
        else:
            self._definitions.append(self._factory(fn, name, source, cells, where))
        self._in_progress.discard(id(fn))
        return name

    def _factory(
        self,
        fn: types.FunctionType,
        name: str,
        source: str,
        cells: dict[str, Any],
        where: str,
    ) -> str:
        """`fn` defined inside a function taking what it closes over."""
        parameters, arguments = [], []
        inner = _defined_name(source)
        for var, cell in cells.items():
            if var == inner:
                continue  # a recursive function finds itself in the factory
            try:
                content = cell.cell_contents
            except ValueError:
                self._problem(var, f"'{var}', which {fn.__qualname__} closes over, was never set")
                content = None
            parameters.append(var)
            try:
                arguments.append(self.expression(content))
            except NotWritableError as error:
                holder = self.fresh(var)
                self.placeholder(holder, content, str(error))
                arguments.append(holder)
        maker = self.fresh(f"_make_{name.strip('_') or 'function'}")
        body = textwrap.indent(source.rstrip("\n"), "    ")
        result = inner or source
        closes = ", ".join(parameters) or "nothing"
        lines = [
            comment(f"{fn.__qualname__}, from {where}; it closes over {closes}"),
            f"def {maker}({', '.join(parameters)}):",
        ]
        lines += [body, f"    return {inner}"] if inner else [f"    return {result}"]
        lines += ["", "", f"{name} = {maker}({', '.join(arguments)})"]
        return "\n".join(lines)

    def _bind_globals(self, fn: types.FunctionType, source: str) -> None:
        """Binds every global `fn` reads (its body, decorators and defaults)."""
        namespace = fn.__globals__
        reader = fn.__qualname__
        names = global_names(fn.__code__) + definition_names(source)
        for name in dict.fromkeys(names):
            if name in namespace:
                self.bind(name, namespace[name], reader)
            elif not hasattr(builtins, name) and name not in self._bound:
                # Read but defined nowhere: an attribute name, or a NameError to come.
                continue

    # -- output -------------------------------------------------------------------

    def require(self, line: str) -> None:
        """An import the caller's own code needs (`import sys`)."""
        self._imports.setdefault(f"\0{line}", line)

    def imports(self) -> str:
        """The import lines: the standard library's, then the others."""
        lines = sorted(set(self._imports.values()), key=_import_order)
        groups = [[line for line in lines if _import_order(line)[0] == g] for g in (0, 1)]
        return "\n\n".join("\n".join(group) for group in groups if group)

    def definitions(self) -> list[str]:
        """The definitions, in the order written (each after what it needs)."""
        return list(self._definitions)


PLACEHOLDER_CLASS = '''
class _NotWritten:
    """Stands for a value pallaslab could not write into this script: using it fails."""

    def __init__(self, name, what):
        self._message = (
            f"{name} ({what}) could not be written into this reproducer; "
            "define it by hand where the script says NOT WRITTEN"
        )

    def _fail(self, *args, **kwargs):
        raise RuntimeError(self._message)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()


for _name in ("__call__", "__getitem__", "__iter__", "__len__", "__bool__", "__index__",
              "__int__", "__float__", "__array__", "__jax_array__", "__add__", "__radd__",
              "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__mod__", "__pow__", "__neg__", "__lt__", "__le__", "__gt__",
              "__ge__", "__matmul__", "__rmatmul__"):
    setattr(_NotWritten, _name, _NotWritten._fail)
'''.strip()


def _import_order(line: str) -> tuple[int, str]:
    module = line.split()[1]
    top = module.split(".")[0]
    group = 0 if top in sys.stdlib_module_names else 1
    return group, line


def _where(fn: types.FunctionType) -> str:
    code = fn.__code__
    label = sources.cell_label(code.co_filename)
    return f"{label or code.co_filename}, line {code.co_firstlineno}"


def _defined_name(source: str) -> str | None:
    """The name a function's source defines (`def NAME`); None for a lambda."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.FunctionDef | ast.AsyncFunctionDef):
        return first.name
    return None
