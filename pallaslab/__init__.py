"""pallaslab: trace, lower, map and check JAX Pallas kernels, in Jupyter and in scripts.

In a notebook: `%load_ext pallaslab`, then a `%%kernel` cell. In Python:
`pallaslab.inspect(fn, *example_args)`.
"""

from typing import Any as _Any

from pallaslab._src import settings as _settings
from pallaslab._src.core import display as _display
from pallaslab._src.core.inspection import Inspection as Inspection
from pallaslab._src.core.tracing import inspect as inspect
from pallaslab._src.indexmap import IndexMap as IndexMap
from pallaslab._src.records import ArraySpec as ArraySpec
from pallaslab._src.records import Comparison as Comparison
from pallaslab._src.records import CostEstimate as CostEstimate
from pallaslab._src.records import Kernel as Kernel
from pallaslab._src.records import Operand as Operand
from pallaslab._src.records import OutputSummary as OutputSummary
from pallaslab._src.records import RunResult as RunResult
from pallaslab._src.records import SourceLocation as SourceLocation
from pallaslab._src.settings import Settings as Settings
from pallaslab._src.version import __version__ as __version__


def _inspector_bundle(record: _Any, **kwargs: _Any) -> _Any:
    # Imported on first display only: importing pallaslab stays free of widget code.
    from pallaslab._src.views.inspector import mimebundle  # noqa: PLC0415

    return mimebundle(record, **kwargs)


_display.register_renderer(_inspector_bundle)


def settings() -> Settings:
    """The settings from JupyterLab's settings editor (the defaults without one)."""
    return _settings.load()


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension is (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "pallaslab"}]


def load_ipython_extension(ipython: _Any) -> None:
    """`%load_ext pallaslab`: registers `%%kernel`."""
    from pallaslab._src.magic import load  # noqa: PLC0415

    load(ipython)
