"""pallaslab: trace, lower, map and check JAX Pallas kernels, in Jupyter and in scripts.

In a notebook: `%load_ext pallaslab`, then a `%%kernel` cell. In Python:
`pallaslab.inspect(fn, *example_args)`, then `.lower("ptx:sm_90")` for any target in
`pallaslab.targets()`; `pallaslab.check(fn, ref, *args)`,
`pallaslab.bench(fn, make_args, sizes, ref=...)`, `pallaslab.tune(build, space, *args)`.
`pallaslab.emulate(fn)` runs every Pallas kernel in `fn` with pallaslab's fast CPU emulator.
`pallaslab.diff(a, b)` shows what changed between two inspections; `pallaslab.hints(...)`
why a kernel may be slow.
Compiled programs are cached by content (`pallaslab.compile_cache_info()`);
`pallaslab.use_persistent_cache()` keeps them on disk across sessions.
`pallaslab.exercise("04.k_loop", matmul)` checks an exercise of the course (`notebooks/`).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from pallaslab._src import diffs as _diffs
from pallaslab._src import settings as _settings
from pallaslab._src.bench import live as _live
from pallaslab._src.bench.check import CheckResult as CheckResult
from pallaslab._src.bench.check import check as check
from pallaslab._src.bench.harness import TimerSettings as TimerSettings
from pallaslab._src.bench.harness import Timing as Timing
from pallaslab._src.bench.harness import measure as measure
from pallaslab._src.core import display as _display
from pallaslab._src.core.compile_cache import CompileCacheInfo as CompileCacheInfo
from pallaslab._src.core.compile_cache import clear_compile_cache as clear_compile_cache
from pallaslab._src.core.compile_cache import compile_cache_info as compile_cache_info
from pallaslab._src.core.compile_cache import set_compile_cache_limits as set_compile_cache_limits
from pallaslab._src.core.compile_cache import use_persistent_cache as use_persistent_cache
from pallaslab._src.core.diffing import diff as diff
from pallaslab._src.core.emulator import EmulationNotice as EmulationNotice
from pallaslab._src.core.emulator import emulate as emulate
from pallaslab._src.core.hints import hints as hints
from pallaslab._src.core.inspection import Inspection as Inspection
from pallaslab._src.core.lowering.compare import LoweringComparison as LoweringComparison
from pallaslab._src.core.lowering.compare import compare_lowered as compare_lowered
from pallaslab._src.core.tracing import inspect as inspect
from pallaslab._src.course import Feedback as Feedback
from pallaslab._src.course import exercise as exercise
from pallaslab._src.course import exercises as exercises
from pallaslab._src.course import feedback as _feedback
from pallaslab._src.diffs import Diff as Diff
from pallaslab._src.geometry.merit import kernel_merit as kernel_merit
from pallaslab._src.geometry.merit import on_chip as on_chip
from pallaslab._src.geometry.tilemap import TileMap as TileMap
from pallaslab._src.indexmap import IndexMap as IndexMap
from pallaslab._src.lowered import Lowered as Lowered
from pallaslab._src.lowered import LoweringError as LoweringError
from pallaslab._src.perfhints import Hint as Hint
from pallaslab._src.records import ArraySpec as ArraySpec
from pallaslab._src.records import Comparison as Comparison
from pallaslab._src.records import CostEstimate as CostEstimate
from pallaslab._src.records import Kernel as Kernel
from pallaslab._src.records import Operand as Operand
from pallaslab._src.records import OutputSummary as OutputSummary
from pallaslab._src.records import RunResult as RunResult
from pallaslab._src.records import SourceLocation as SourceLocation
from pallaslab._src.records import TileMismatch as TileMismatch
from pallaslab._src.settings import Settings as Settings
from pallaslab._src.targets import targets as targets
from pallaslab._src.version import __version__ as __version__

if _TYPE_CHECKING:
    from pallaslab._src.bench.sweep import bench as bench
    from pallaslab._src.bench.tune import TuneResult as TuneResult
    from pallaslab._src.bench.tune import tune as tune

# Sweeps and tuning return pandas DataFrames: imported on first use, so that
# `import pallaslab` does not pay for pandas.
_LAZY = {
    "bench": ("pallaslab._src.bench.sweep", "bench"),
    "tune": ("pallaslab._src.bench.tune", "tune"),
    "TuneResult": ("pallaslab._src.bench.tune", "TuneResult"),
}


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        import importlib  # noqa: PLC0415

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pallaslab' has no attribute {name!r}")


def _inspector_bundle(record: _Any, **kwargs: _Any) -> _Any:
    # Imported on first display only: importing pallaslab stays free of widget code.
    from pallaslab._src.views.inspector import mimebundle  # noqa: PLC0415

    return mimebundle(record, **kwargs)


_display.register_renderer(_inspector_bundle)


def _live_observer() -> _Any:
    # In a Jupyter kernel, sweeps draw a live plot widget; elsewhere, text progress.
    from pallaslab._src.views.benchview import live_observer  # noqa: PLC0415

    return live_observer()


def _bench_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.benchview import record_bundle  # noqa: PLC0415

    return record_bundle(record, **kwargs)


_live.register(observer_factory=_live_observer, renderer=_bench_bundle)


def settings() -> Settings:
    """The settings from JupyterLab's settings editor (the defaults without one)."""
    return _settings.load()


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension is (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "pallaslab"}]


def _feedback_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.feedback import bundle  # noqa: PLC0415

    return bundle(record, **kwargs)


_feedback.register_renderer(_feedback_bundle)


def _diff_bundle(record: _Any, **kwargs: _Any) -> _Any:
    from pallaslab._src.views.diffview import bundle  # noqa: PLC0415

    return bundle(record, **kwargs)


_diffs.register_renderer(_diff_bundle)


def load_ipython_extension(ipython: _Any) -> None:
    """`%load_ext pallaslab`: registers `%%kernel`."""
    from pallaslab._src.magic import load  # noqa: PLC0415

    load(ipython)
