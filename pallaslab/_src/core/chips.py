"""The TPU that TPU programs are traced and run for where no TPU is at hand.

Pallas asks which TPU it is on while tracing some kernels (`pltpu.emit_pipeline`,
`pltpu.create_tensorcore_mesh`, a kernel reading `pltpu.get_tpu_info()`); on a CPU or
a GPU there is none to ask. pallaslab answers with a chosen chip: the `tpu_generation`
setting (JupyterLab's settings editor), v5e by default. On a TPU, the TPU answers.
"""

from __future__ import annotations

import contextlib

from pallaslab._src.core import jax_adapter, settings
from pallaslab._src.records.targets import DEFAULT_TPU_CHIP


def traced_chip() -> str:
    """The TPU generation programs are traced for off a TPU (the setting, else v5e)."""
    generation = settings.load().tpu_generation
    return generation if jax_adapter.tpu_chip_known(generation) else DEFAULT_TPU_CHIP


def tracing_chip(generation: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Within the block, tracing and running answer Pallas' TPU lookups off a TPU.

    Only where nothing else answers: on a TPU, or under an abstract TPU device the
    code chose itself, JAX's own answer stands.

    Args:
        generation: The chip; by default `traced_chip()`.
    """
    return jax_adapter.tpu_chip(generation or traced_chip(), fallback=True)
