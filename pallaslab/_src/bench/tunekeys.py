"""What the tuning cache is keyed on: inputs, device and versions; programs; references."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import messages, version
from pallaslab._src.bench import cache as tune_cache
from pallaslab._src.bench import sweep
from pallaslab._src.bench.trial import Built
from pallaslab._src.core import programs
from pallaslab._src.core.inspection import Inspection


def file_key(built: Built, context: sweep.SweepContext) -> dict[str, Any]:
    """What a cache file is for: input shapes and dtypes, device, versions."""
    leaves = jax.tree_util.tree_leaves((built.args, built.kwargs))
    inputs = [
        [list(np.shape(leaf)), str(leaf.dtype)] if hasattr(leaf, "dtype") else _static(leaf)
        for leaf in leaves
    ]
    return {
        "inputs": inputs,
        "backend": context.plan.backend,
        "device": context.plan.device,
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "pallaslab": version.__version__,
    }


def entry_key(config: dict[str, Any], inspection: Inspection, reference: str) -> str:
    """A config's entry: its values, the program traced for it, the reference."""
    return tune_cache.digest(
        {
            "config": tune_cache.config_key(config),
            "program": programs.fingerprint(inspection),
            "reference": reference,
        }
    )


def reference_digest(ref: Any, built: Built) -> str:
    """The reference as traced on the inputs (its jaxpr), else its values."""
    if ref is None:
        return ""
    if callable(ref):
        try:
            return programs.callable_fingerprint(ref, built.args, built.kwargs)
        except Exception:  # not traceable (NumPy inside): what it returns, then
            try:
                return "values:" + programs.values_digest(ref(*built.args, **built.kwargs))
            except Exception as error:
                return "failed:" + messages.one_line(error)
    return "values:" + programs.values_digest(ref)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _static(leaf: Any) -> Any:
    return (
        leaf if isinstance(leaf, int | float | str | bool) or leaf is None else type(leaf).__name__
    )
