"""Which TPU Pallas is on: a chosen chip answers every lookup, while tracing and lowering.

Pallas asks which TPU it runs on in many places: while tracing (`pltpu.emit_pipeline`
tiles its copies per generation, `pltpu.create_tensorcore_mesh` counts the cores) and
while lowering (`jnp.sign`, matmul dtypes per generation, SparseCore kernels ...). All
of them go through a few functions of `tpu_info` (`jax/_src/tpu_info.py` on newer JAX,
`jax/_src/pallas/mosaic/tpu_info.py` before, which then forwards to it):
`get_device_kind`, `get_num_device_cores` and the cached `get_tpu_info` built on them.
They read the context's abstract mesh, else the default device ("cpu" here).

An abstract mesh alone cannot answer them all: lowering enters each equation's own
context, whose mesh is the one of its trace (none, for a kernel traced earlier). So
those functions are wrapped once, wherever JAX's modules hold them: inside
`chip_scope(...)` they answer for the chosen chip; outside, they are JAX's own. The
chosen chip is a piece of JAX's trace context (and jit key), like a config option:
what JAX caches per trace (a kernel body's jaxpr, `get_tpu_info`) is kept per chip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax

from pallaslab._src.core.jax_adapter import probes
from pallaslab._src.core.jax_adapter.probes import trace_state
from pallaslab._src.records import hardware

# TensorCores per device as libtpu's compile-only topology reports them (a 7x device is
# one TensorCore of its chip's two).
_TPU_DEVICE_CORES = {"v4": 1, "v5e": 1, "v5p": 2, "v6e": 1, "7x": 1}
# TPU generations pallaslab targets -> (device kind Pallas knows the chip by, from the
# hardware table; TensorCores per device).
TPU_DEVICE_KINDS: dict[str, tuple[str, int]] = {
    name: (hardware.TPUS[name].device_kind, cores) for name, cores in _TPU_DEVICE_CORES.items()
}

# The modules defining the chip lookups, newest first; a JAX has one or both (the
# older one then forwards).
_INFO_MODULES = ("jax._src.tpu_info", "jax._src.pallas.mosaic.tpu_info")
# Pallas' TPU core module: `create_tensorcore_mesh` asks for the core count.
_MOSAIC_CORE = "jax._src.pallas.mosaic.core"


@dataclasses.dataclass(frozen=True)
class _Chip:
    generation: str
    device_kind: str
    cores: int
    # A fallback answers only when nothing else does: no TPU at hand and no abstract
    # device in the context (the user's own choice wins).
    fallback: bool


_install_lock = threading.Lock()
_installed: list[str] = []


# The chosen chip (a `_Chip`, or None): part of JAX's trace context and jit key.
_STATE = trace_state("pallaslab_tpu_chip", None)


def _info_module() -> Any:
    """The module that defines the lookups (the one their globals name)."""
    for name in _INFO_MODULES:
        module = probes.optional_module(name)
        if module is not None and hasattr(module, "get_device_kind"):
            return sys.modules[module.get_device_kind.__module__]
    return None


def known_device_kind(device_kind: str) -> bool:
    """Whether this JAX's Pallas knows a TPU by this device kind."""
    module = _info_module()
    lookup = getattr(module, "chip_version_from_device_kind", None)
    return lookup is not None and lookup(device_kind) is not None


def chip_known(generation: str) -> bool:
    """Whether this JAX's Pallas knows the chip (one of `TPU_DEVICE_KINDS`)."""
    return generation in TPU_DEVICE_KINDS and known_device_kind(TPU_DEVICE_KINDS[generation][0])


def _context_device() -> Any:
    """The abstract device of the context's abstract mesh, if any."""
    mesh = jax.sharding.get_abstract_mesh()
    return getattr(mesh, "abstract_device", None)


def _answering() -> _Chip | None:
    """The chip that answers now, or None to leave the question to JAX."""
    chip: _Chip | None = _STATE.value if _STATE is not None else None
    if chip is None or not chip.fallback:
        return chip
    device = _context_device()
    if device is not None and getattr(device, "platform", "tpu") == "tpu":
        return None
    return chip


def _wrap_lookup(original: Callable[[], Any], answer: Callable[[_Chip], Any]) -> Callable[[], Any]:
    """`original` (a lookup taking no arguments), answered by the chip when one answers."""

    @functools.wraps(original)
    def lookup() -> Any:
        chip = _answering()
        return answer(chip) if chip is not None else original()

    return lookup


def _device_kind(chip: _Chip) -> str:
    return chip.device_kind


def _cores(chip: _Chip) -> int:
    return chip.cores


def _wrap_is_tpu(original: Callable[[], bool]) -> Callable[[], bool]:
    @functools.wraps(original)
    def is_tpu_device() -> bool:
        # "Am I on a TPU?" is answered truthfully while tracing or running off a TPU
        # (code that picks interpret mode by it keeps working); a target chip is one.
        chip = _answering()
        if chip is None:
            return original()
        if not chip.fallback:
            return True
        previous = _STATE.swap_local(None)  # JAX's own answer: the device at hand
        try:
            return original()
        finally:
            _STATE.set_local(previous)

    return is_tpu_device


