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

Modules: `script` (the `Script` writer), `reading` (a function's source and the names
it reads), `literals` (plain values as text), `public_names` (library import paths).
"""

from pallaslab._src.core.funcsource.public_names import PublicNames
from pallaslab._src.core.funcsource.reading import NotWritableError, function_source, global_names
from pallaslab._src.core.funcsource.script import MAX_LITERAL_ELEMENTS, PLACEHOLDER_CLASS, Script

__all__ = [
    "MAX_LITERAL_ELEMENTS",
    "PLACEHOLDER_CLASS",
    "NotWritableError",
    "PublicNames",
    "Script",
    "function_source",
    "global_names",
]
