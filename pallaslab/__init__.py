"""pallaslab: trace, lower, map and check JAX Pallas kernels, in Jupyter and in scripts.

In a notebook: `%load_ext pallaslab`, then a `%%kernel` cell. In Python, one style
per verb:

- Functions take a callable and its arguments: `pallaslab.inspect(fn, *args)`,
  `check(fn, ref, *args)`, `bench(fn, make_args, sizes, ref=...)`,
  `tune(build, space, *args)` (also on a Ray cluster: `cluster=`, `Cluster`),
  `measure(fn, *args)`, `emulate(fn)`,
  `hints(fn, *args)`; `diff(a, b)` compares two inspections.
- Methods act on an inspection (what `inspect` returns): `.run()`, `.check(ref)`,
  `.lower("ptx:sm_90")` (any of `targets()`), `.tiles()`, `.merit()`,
  `.accesses()`, `.races()`, `.hints()`, `.reproducer(path)`.
- Records are plain data (`pallaslab.types`); their own derivations are methods
  (`tiles.read_counts(0)`, `merit.on_chip("H100")`, `check.bad_tiles`).

`draw_tiles` / `save_tiles` picture a tile map; compiled programs are cached by
content (`compile_cache_info()`, `use_persistent_cache()`); `exercise("04.k_loop",
matmul)` checks an exercise of the course (`notebooks/`; its types: `pallaslab.course`).

Importing pallaslab loads none of this: each name is imported on first use.
"""

import importlib as _importlib
import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from pallaslab._src.base import display as _display
from pallaslab._src.base import sources as _sources
from pallaslab._src.base.version import __version__ as __version__
from pallaslab._src.bench import live as _live

if _TYPE_CHECKING:
    from pallaslab import course as course
    from pallaslab import types as types
    from pallaslab._src.api import draw_tiles as draw_tiles
    from pallaslab._src.api import hints as hints
    from pallaslab._src.api import save_tiles as save_tiles
    from pallaslab._src.api import settings as settings
    from pallaslab._src.bench.cluster.spec import Cluster as Cluster
    from pallaslab._src.bench.harness import TimerSettings as TimerSettings
    from pallaslab._src.bench.harness import measure as measure
    from pallaslab._src.bench.sweep import bench as bench
    from pallaslab._src.bench.tune import tune as tune
    from pallaslab._src.core.compile_cache import clear_compile_cache as clear_compile_cache
    from pallaslab._src.core.compile_cache import compile_cache_info as compile_cache_info
    from pallaslab._src.core.compile_cache import (
        set_compile_cache_limits as set_compile_cache_limits,
    )
    from pallaslab._src.core.compile_cache import use_persistent_cache as use_persistent_cache
    from pallaslab._src.core.diffing import diff as diff
    from pallaslab._src.core.emulator import emulate as emulate
    from pallaslab._src.core.inspection import inspect as inspect
    from pallaslab._src.core.lowering.compare import compare_lowered as compare_lowered
    from pallaslab._src.core.reference import check as check
    from pallaslab._src.core.run_budget import set_run_budget as set_run_budget
    from pallaslab._src.course import exercise as exercise
    from pallaslab._src.course import exercises as exercises
    from pallaslab._src.records.targets import targets as targets

# Public name -> (module, attribute); attribute None: the module itself.
_LAZY: dict[str, tuple[str, str | None]] = {
    "inspect": ("pallaslab._src.core.inspection", "inspect"),
    "check": ("pallaslab._src.core.reference", "check"),
    "bench": ("pallaslab._src.bench.sweep", "bench"),
    "tune": ("pallaslab._src.bench.tune", "tune"),
    "measure": ("pallaslab._src.bench.harness", "measure"),
    "TimerSettings": ("pallaslab._src.bench.harness", "TimerSettings"),
    "Cluster": ("pallaslab._src.bench.cluster.spec", "Cluster"),
    "emulate": ("pallaslab._src.core.emulator", "emulate"),
    "hints": ("pallaslab._src.api", "hints"),
    "diff": ("pallaslab._src.core.diffing", "diff"),
    "targets": ("pallaslab._src.records.targets", "targets"),
    "compare_lowered": ("pallaslab._src.core.lowering.compare", "compare_lowered"),
    "draw_tiles": ("pallaslab._src.api", "draw_tiles"),
    "save_tiles": ("pallaslab._src.api", "save_tiles"),
    "compile_cache_info": ("pallaslab._src.core.compile_cache", "compile_cache_info"),
    "clear_compile_cache": ("pallaslab._src.core.compile_cache", "clear_compile_cache"),
    "set_compile_cache_limits": ("pallaslab._src.core.compile_cache", "set_compile_cache_limits"),
    "use_persistent_cache": ("pallaslab._src.core.compile_cache", "use_persistent_cache"),
    "set_run_budget": ("pallaslab._src.core.run_budget", "set_run_budget"),
    "settings": ("pallaslab._src.api", "settings"),
    "exercise": ("pallaslab._src.course", "exercise"),
    "exercises": ("pallaslab._src.course", "exercises"),
    "types": ("pallaslab.types", None),
    "course": ("pallaslab.course", None),
}

__all__ = [
    "Cluster",
    "TimerSettings",
    "__version__",
    "bench",
    "check",
    "clear_compile_cache",
    "compare_lowered",
    "compile_cache_info",
    "course",
    "diff",
    "draw_tiles",
    "emulate",
    "exercise",
    "exercises",
    "hints",
    "inspect",
    "load_ipython_extension",
    "measure",
    "save_tiles",
    "set_compile_cache_limits",
    "set_run_budget",
    "settings",
    "targets",
    "tune",
    "types",
    "use_persistent_cache",
]


def __getattr__(name: str) -> _Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'pallaslab' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    imported = _importlib.import_module(module)
    value = imported if attribute is None else getattr(imported, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)


def load_ipython_extension(ipython: _Any) -> None:
    """`%load_ext pallaslab`: registers `%%kernel`."""
    from pallaslab._src.magic import load  # noqa: PLC0415

    load(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension is (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "pallaslab"}]


# How records reach the screen in Jupyter: each view is imported on first display, so
# importing pallaslab stays free of widget code (and works where none is installed).


def _inspector_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.inspector import mimebundle  # noqa: PLC0415

    return mimebundle(record, **kwargs)


def _bench_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.benchview import record_bundle  # noqa: PLC0415

    return record_bundle(record, **kwargs)


def _feedback_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.feedback import bundle  # noqa: PLC0415

    return bundle(record, **kwargs)


def _diff_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.diffview import bundle  # noqa: PLC0415

    return bundle(record, **kwargs)


def _live_observer() -> _Any:
    # In a Jupyter kernel, sweeps draw a live plot widget; elsewhere, text progress.
    from pallaslab._src.views.benchview import live_observer  # noqa: PLC0415

    return live_observer()


def _cell_numbers() -> _Any:
    # Which cell each of IPython's cell files holds (its execution count), so that
    # locations read "Cell [3] line 10". Outside IPython (never imported) there are none.
    if "IPython" not in _sys.modules:
        return {}
    shell = _sys.modules["IPython"].get_ipython()
    found = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return found if isinstance(found, dict) else {}


_display.register_renderer("inspection", _inspector_bundle)
_display.register_renderer("bench", _bench_bundle)
_display.register_renderer("feedback", _feedback_bundle)
_display.register_renderer("diff", _diff_bundle)
_live.register(_live_observer)
_sources.register_cell_numbers(_cell_numbers)