def _wrap_mesh(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def create_tensorcore_mesh(
        axis_name: str, devices: Any = None, num_cores: int | None = None
    ) -> Any:
        chip = _answering()
        if chip is None or devices is not None or num_cores is not None:
            return original(axis_name, devices, num_cores)
        # Pallas counts the cores of the context's abstract device: name the chip's.
        with jax.sharding.use_abstract_mesh(_abstract_mesh(chip)):
            return original(axis_name, devices, num_cores)

    return create_tensorcore_mesh


def _abstract_mesh(chip: _Chip) -> Any:
    device = jax.sharding.AbstractDevice(
        device_kind=chip.device_kind, num_cores=chip.cores, platform="tpu"
    )
    # Auto axes: a context mesh that changes no sharding of what runs under it.
    return jax.sharding.AbstractMesh(
        (1,), ("_pallaslab",), (jax.sharding.AxisType.Auto,), abstract_device=device
    )


def rebind(original: Any, replacement: Any) -> None:
    """Puts `replacement` wherever JAX holds `original`.

    Module attributes (aliases such as `pltpu.is_tpu_device` included), deprecated
    names served from a module's `_deprecations` table, and the default factories
    that dataclass constructors close over (`TensorCoreMesh(num_cores=...)`).
    """
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "jax" or name.startswith("jax.")):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attribute, value in list(namespace.items()):
            if value is original:
                setattr(module, attribute, replacement)
            elif isinstance(value, type) and value.__module__ == name:
                _rebind_closure(getattr(value, "__init__", None), original, replacement)
        deprecations = namespace.get("_deprecations")
        if isinstance(deprecations, dict):
            for key, entry in list(deprecations.items()):
                if isinstance(entry, tuple) and any(item is original for item in entry):
                    deprecations[key] = tuple(
                        replacement if item is original else item for item in entry
                    )


def _rebind_closure(function: Any, original: Any, replacement: Any) -> None:
    for cell in getattr(function, "__closure__", None) or ():
        try:
            if cell.cell_contents is original:
                cell.cell_contents = replacement
        except ValueError:  # an empty cell
            continue


def install() -> list[str]:
    """Wraps JAX's chip lookups (once); returns the names of those wrapped.

    Importing Pallas' TPU modules first makes every alias of the lookups (such as
    `pltpu.get_tpu_info`) visible, so that all of them are wrapped.
    """
    with _install_lock:
        if _installed:
            return list(_installed)
        for name in ("jax.experimental.pallas.tpu", _MOSAIC_CORE, *_INFO_MODULES):
            probes.optional_module(name)
        module = _info_module()
        if module is None:  # pragma: no cover - a JAX without Pallas TPU
            return []
        wrappers: dict[str, Callable[[Any], Any]] = {
            "get_device_kind": lambda f: _wrap_lookup(f, _device_kind),
            "get_num_device_cores": lambda f: _wrap_lookup(f, _cores),
            "is_tpu_device": _wrap_is_tpu,
        }
        for name, wrap in wrappers.items():
            original = getattr(module, name, None)
            if callable(original):
                rebind(original, wrap(original))
                _installed.append(name)
        mesh_module = probes.optional_module(_MOSAIC_CORE)
        default_cores = getattr(mesh_module, "_get_default_num_cores", None)
        create_mesh = getattr(mesh_module, "create_tensorcore_mesh", None)
        if callable(default_cores):  # newer JAX: one lookup, also for TensorCoreMesh(...)
            rebind(default_cores, _wrap_lookup(default_cores, _cores))
            _installed.append("_get_default_num_cores")
        elif callable(create_mesh):  # jax 0.10: the lookup is inline
            rebind(create_mesh, _wrap_mesh(create_mesh))
            _installed.append("create_tensorcore_mesh")
        return list(_installed)


@contextlib.contextmanager
def chip_scope(generation: str, *, fallback: bool = False) -> Iterator[None]:
    """Within the block, Pallas traces and lowers for TPU as if on this chip.

    Args:
        generation: One of `TPU_DEVICE_KINDS` ("v5e", "v4" ...).
        fallback: Answer only where nothing else does: not on a TPU, and not where the
            code set an abstract TPU device of its own. Without it (lowering for a
            target), the chip answers every lookup.
    """
    device_kind, cores = TPU_DEVICE_KINDS[generation]
    install()
    if fallback and jax.default_backend() == "tpu":
        yield  # the TPU at hand answers for itself
        return
    if _STATE is None:  # pragma: no cover - depends on the JAX version
        yield
        return
    previous = _STATE.swap_local(_Chip(generation, device_kind, cores, fallback))
    try:
        yield
    finally:
        _STATE.set_local(previous)


def asks_for_a_tpu(error: BaseException) -> bool:
    """Whether `error` is Pallas failing to learn which TPU it is on (no TPU at hand)."""
    seen: BaseException | None = error
    for _ in range(8):  # the error itself, then what it was raised from
        if seen is None:
            return False
        if "Unsupported TPU device kind" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
