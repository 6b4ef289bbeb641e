"""Python objects written back as source, for scripts that must stand alone.

A reproducer (`core/reproducer.py`) writes a kernel as a script anyone can run with
JAX and NumPy only. This module writes the Python side of it: a function's own source
(read with `linecache`, which holds files and the notebook cells `sources` registers),
and everything the function reads from outside:

- globals: modules become imports; library objects (JAX's, NumPy's, the standard
  library's) become imports from their public module; plain data (numbers, strings,
  tuples, small NumPy arrays, dtypes) become literals; functions defined in the
  user's files or cells are written the same way, recursively;
- closures: a function that closes over values is defined inside a factory, which
  the script calls with those values (so names never clash);
- `functools.partial` objects, with their bound arguments.

What cannot be written (an object of the user's own class, a huge array ...) is bound
to a placeholder that raises a clear error when the code uses it, and listed in
`Script.problems`; the script says so in a comment where it is defined.

Plain Python and NumPy: values of other libraries are written by hooks the caller
passes (`Script(writers=...)`).
"""

from __future__ import annotations
import __future__

import ast
import builtins
import dataclasses
import dis
import enum
import functools
import importlib
import inspect
import keyword
import linecache
import math
import sys
import textwrap
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pallaslab._src.base import sources

#: Arrays up to this many elements are written as literals.
MAX_LITERAL_ELEMENTS = 4096


class NotWritableError(Exception):
    """A value that cannot be written as source (the message says why)."""


# ---------------------------------------------------------------------------
# Where library objects can be imported from.


class _Reserved:
    """Stands for a name the script defines for itself."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"the script's own {self.name}"


class PublicNames:
    """Public import paths of library objects: `jax.nn.relu` is `from jax.nn import relu`.

    Objects JAX defines in private modules (`jax._src...`) are found by scanning the
    public modules given, in order (the first name found wins).
    """

    def __init__(self, modules: Sequence[str]) -> None:
        self._modules = list(modules)
        self._table: dict[int, tuple[str, str]] | None = None
        self._keep: list[Any] = []  # the objects indexed by id stay alive

    def _build(self) -> dict[int, tuple[str, str]]:
        table: dict[int, tuple[str, str]] = {}
        for name in self._modules:
            try:
                module = importlib.import_module(name)
            except Exception:  # an optional backend this JAX lacks
                continue
            for attribute in dir(module):
                if attribute.startswith("_"):
                    continue
                try:
                    value = getattr(module, attribute)
                except Exception:
                    continue
                if isinstance(value, (int, float, str, bytes, bool)) or value is None:
                    continue  # equal small values are not one object
                if id(value) not in table:
                    table[id(value)] = (name, attribute)
                    self._keep.append(value)
        return table

    def find(self, obj: Any) -> tuple[str, str] | None:
        """(module, attribute) to import `obj` from, or None."""
        if self._table is None:
            self._table = self._build()
        found = self._table.get(id(obj))
        if found is not None:
            return found
        module_name = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if not isinstance(module_name, str) or not isinstance(qualname, str):
            return None
        if "<" in qualname or "." in qualname or module_name.startswith("__"):
            return None
        module = sys.modules.get(module_name)
        if module is None or getattr(module, qualname, None) is not obj:
            return None
        library = sources.is_library_file(getattr(module, "__file__", "") or "<builtin>")
        if not library and module_name not in sys.builtin_module_names:
            return None
        return module_name, qualname


# ---------------------------------------------------------------------------
# Reading a function's source.


def function_source(fn: types.FunctionType) -> str:
    """The source of a function: a dedented `def` (with decorators), or a lambda's text.

    Raises:
        NotWritableError: When the source is not available.
    """
    code = fn.__code__
    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        raise NotWritableError(
            f"the source of {fn.__qualname__} ({code.co_filename}) is not available"
        )
    if fn.__name__ == "<lambda>":
        return _lambda_source(fn, text)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as error:
        raise NotWritableError(
            f"the source of {fn.__qualname__} is not available ({error})"
        ) from None
    if not _compiles_to(_without_decorators(source), code):
        raise NotWritableError(
            f"the source of {fn.__qualname__} in {code.co_filename} is not the code that "
            "ran (was the file edited since it was imported?)"
        )
    return source


def _compiles_to(def_source: str, code: types.CodeType) -> bool:
    """Whether `def_source` compiles to `code` (in a function giving its free variables)."""
    free = ", ".join(code.co_freevars)
    wrapped = f"def _outer({free}):\n{textwrap.indent(def_source, '    ')}"
    flags = code.co_flags & _FUTURE_FLAGS
    try:
        outer = compile(wrapped, code.co_filename, "exec", flags=flags, dont_inherit=True)
    except SyntaxError:
        return False
    factory = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    inner = [c for c in factory.co_consts if isinstance(c, types.CodeType)]
    return any(c.co_name == code.co_name and _code_equal(c, code) for c in inner)


_FUTURE_FLAGS = functools.reduce(
    lambda flags, name: flags | getattr(__future__, name).compiler_flag,
    __future__.all_feature_names,
    0,
)


def _lambda_source(fn: types.FunctionType, text: str) -> str:
    """The text of the lambda expression that made `fn` (matched by its bytecode)."""
    code = fn.__code__
    tree = _parse_cell(text)
    if tree is None:
        raise NotWritableError(f"{code.co_filename} is not valid Python")
    candidates = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
    ]
    for node in candidates:
        segment = ast.get_source_segment(text, node)
        if segment is None:
            continue
        segment = " ".join(line.strip() for line in segment.splitlines())
        if len(candidates) == 1 or _same_code(segment, code):
            return segment
    raise NotWritableError(
        f"the lambda at {code.co_filename}:{code.co_firstlineno} could not be told apart "
        "from the others on its line"
    )


def _parse_cell(text: str) -> ast.Module | None:
    """Python's structure of a file or notebook cell (magic lines read as blank)."""
    try:
        return ast.parse(text)
    except SyntaxError:
        pass
    lines = text.splitlines(keepends=True)
    blanked = "".join("\n" if line.lstrip().startswith(("%", "!")) else line for line in lines)
    try:
        return ast.parse(blanked)
    except SyntaxError:
        return None


