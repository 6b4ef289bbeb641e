"""Whether this machine has the compiler a target needs (the optional extras).

Triton's stages past TTIR need the triton compiler, a TPU compile needs libtpu, and
XLA's GPU compile needs JAX's CUDA plugin and NVIDIA's tools (`gpu_toolchain`).
"""

from __future__ import annotations

import importlib.util

from pallaslab._src.core import gpu_toolchain
from pallaslab._src.records.targets import Target


def unavailable_reason(target: Target) -> str | None:
    """Why this machine cannot produce the target (None when it can)."""
    needs_triton = target.kind == "triton" and target.stage != "ttir"
    if needs_triton and importlib.util.find_spec("triton") is None:
        return (
            f"{target.title} needs the triton compiler (Linux): "
            "pip install 'pallaslab[triton]'. Its Triton IR (target 'triton') needs nothing."
        )
    if target.kind == "tpu-compile" and importlib.util.find_spec("libtpu") is None:
        return (
            "A TPU compile needs libtpu (Linux): pip install 'pallaslab[tpu]'. "
            f"The Mosaic module (target 'mosaic-tpu:{target.arch}') needs nothing."
        )
    if target.kind == "xla-gpu":
        return gpu_toolchain.problem()
    return None
