"""Whether this machine has the compiler a target needs (the optional extras).

Triton's stages past TTIR need the triton compiler, a TPU compile needs libtpu, and
XLA's GPU compile needs JAX's CUDA plugin and NVIDIA's tools (`gpu_toolchain`).
Each is looked up afresh per question (an extra installed mid-session counts at once);
`unavailable_reasons` asks once for a whole list of targets.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Iterable

from pallaslab._src.core import gpu_toolchain
from pallaslab._src.records.targets import Target


def unavailable_reason(target: Target) -> str | None:
    """Why this machine cannot produce the target (None when it can)."""
    return _reason(target, _installed, gpu_toolchain.problem)


def unavailable_reasons(targets: Iterable[Target]) -> dict[str, str | None]:
    """`unavailable_reason` of each target by name, each toolchain looked up once."""
    installed = functools.cache(_installed)
    gpu_problem = functools.cache(gpu_toolchain.problem)
    return {t.name: _reason(t, installed, gpu_problem) for t in targets}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _reason(
    target: Target, installed: Callable[[str], bool], gpu_problem: Callable[[], str | None]
) -> str | None:
    needs_triton = target.kind == "triton" and target.stage != "ttir"
    if needs_triton and not installed("triton"):
        return (
            f"{target.title} needs the triton compiler (Linux): "
            "pip install 'pallaslab[triton]'. Its Triton IR (target 'triton') needs nothing."
        )
    if target.kind == "tpu-compile" and not installed("libtpu"):
        return (
            "A TPU compile needs libtpu (Linux): pip install 'pallaslab[tpu]'. "
            f"The Mosaic module (target 'mosaic-tpu:{target.arch}') needs nothing."
        )
    if target.kind == "xla-gpu":
        return gpu_problem()
    return None