def _same_code(lambda_text: str, code: types.CodeType) -> bool:
    try:
        compiled = compile(f"({lambda_text})", "<lambda>", "eval")
    except SyntaxError:
        return False
    inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    return inner is not None and _code_equal(inner, code)


def _code_equal(a: types.CodeType, b: types.CodeType) -> bool:
    """Whether two code objects do the same thing.

    Compared instruction by instruction, with what varies by context set aside: the
    compiler calls `module.f()` with LOAD_ATTR where `module` was imported in the
    same file and with LOAD_METHOD elsewhere, and jump offsets follow.
    """
    if (a.co_names, a.co_varnames, a.co_freevars, a.co_argcount, a.co_kwonlyargcount) != (
        b.co_names,
        b.co_varnames,
        b.co_freevars,
        b.co_argcount,
        b.co_kwonlyargcount,
    ):
        return False
    consts_a = [c for c in a.co_consts if not isinstance(c, types.CodeType)]
    consts_b = [c for c in b.co_consts if not isinstance(c, types.CodeType)]
    nested_a = [c for c in a.co_consts if isinstance(c, types.CodeType)]
    nested_b = [c for c in b.co_consts if isinstance(c, types.CodeType)]
    return (
        _same_values(consts_a, consts_b)
        and _instructions(a) == _instructions(b)
        and len(nested_a) == len(nested_b)
        and all(_code_equal(x, y) for x, y in zip(nested_a, nested_b, strict=True))
    )


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def _instructions(code: types.CodeType) -> list[tuple[str, Any]]:
    found = []
    for instruction in dis.get_instructions(code):
        name = instruction.opname
        # PUSH_NULL is call bookkeeping that varies with the compile context, as
        # LOAD_METHOD does: `mod.f(...)(...)` pushes it where `mod` is imported alike.
        if name in ("CACHE", "NOP", "EXTENDED_ARG", "PUSH_NULL"):
            continue
        if name == "LOAD_METHOD":
            name = "LOAD_ATTR"
        argument = instruction.argval
        if instruction.opcode in _JUMPS or isinstance(argument, types.CodeType):
            argument = None
        found.append((name, argument if _hashable(argument) else repr(argument)))
    return found


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _same_values(a: list[Any], b: list[Any]) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def global_names(code: types.CodeType) -> list[str]:
    """Names the code (and code nested in it) reads as globals, in first-use order."""
    found: dict[str, None] = {}

    def walk(c: types.CodeType) -> None:
        for instruction in dis.get_instructions(c):
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL"):
                found.setdefault(str(instruction.argval))
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    walk(code)
    return list(found)


