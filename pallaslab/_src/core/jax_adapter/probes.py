"""Guarded imports of JAX internals, and which adapter features they enable."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import jax

__all__ = [
    "CALL_PRIMITIVES",
    "FEATURES",
    "MESH_KERNELS",
    "PACKAGE_DIR",
    "PALLAS_CALL",
    "feature_notice",
    "jax_core",
    "mlir_module",
    "optional_module",
    "pallas_call_module",
    "source_info_util",
    "state_indexing",
    "trace_state",
    "tree_util",
    "triton_deprecation",
]

# Private modules, imported defensively: each missing one disables one feature.
try:
    from jax._src import core as jax_core
    from jax._src import source_info_util
except ImportError as err:  # pragma: no cover - jax without these cannot trace Pallas
    raise ImportError(f"pallaslab needs jax._src.core ({err})") from err

try:
    from jax._src.pallas import pallas_call as pallas_call_module
except ImportError:  # pragma: no cover
    pallas_call_module = None  # type: ignore[assignment]

try:
    from jax._src.interpreters import mlir as mlir_module
except ImportError:  # pragma: no cover
    mlir_module = None  # type: ignore[assignment]

try:
    from jax._src import tree_util
    from jax._src.state import indexing as state_indexing
except ImportError:  # pragma: no cover
    tree_util = None  # type: ignore[assignment]
    state_indexing = None  # type: ignore[assignment]

# pallaslab's own frames are not the user's: keep them out of source locations.
PACKAGE_DIR = str(Path(__file__).resolve().parents[3]) + "/"
if hasattr(source_info_util, "register_exclusion"):
    source_info_util.register_exclusion(PACKAGE_DIR)

# Primitive names (probed by name so a renamed module does not break discovery).
PALLAS_CALL = "pallas_call"
# `plgpu.kernel` binds `mpmd_map` in jax 0.10; `pl.core_map` binds `core_map`.
MESH_KERNELS = frozenset({"mpmd_map", "core_map"})
# Call-like primitives: one body whose inputs and results are the equation's, one to
# one, so analyses follow values straight into the body. `eval_jaxpr` replaces
# `closed_call` / `call` on JAX's main branch (after 0.11.0); `jax.checkpoint` binds
# `remat2` (0.10 and 0.11), `checkpoint` / `remat` in older JAX.
CALL_PRIMITIVES = frozenset(
    {
        "pjit",
        "jit",
        "closed_call",
        "core_call",
        "call",
        "eval_jaxpr",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "remat2",
        "remat",
        "checkpoint",
    }
)


def optional_module(name: str, attribute: str = "") -> Any:
    """A private module (or one of its attributes), or None where this JAX lacks it."""
    try:
        module = importlib.import_module(name)
    except ImportError:  # pragma: no cover - depends on the JAX version
        return None
    return getattr(module, attribute, None) if attribute else module


def trace_state(name: str, default: Any) -> Any:
    """A state of pallaslab's own in JAX's trace context and jit key (None if JAX lacks them).

    Like a JAX config option: what JAX caches per trace (jitted functions, kernel
    bodies) is kept apart per value. `.value`, `.swap_local(v)`, `.set_local(v)`.
    """
    try:
        from jax._src import config  # noqa: PLC0415 - probed
    except ImportError:  # pragma: no cover
        return None
    make = getattr(getattr(config, "config_ext", None), "Config", None)
    if make is None:  # pragma: no cover - depends on the JAX version
        return None
    return make(name, default, include_in_jit_key=True, include_in_trace_context=True)


def _feature(name: str, available: bool, why: str) -> tuple[str, bool, str]:
    return name, available, why


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is missing
        return False


FEATURES: dict[str, tuple[bool, str]] = {
    name: (ok, why)
    for name, ok, why in (
        _feature(
            "cpu-interpret",
            pallas_call_module is not None
            and mlir_module is not None
            and hasattr(pallas_call_module, "_pallas_call_lowering"),
            "jax._src.pallas.pallas_call._pallas_call_lowering not found",
        ),
        _feature(
            "element-accesses",
            state_indexing is not None
            and hasattr(state_indexing, "NDIndexer")
            and hasattr(state_indexing, "Slice")
            and tree_util is not None,
            "jax._src.state.indexing.NDIndexer / Slice not found",
        ),
        # Pallas' Triton backend: deprecated from jax 0.11 for Mosaic GPU, to be removed.
        _feature(
            "triton-lowering",
            _module_exists("jax._src.pallas.triton.pallas_call_registration")
            and _module_exists("jax._src.lib.triton"),
            "Pallas' Triton backend (jax._src.pallas.triton) is not in it; JAX deprecated "
            "it in 0.11 for Mosaic GPU",
        ),
        _feature(
            "record-kernels",
            pallas_call_module is not None and hasattr(pallas_call_module, "pallas_call_p"),
            "jax._src.pallas.pallas_call.pallas_call_p not found",
        ),
    )
}


def mosaic_gpu_pallas_call_notice() -> str:
    """One sentence when this JAX cannot lower a `pallas_call` with Mosaic GPU ("" when it can).

    From jax 0.12, `pallas_call` lowers for GPUs through a rule per compiler-params
    type, and Mosaic GPU registers none: its kernels are `plgpu.kernel` / `pl.kernel`.
    """
    try:
        from jax._src.pallas import core as pallas_core  # noqa: PLC0415 - probed
    except ImportError:  # pragma: no cover
        return ""
    get_rule = getattr(pallas_core, "get_lowering_rule", None)
    if get_rule is None:  # older JAX: one GPU lowering that switches on the params
        return ""
    try:
        importlib.import_module("jax._src.pallas.mosaic_gpu.pallas_call_registration")
        from jax._src.pallas.mosaic_gpu import core as mosaic_gpu_core  # noqa: PLC0415

        rule = get_rule(mosaic_gpu_core.CompilerParams, "gpu")
    except Exception:
        rule = None
    if rule is not None:
        return ""
    return (
        f"jax {jax.__version__} lowers a pallas_call for GPUs with Pallas' Triton backend "
        "only: Mosaic GPU kernels are written with plgpu.kernel (or pl.kernel on a "
        "plgpu.Mesh), whose lowering this target shows."
    )


def triton_deprecation() -> str:
    """One sentence when this JAX deprecates Pallas' Triton backend ("" when it does not).

    JAX registers the deprecation (`jax-pallas-triton`, from 0.11) and warns when a
    Triton kernel lowers; pallaslab says so as a kernel is inspected.
    """
    try:
        from jax._src import deprecations  # noqa: PLC0415 - probed
    except ImportError:  # pragma: no cover
        return ""
    registered = getattr(deprecations, "_registered_deprecations", {})
    if "jax-pallas-triton" not in registered:
        return ""
    return (
        f"Pallas' Triton backend (pltriton.CompilerParams) is deprecated in jax "
        f"{jax.__version__} and will be removed."
    )


def feature_notice(name: str) -> str | None:
    """A one-line notice when an adapter feature is unavailable, else None."""
    ok, why = FEATURES.get(name, (False, "unknown feature"))
    if ok:
        return None
    return f"{name} is unavailable with jax {jax.__version__}: {why}"
