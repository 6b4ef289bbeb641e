"""Exporting a kernel (or a program) for one GPU chip, to be compiled by XLA elsewhere.

Pallas picks code for the GPU it lowers for: Mosaic GPU asks
`jax.experimental.mosaic.gpu.core._infer_arch()` (the default device's compute
capability, else sm_90), and from JAX 0.11 the Triton lowering asks the device kind
(`jax._src.pallas.triton.gpu_info`). On a machine without a GPU neither knows the
chip, so `gpu_chip` answers for them while a function is exported; the pickled
`jax.export.Exported` then goes to a compile worker with a compile-only device of
that chip (`pallaslab._src.core.lowering.xla_gpu`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import pickle
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax

from pallaslab._src.core.jax_adapter.lowering import (
    MOSAIC_GPU_TARGET,
    TRITON_TARGET,
    gpu_backend,
)


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - depends on the JAX version
        return None


@contextlib.contextmanager
def gpu_chip(compute_capability: tuple[int, int], device_kind: str) -> Iterator[list[str]]:
    """Within the block, Pallas lowers for this GPU; yields notices for what it cannot set.

    Mosaic GPU's architecture query is answered directly (JAX has no public way to name
    a target GPU yet); Triton's device-kind query (JAX 0.11+) through an abstract mesh
    whose abstract device is the chip, as for TPU chips.
    """
    notices: list[str] = []
    mosaic_core = _module("jax.experimental.mosaic.gpu.core")
    patched = mosaic_core is not None and callable(getattr(mosaic_core, "_infer_arch", None))
    if mosaic_core is not None and not patched:
        notices.append(
            f"jax {jax.__version__}'s Mosaic GPU has no architecture query pallaslab can "
            "answer: its lowering chose the architecture itself (sm_90 without a GPU)."
        )
    saved = mosaic_core._infer_arch if patched else None
    mesh: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if _module("jax._src.pallas.triton.gpu_info") is not None:
        device = jax.sharding.AbstractDevice(
            device_kind=device_kind, num_cores=None, platform="cuda"
        )
        mesh = jax.sharding.use_abstract_mesh(
            jax.sharding.AbstractMesh(
                (1,), ("_pallaslab",), (jax.sharding.AxisType.Explicit,), abstract_device=device
            )
        )
    try:
        if patched:
            mosaic_core._infer_arch = lambda: compute_capability
        with mesh:
            yield notices
    finally:
        if patched:
            mosaic_core._infer_arch = saved


def _custom_calls(module_text: str, target: str) -> int:
    """How many custom calls to `target` a StableHLO module's text holds (any print form)."""
    target = re.escape(target)
    return len(
        re.findall(rf'custom_call @"?{target}"?\(|call_target_name = "{target}"', module_text)
    )


@dataclasses.dataclass(frozen=True)
class GpuExport:
    """A function exported for CUDA as one chip, ready for a compile worker.

    Attributes:
        pickled: The pickled `jax.export.Exported` (no VJP).
        backends: The kernel backends its custom calls use ("mosaic_gpu", "triton").
        kernels: How many kernel custom calls it holds.
        notices: What could not be set for the chip (empty when everything was).
    """

    pickled: bytes
    backends: tuple[str, ...]
    kernels: int
    notices: tuple[str, ...] = ()


def export_for_gpu(
    fn: Callable[..., Any],
    args: Sequence[Any],
    compute_capability: tuple[int, int],
    device_kind: str,
    *,
    mosaic_gpu: bool | None = None,
) -> GpuExport:
    """`fn(*args)` exported for CUDA as lowered for this chip.

    `mosaic_gpu` picks the backend of kernels without GPU compiler params (None: JAX's
    default). Triton kernels carry no compatibility guarantee across JAX versions, so
    export refuses them unless told; the worker runs the same JAX, so that is safe.
    """
    checks = [jax.export.DisabledSafetyCheck.custom_call(TRITON_TARGET)]
    with gpu_backend(mosaic_gpu), gpu_chip(compute_capability, device_kind) as notices:
        exported = jax.export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(*args)
    text = exported.mlir_module()
    calls = {
        name: _custom_calls(text, target)
        for name, target in (("mosaic_gpu", MOSAIC_GPU_TARGET), ("triton", TRITON_TARGET))
    }
    pickled = pickle.dumps(dataclasses.replace(exported, _get_vjp=None))
    backends = tuple(name for name, count in calls.items() if count)
    return GpuExport(pickled, backends, sum(calls.values()), tuple(notices))
