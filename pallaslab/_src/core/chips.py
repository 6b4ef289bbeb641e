"""The GPU and TPU that programs are traced and run for where none is at hand.

Kernels ask the device while they are traced: TPU programs which TPU they are on
(`pltpu.emit_pipeline`, `pltpu.create_tensorcore_mesh`, `pltpu.get_tpu_info()`), GPU
kernels the SM count (a persistent grid), the compute capability, the device kind. On
a machine without that hardware there is none to ask, so pallaslab answers with a
chosen chip: the one named (`inspect(..., chip="B200")`, `%%kernel --chip B200`, the
chip of a target), else for TPUs the `tpu_generation` setting (JupyterLab's settings
editor, v5e by default) and for GPUs an H100. On a TPU or GPU, the device at hand
answers. One mechanism for both (`jax_adapter.tpu_chip`, `jax_adapter.gpu_chip_scope`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence

import jax

from pallaslab._src.core import jax_adapter, settings
from pallaslab._src.records import hardware
from pallaslab._src.records.targets import DEFAULT_GPU_CHIP, DEFAULT_TPU_CHIP


def traced_chip() -> str:
    """The TPU generation programs are traced for off a TPU (the setting, else v5e)."""
    generation = settings.load().tpu_generation
    return generation if jax_adapter.tpu_chip_known(generation) else DEFAULT_TPU_CHIP


def gpu_here() -> str:
    """The GPU at hand, as the hardware table names it; "" without one.

    Its device kind where the table lacks it.
    """
    if jax.default_backend() not in ("gpu", "cuda"):
        return ""
    kind = str(getattr(jax.devices()[0], "device_kind", "GPU"))
    known = hardware.gpu_of_device_kind(kind)
    return known.name if known is not None else kind


@dataclasses.dataclass(frozen=True)
class ChipChoice:
    """The chips a program is traced for, and why.

    Attributes:
        gpu: The GPU kernels' device queries answer for ("" : JAX answers them: a GPU
            is at hand, or nothing asked).
        tpu: The TPU generation TPU lookups answer for off a TPU ("" : the setting).
        chosen: Named by the user (else a default).
    """

    gpu: str = ""
    tpu: str = ""
    chosen: bool = False


def choice_for(chip: str | None) -> ChipChoice:
    """What `chip=` names: a GPU of the hardware table, or a TPU generation.

    Raises:
        ValueError: Naming the known chips, for a name that is neither.
    """
    if not chip:
        return ChipChoice()
    try:
        return ChipChoice(gpu=hardware.gpu(chip).name, chosen=True)
    except KeyError:
        pass
    try:
        generation = hardware.tpu(chip).name
    except KeyError:
        raise ValueError(
            f"unknown chip {chip!r}: GPUs {', '.join(hardware.GPUS)}; "
            f"TPUs {', '.join(hardware.TPUS)}"
        ) from None
    return ChipChoice(tpu=generation, chosen=True)


@contextlib.contextmanager
def tracing_chip(
    choice: ChipChoice | str | None = None, *, watch_gpu: bool = False
) -> Iterator[jax_adapter.GpuWatch]:
    """Within the block, tracing and running answer the device's questions off it.

    TPU lookups answer for `choice.tpu` (else `traced_chip()`) where nothing else
    answers: on a TPU, or under an abstract TPU device the code chose itself, JAX's own
    answer stands. GPU queries answer for `choice.gpu` (on a GPU machine only when the
    user chose it); with `watch_gpu` and no GPU chosen, nothing answers but the
    yielded watch notes what kernel code asked, to trace again for an H100.

    Args:
        choice: The chips, or one chip's name ("v4", "B200"; `choice_for`); default:
            none chosen.
        watch_gpu: Note GPU queries instead of answering them.
    """
    choice = choice_for(choice) if isinstance(choice, str) else choice or ChipChoice()
    with jax_adapter.tpu_chip(choice.tpu or traced_chip(), fallback=True):
        if choice.gpu and (choice.chosen or not gpu_here()):
            with jax_adapter.gpu_chip_scope(jax_adapter.GpuChip.named(choice.gpu)) as watch:
                yield watch
        elif watch_gpu and not gpu_here():
            chip = jax_adapter.GpuChip.named(DEFAULT_GPU_CHIP)
            with jax_adapter.gpu_chip_scope(chip, watch=True) as watch:
                yield watch
        else:
            yield jax_adapter.GpuWatch()


def running_choice(choice: ChipChoice) -> ChipChoice:
    """The chips a run answers for: the traced ones; a GPU at hand answers for itself.

    What a GPU compiles for is the device's own, whatever the trace assumed.
    """
    if gpu_here():
        return dataclasses.replace(choice, gpu="", chosen=False)
    return choice


def tpu_here() -> bool:
    """Whether a TPU is at hand."""
    return jax.default_backend() == "tpu"


def traced_for(choice: ChipChoice, backends: Sequence[str]) -> tuple[str, str]:
    """The chip a program's kernels were traced for, and why, for the inspector to say.

    Args:
        choice: The chips the program was traced with.
        backends: Its kernels' backends ("mosaic_gpu", "triton", "mosaic_tpu", "").

    Returns:
        ("H100", "the default without a GPU"), ("B200", "chosen"), ("v5e", "the
        tpu_generation setting; no TPU here") ...; ("", "") for a program whose kernels
        assume no chip (backend-neutral kernels, or none).
    """
    gpu = any(b in ("mosaic_gpu", "triton") for b in backends)
    tpu = any(b == "mosaic_tpu" for b in backends)
    if choice.chosen and (choice.gpu or choice.tpu):
        return choice.gpu or choice.tpu, "chosen"
    if gpu or choice.gpu:
        here = gpu_here()
        if here:
            return here, "the GPU here"
        return choice.gpu or DEFAULT_GPU_CHIP, "the default without a GPU"
    if tpu:
        if tpu_here():
            return "", ""
        return traced_chip(), "the tpu_generation setting; no TPU here"
    return "", ""