def _definition_names(source: str) -> list[str]:
    """Names a `def`'s decorators and default values read (evaluated at definition)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    parts: list[ast.AST] = [*node.decorator_list, *node.args.defaults]
    parts += [d for d in node.args.kw_defaults if d is not None]
    names: dict[str, None] = {}
    for part in parts:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                names.setdefault(sub.id)
    return list(names)


# ---------------------------------------------------------------------------
# The script being written.


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
            if self._bound[name] is value or _same_plain_value(self._bound[name], value):
                return
            self._problem(
                name,
                f"{reader or 'the code'} reads '{name}' as {_describe(value)}, but another "
                f"function read it as {_describe(self._bound[name])}; the script keeps the first",
            )
            return
        if isinstance(value, types.ModuleType):
            if value.__name__.split(".")[0] == "pallaslab":
                self.placeholder(name, value, "pallaslab is not needed to run this script")
                return
            self._import_module(name, value)
            return
        found = self.public.find(value) if _importable_kind(value) else None
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
            if _decorated(wrapped):
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
        self._problem(name, f"'{name}' ({_describe(value)}) could not be written: {why}")
        note = _comment(
            f"NOT WRITTEN: {name} = {_describe(value)} ({why}); define it here by hand."
        )
        self._definitions.append(f"{note}\n{name} = _NotWritten({name!r}, {_describe(value)!r})")
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
            return _float_text(value)
        if isinstance(value, complex):
            return f"complex({_float_text(value.real)}, {_float_text(value.imag)})"
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            cls = self.expression(type(value))
            return f"{cls}({', '.join(self.expression(v) for v in value)})"
        if isinstance(value, (tuple, list)):
            items = [self.expression(v) for v in value]
            if isinstance(value, tuple):
                return f"({items[0]},)" if len(items) == 1 else _items("(", items, ")")
            return _items("[", items, "]")
        if isinstance(value, dict):
            pairs = [f"{self.expression(k)}: {self.expression(v)}" for k, v in value.items()]
            return _items("{", pairs, "}")
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
        found = self.public.find(value) if _importable_kind(value) else None
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
        raise NotWritableError(f"{_describe(value)} has no source form")

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
        values = _nested_text(array.astype(np.float64) if array.dtype.kind == "V" else array)
        if scalar:
            return f"{np_name}.asarray({values}, dtype={dtype_text})[()]"
        return f"{np_name}.asarray({values}, dtype={dtype_text}).reshape({tuple(array.shape)})"

    def _dataclass(self, value: Any) -> str:
        cls = type(value)
        found = self.public.find(cls)
        if found is None:
            raise NotWritableError(f"{_describe(value)}: its class is not importable")
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
            if default is not dataclasses.MISSING and _same_plain_value(current, default):
                continue
            arguments.append(f"{field.name}={self.expression(current)}")
        return constructor + _items("(", arguments, ")")

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
                source = _without_decorators(source)
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
        if not free and (is_lambda or name == fn.__name__):
            body = f"{name} = {source}" if is_lambda else source.rstrip("\n")
            self._definitions.append(f"{_comment(f'{fn.__qualname__}, from {where}')}\n{body}")
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
        for var, cell in cells.items():
            if var == fn.__name__:
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
        inner = fn.__name__ if fn.__name__ != "<lambda>" else None
        body = textwrap.indent(source.rstrip("\n"), "    ")
        result = inner or source
        closes = ", ".join(parameters) or "nothing"
        lines = [
            _comment(f"{fn.__qualname__}, from {where}; it closes over {closes}"),
            f"def {maker}({', '.join(parameters)}):",
        ]
        lines += [body, f"    return {inner}"] if inner else [f"    return {result}"]
        lines += ["", "", f"{name} = {maker}({', '.join(arguments)})"]
        return "\n".join(lines)

    def _bind_globals(self, fn: types.FunctionType, source: str) -> None:
        """Binds every global `fn` reads (its body, decorators and defaults)."""
        namespace = fn.__globals__
        reader = fn.__qualname__
        names = global_names(fn.__code__) + _definition_names(source)
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


def _comment(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 86, initial_indent="# ", subsequent_indent="# "))


def _items(opening: str, items: list[str], closing: str, width: int = 72) -> str:
    """A display of items: on one line when short, else one item per line."""
    flat = f"{opening}{', '.join(items)}{closing}"
    if len(flat) <= width and "\n" not in flat:
        return flat
    body = "".join(textwrap.indent(item, "    ") + ",\n" for item in items)
    return f"{opening}\n{body}{closing}"


def _without_decorators(source: str) -> str:
    """A `def` without the decorator lines above it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.decorator_list:
        return source
    return "".join(source.splitlines(keepends=True)[node.lineno - 1 :])


def _decorated(fn: types.FunctionType) -> bool:
    try:
        return function_source(fn).lstrip().startswith("@")
    except NotWritableError:
        return False


def _import_order(line: str) -> tuple[int, str]:
    module = line.split()[1]
    top = module.split(".")[0]
    group = 0 if top in sys.stdlib_module_names else 1
    return group, line


def _importable_kind(value: Any) -> bool:
    """Objects worth looking up as library exports (not plain data)."""
    return not isinstance(value, (bool, int, float, complex, str, bytes, tuple, list, dict))


def _same_plain_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(
            type(a) is type(b) and isinstance(a, (int, float, str, bytes, tuple)) and a == b
        )
    except Exception:
        return False


def _float_text(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(value)


def _nested_text(array: np.ndarray) -> str:
    """A nested list literal of the array's values, exact (floats round-trip)."""
    if array.dtype.kind == "b":
        return repr(array.tolist())
    if array.dtype.kind in "iu":
        return repr(array.tolist())
    if array.dtype.kind == "c":
        return _listed(array, lambda v: f"complex({_float_text(v.real)}, {_float_text(v.imag)})")
    return _listed(array.astype(np.float64), lambda v: _float_text(float(v)))


def _listed(array: np.ndarray, item: Callable[[Any], str]) -> str:
    if array.ndim == 0:
        return item(array[()])
    return "[" + ", ".join(_listed(sub, item) for sub in array) + "]"


def _describe(value: Any) -> str:
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


def _where(fn: types.FunctionType) -> str:
    code = fn.__code__
    label = sources.cell_label(code.co_filename)
    return f"{label or code.co_filename}, line {code.co_firstlineno}"
