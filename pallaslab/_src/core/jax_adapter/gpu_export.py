"""Exporting a kernel (or a program) for one GPU chip, to be compiled by XLA elsewhere.

Pallas picks code for the GPU it lowers for: Mosaic GPU asks
`jax.experimental.mosaic.gpu.core._infer_arch()` (the default device's compute
capability, else sm_90), and from JAX 0.11 the Triton lowering asks the device kind
(`jax._src.pallas.triton.gpu_info`). On a machine without a GPU neither knows the
chip, so `gpu_chip` answers for them while a function is exported; the pickled
`jax.export.Exported` then goes to a compile worker with a compile-only device of
that chip (`pallaslab._src.core.lowering.xla_gpu`). The chip is set by the adapter's
one `lowering.gpu_chip`.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax

from pallaslab._src.core.jax_adapter import execution
from pallaslab._src.core.jax_adapter.lowering import (
    MOSAIC_GPU_TARGET,
    TRITON_TARGET,
    gpu_backend,
    gpu_chip,
)


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
    # The kernel as it compiles on the GPU: no CPU interpreter for mesh kernels.
    with (
        gpu_backend(mosaic_gpu),
        gpu_chip(device_kind, compute_capability) as notices,
        execution.mesh_interpret(False),
    ):
        exported = jax.export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(*args)
    text = exported.mlir_module()
    calls = {
        name: _custom_calls(text, target)
        for name, target in (("mosaic_gpu", MOSAIC_GPU_TARGET), ("triton", TRITON_TARGET))
    }
    pickled = pickle.dumps(dataclasses.replace(exported, _get_vjp=None))
    backends = tuple(name for name, count in calls.items() if count)
    return GpuExport(pickled, backends, sum(calls.values()), tuple(notices))
