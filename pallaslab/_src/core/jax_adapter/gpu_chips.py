"""Which GPU a kernel is traced for: a chosen chip answers the device queries kernels make.

GPU kernels ask the device while they are traced: the SM count for a persistent grid
(`jax.devices()[0].core_count`, `jax.extend.backend.get_default_device().core_count`,
or the context's abstract device first, as JAX's Hopper matmul does), the compute
capability (Mosaic GPU's `_infer_arch`, which layouts, `emit_pipeline` and `plgpu`'s
helpers read; `jax.experimental.mosaic.gpu.core` up to 0.11, `.utils` after), the
device kind. Off a GPU nothing knows: a CPU device has no `core_count`.

Inside `gpu_chip_scope(chip)` every one of them answers as the chip, from the hardware
table (`records/hardware.py`): the context's abstract mesh carries an abstract device of
the chip (what JAX's own Mosaic GPU interpreter tests trace under), `_infer_arch`
returns its compute capability, and `jax.devices()`, `jax.local_devices()` and
`jax.extend.backend.get_default_device()`, asked by kernel code (not by JAX's or
pallaslab's internals, which place arrays on the real devices), return stand-ins of
the chip's device. Like the TPU chip (`chips.py`), the chosen GPU is a piece of JAX's
trace context, so what JAX caches per trace is kept per chip.

`gpu_chip_scope(chip, watch=True)` answers nothing but notes whether kernel code asked
one of those queries: a program traced on a CPU is traced again for the chip when it
asked and turns out to hold GPU kernels (`core/tracing.py`).
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

from pallaslab._src.core.jax_adapter import chips, probes
from pallaslab._src.core.jax_adapter.probes import trace_state
from pallaslab._src.records import hardware

# Mosaic GPU's architecture query, where each JAX defines it (the others then call it).
_ARCH_MODULES = ("jax.experimental.mosaic.gpu.utils", "jax.experimental.mosaic.gpu.core")
# Callers whose device queries are about the real devices (placement, caches).
_INTERNAL = ("jax._src.", "jaxlib.", "pallaslab.", "jax.experimental.mosaic.gpu.")


@dataclasses.dataclass(frozen=True)
class GpuChip:
    """The GPU device queries answer for.

    Attributes:
        name: The hardware table's name ("H100").
        device_kind: What its devices report ("NVIDIA H100 80GB HBM3").
        sms: Streaming multiprocessors (`core_count`).
        compute_capability: (major, minor).
    """

    name: str
    device_kind: str
    sms: int
    compute_capability: tuple[int, int]

    @classmethod
    def named(cls, name: str) -> GpuChip:
        """The chip of the hardware table called `name` ("H100", "B200", "sm_100").

        Raises:
            KeyError: Naming the table's GPUs, for a GPU it does not have.
        """
        gpu = hardware.gpu(name)
        return cls(gpu.name, gpu.device_kind, gpu.sms, gpu.compute_capability)


class ChipDevice:
    """A stand-in for one device of a GPU that is not here, answering what kernels ask.

    It reports what a real device of the chip reports (`platform`, `device_kind`,
    `core_count`, `compute_capability`, `id`); arrays cannot be placed on it.
    """

    def __init__(self, chip: GpuChip, index: int = 0) -> None:
        self.chip = chip
        self.platform = "gpu"
        self.device_kind = chip.device_kind
        self.core_count = chip.sms
        self.compute_capability = "{}.{}".format(*chip.compute_capability)
        self.id = index
        self.process_index = 0
        self.host_id = 0
        self.local_hardware_id = index

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"{name!r}: this is pallaslab's stand-in for an {self.chip.name} ({self.device_kind}), "
            "the GPU the kernel is traced for on a machine without one; it answers platform, "
            "device_kind, core_count, compute_capability and id, and holds no arrays"
        )

    def __repr__(self) -> str:
        return f"ChipDevice(id={self.id}, {self.device_kind!r}, traced for; no GPU here)"


@dataclasses.dataclass
class GpuWatch:
    """What kernel code asked of the device while a scope watched (see the module's doc).

    Attributes:
        asked: The queries asked ("jax.devices()", "get_default_device()" ...), in order.
    """

    asked: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _State:
    chip: GpuChip
    watching: bool  # JAX's own answers; the questions noted (in `_watches`)


# The watches of the scopes that watch, innermost last (per thread): what is noted is
# not part of the trace context, so a watched program compiles as an unwatched one.
_watches = threading.local()


# The chosen GPU (a `_State`, or None): part of JAX's trace context and jit key.
_STATE = trace_state("pallaslab_gpu_chip", None)
_install_lock = threading.Lock()
_installed: list[str] = []


def _state() -> _State | None:
    return _STATE.value if _STATE is not None else None


def _asked_by_kernel_code() -> bool:
    """Whether the query comes from outside JAX's and pallaslab's internals."""
    frame = sys._getframe(2)  # the wrapper's caller
    name = str(frame.f_globals.get("__name__", ""))
    return not name.startswith(_INTERNAL)


def _answering(query: str) -> GpuChip | None:
    """The chip that answers `query` now (None: JAX answers), noting it when watched."""
    state = _state()
    if state is None:
        return None
    if state.watching:
        stack = getattr(_watches, "stack", [])
        if stack:
            stack[-1].asked.append(query)
        return None
    return state.chip


def _wrap_devices(original: Callable[..., Any], query: str, position: int) -> Callable[..., Any]:
    """`jax.devices` (`backend` is argument 0) or `jax.local_devices` (argument 1)."""

    @functools.wraps(original)
    def devices(*args: Any, **kwargs: Any) -> Any:
        backend = args[position] if len(args) > position else kwargs.get("backend")
        if (backend is None or backend in ("gpu", "cuda")) and _asked_by_kernel_code():
            chip = _answering(query)
            if chip is not None:
                return [ChipDevice(chip)]
        return original(*args, **kwargs)

    return devices


def _wrap_default_device(original: Callable[[], Any]) -> Callable[[], Any]:
    @functools.wraps(original)
    def get_default_device() -> Any:
        if _asked_by_kernel_code():
            chip = _answering("jax.extend.backend.get_default_device()")
            if chip is not None:
                return ChipDevice(chip)
        return original()

    return get_default_device


def _wrap_arch(original: Callable[[], Any]) -> Callable[[], Any]:
    @functools.wraps(original)
    def infer_arch() -> Any:
        state = _state()
        if state is not None and not state.watching:
            return state.chip.compute_capability
        return original()

    return infer_arch


def install() -> list[str]:
    """Wraps the device queries (once); returns the names of those wrapped."""
    with _install_lock:
        if _installed:
            return list(_installed)
        for name in _ARCH_MODULES:
            module = probes.optional_module(name)
            original = getattr(module, "_infer_arch", None)
            if callable(original) and original.__module__ == name:
                chips.rebind(original, _wrap_arch(original))
                _installed.append(f"{name}._infer_arch")
                break
        for position, attribute in enumerate(("devices", "local_devices")):
            original = getattr(jax, attribute, None)
            if callable(original):
                # Only the public name: JAX's own modules keep the real devices.
                wrapped = _wrap_devices(original, f"jax.{attribute}()", position)
                setattr(jax, attribute, wrapped)
                _installed.append(f"jax.{attribute}")
        backend = probes.optional_module("jax.extend.backend")
        original = getattr(backend, "get_default_device", None)
        if callable(original):
            backend.get_default_device = _wrap_default_device(original)
            _installed.append("jax.extend.backend.get_default_device")
        return list(_installed)


def install_arch() -> bool:
    """Whether this JAX's Mosaic GPU has an architecture query the chip answers."""
    return any(name.endswith("._infer_arch") for name in install())


def abstract_mesh(chip: GpuChip, platform: str = "gpu") -> Any:
    """An empty abstract mesh whose abstract device is the chip (shards nothing)."""
    device = jax.sharding.AbstractDevice(
        device_kind=chip.device_kind, num_cores=chip.sms, platform=platform
    )
    return jax.sharding.AbstractMesh((), (), abstract_device=device)


@contextlib.contextmanager
def gpu_chip_scope(
    chip: GpuChip, *, watch: bool = False, platform: str = "gpu"
) -> Iterator[GpuWatch]:
    """Within the block, kernels traced (and lowered) ask their device questions of `chip`.

    Args:
        chip: The GPU that answers.
        watch: Answer nothing (JAX's own answers stand); only note in the yielded
            `GpuWatch` which queries kernel code asked.
        platform: The abstract device's platform ("cuda" while lowering for CUDA).
    """
    install()
    noted = GpuWatch()
    if _STATE is None:  # pragma: no cover - depends on the JAX version
        yield noted
        return
    previous = _STATE.swap_local(_State(chip, watch))
    stack = _watches.__dict__.setdefault("stack", [])
    stack.append(noted)
    try:
        if watch:
            yield noted
        else:
            with jax.sharding.use_abstract_mesh(abstract_mesh(chip, platform)):
                yield noted
    finally:
        stack.pop()
        _STATE.set_local(previous)


def answering_chip() -> str:
    """The GPU device queries answer for now ("" when JAX answers them)."""
    state = _state()
    return state.chip.name if state is not None and not state.watching else ""
