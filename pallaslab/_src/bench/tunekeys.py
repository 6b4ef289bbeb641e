"""What the tuning cache is keyed on: inputs, device and versions; programs; references."""

from __future__ import annotations

import dataclasses
import importlib.metadata
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import messages, version
from pallaslab._src.bench import cache as tune_cache
from pallaslab._src.bench import roofline, sweep
from pallaslab._src.bench.trial import Built
from pallaslab._src.core import programs
from pallaslab._src.core.inspection import Inspection

#: The XLA baseline's entry in a cache file (followed by the reference's digest).
BASELINE_KEY = "__xla_baseline__"


def cached_row(stored: dict[str, dict[str, Any]], key: str) -> sweep.Row | None:
    """The stored row of an entry, marked cached; None when absent or damaged."""
    entry = stored.get(key) if key else None
    if not isinstance(entry, dict):
        return None
    try:
        return dataclasses.replace(sweep.Row.from_json(entry), cached=True)
    except Exception:  # a damaged entry is measured again
        return None


def measured_on(backend: str, device: str, chip: str = "") -> dict[str, str]:
    """Who measures: the JAX backend, its device kind, and the chip it is.

    `chip` is the hardware table's name of the chip ("H100"), found from the device
    kind when not given; a cluster's chip label stands for it on workers whose device
    does not say (a CPU standing in for a chip kind). Timings are never shared between
    two of these.
    """
    if not chip:
        found = roofline.detect_chip(device)
        chip = found.name if found is not None else ""
    return {"backend": backend, "device": device, "chip": chip}


def local_measurer(context: sweep.SweepContext) -> dict[str, str]:
    """This machine's device, as a sweep's plan names it."""
    return measured_on(context.plan.backend, context.plan.device)


def file_key(built: Built, measurer: dict[str, str]) -> dict[str, Any]:
    """What a cache file is for: input shapes and dtypes, who measures, versions."""
    leaves = jax.tree_util.tree_leaves((built.args, built.kwargs))
    inputs = [
        [list(np.shape(leaf)), str(leaf.dtype)] if hasattr(leaf, "dtype") else _static(leaf)
        for leaf in leaves
    ]
    return {
        "inputs": inputs,
        **measurer,
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
