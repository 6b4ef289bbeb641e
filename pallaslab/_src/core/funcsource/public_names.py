"""Where library objects can be imported from: `jax.nn.relu` is `from jax.nn import relu`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from pallaslab._src.base import sources


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
