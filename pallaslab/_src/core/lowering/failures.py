"""Why a lowering failed: JAX's and the compilers' errors as `LoweringError`s at the kernel's line.

Every target's lowering raises `LoweringFailedError` carrying the record the view
shows; the checks that stop a lowering before it starts (a mesh kernel asked for
another backend's target, a block breaking TPU's (8, 128) rule) live here too.
"""

from __future__ import annotations

import dataclasses
import re
import signal
from collections.abc import Sequence
from typing import Any

import jax

from pallaslab._src.base import sources
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering import tpu_rules
from pallaslab._src.records import Kernel, SourceLocation
from pallaslab._src.records.lowered import LoweringError
from pallaslab._src.records.targets import Target


class LoweringFailedError(Exception):
    """Internal: a lowering step failed with an explained error."""

    def __init__(self, error: LoweringError) -> None:
        super().__init__(error.message)
        self.error = error


def tiling_error(problems: Sequence[Any], detail: str = "") -> LoweringError:
    """One error for the blocks that break the (8, 128) rule, at the first's BlockSpec."""
    first = problems[0]
    message = " ".join(p.message for p in problems)
    return LoweringError(f"{message} {first.hint}", first.location, detail=detail, kind="tiling")


_TILING = "requires that the last two dimensions of your block shape"
_PARAMS = re.compile(r"Compiler params for platform (\w+) cannot be used for (\w+) lowering")


def explain(
    error: BaseException, kernel: Kernel | None, platform: str, chip: str | None
) -> LoweringError:
    """A JAX lowering exception as a `LoweringError` pointing at the kernel's line."""
    text = str(error).strip()
    location = jax_adapter.lowering_error_location(error.__traceback__)
    primitive = jax_adapter.lowering_error_primitive(error.__traceback__)
    where = "TPU " + chip if chip else {"cuda": "GPU", "tpu": "TPU"}.get(platform, "this machine")
    name = f"'{kernel.name}'" if kernel else "a kernel of the program"
    if params := _PARAMS.search(text):
        backend = {"tpu": "pltpu.CompilerParams (Mosaic TPU)", "gpu": "GPU compiler params"}
        chosen = backend.get(params.group(1), params.group(1))
        message = f"{name} passes {chosen}: {where} targets cannot take it."
        return LoweringError(message, call_site(kernel), detail=text)
    if _TILING in text:
        message = first_lines(text, 1)
        return LoweringError(message, call_site(kernel), detail=text, kind="tiling")
    summary = first_lines(text) or "(no message)"
    if primitive and primitive not in ("pallas_call", *jax_adapter.MESH_KERNELS):
        summary = f"{summary} (while lowering '{primitive}')"
    message = f"{name} cannot be lowered for {where}: {type(error).__name__}: {summary}"
    return LoweringError(
        message,
        location or location_in_text(text, kernel) or call_site(kernel),
        detail=text,
    )


_LAYOUTS = "Failed to infer a possible set of layouts"


def mosaic_gpu_layout_hint(error: LoweringError, kernel: Kernel) -> LoweringError:
    """Says why Mosaic GPU found no layout, when its default lowering is the cause.

    From jax 0.11 Mosaic GPU lowers with warpgroup semantics unless a kernel asks
    otherwise, and kernels that lowered with jax 0.10's lane semantics can fail here.
    """
    chose = any(name == "lowering_semantics" for name, _ in kernel.compiler_params)
    if _LAYOUTS not in error.message or chose:
        return error
    if jax_adapter.mosaic_gpu_default_semantics() != "Warpgroup":
        return error
    hint = (
        f" jax {jax.__version__} lowers Mosaic GPU kernels with warpgroup semantics unless "
        "they ask otherwise (from jax 0.11; 0.10 used lane semantics): every array is laid "
        "out over a warpgroup's 128 threads, and this kernel's arrays could not be (arrays "
        "smaller than a warpgroup are a usual cause). "
        "plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane) selects "
        "jax 0.10's lowering, whose error may say more."
    )
    return dataclasses.replace(error, message=error.message + hint)


def call_site(kernel: Kernel | None) -> SourceLocation | None:
    """Where an error about the kernel points: its call, else its body."""
    if kernel is None:
        return None
    return kernel.call_site or kernel.source


def kernel_file(kernel: Kernel | None) -> str:
    """The file of the kernel's body ('' when unknown): compilers' locations name it."""
    return kernel.source.file if kernel and kernel.source else ""


_FILE_LINE = re.compile(r'"?([^\s":()]+\.py|<[^>]+>)"?:(\d+)')


def location_in_text(text: str, kernel: Kernel | None) -> SourceLocation | None:
    """A `file:line` (or MLIR `"file":line:col`) in a message naming the kernel's file."""
    wanted = kernel_file(kernel)
    fallback = None
    for match in _FILE_LINE.finditer(text):
        location = SourceLocation(match.group(1), int(match.group(2)))
        if wanted and match.group(1) == wanted:
            return location
        if not sources.is_internal_file(location.file):  # never JAX's own lines
            fallback = fallback or location
    return fallback if not wanted else None


def first_lines(text: str, count: int = 3) -> str:
    """The first `count` non-blank lines of a message, joined on one line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:count])


def strip_status(text: str) -> str:
    """A compiler message without XLA's status prefix (`INTERNAL: ` and the like)."""
    return re.sub(r"^(\w+Error: )?(INTERNAL|INVALID_ARGUMENT|UNIMPLEMENTED): ", "", text)


# Targets that take a mesh kernel, by the backend of its mesh.
_MESH_TARGETS = {
    "mosaic_gpu": ("mosaic-gpu", "xla-gpu"),
    "mosaic_tpu": ("mosaic-tpu", "tpu-compile"),
}
# Targets that take a chip after a colon.
_CHIP_TARGETS = ("xla-gpu",)


def check_mesh_target(kernel: Kernel, target: Target) -> None:
    """A mesh kernel lowers only for its mesh's backend (a TPU mesh is no GPU's)."""
    allowed = _MESH_TARGETS.get(kernel.backend)
    if allowed is None or target.kind in allowed:
        return
    what = "a Mosaic GPU kernel" if kernel.backend == "mosaic_gpu" else "a TPU kernel"
    names = " and ".join(f"'{t}:<chip>'" if t in _CHIP_TARGETS else f"'{t}'" for t in allowed)
    plural = "targets take" if len(allowed) > 1 else "target takes"
    raise LoweringFailedError(
        LoweringError(
            f"'{kernel.name}' is {what} ({kernel.kind} on a "
            f"{'GPU' if kernel.backend == 'mosaic_gpu' else 'TPU'} mesh): only the "
            f"{names} {plural} it.",
            kernel.call_site or kernel.source,
        )
    )


def check_tiling(kernel: Kernel) -> None:
    """Stops at the (8, 128) rule before compiling: the BlockSpec line says more than Mosaic."""
    problems = tpu_rules.tiling_problems(kernel)
    if problems:
        raise LoweringFailedError(tiling_error(problems))


# A tool that died: a signal, a crash dump, or a worker that exited without a result.
_DIED = re.compile(
    r"(?P<tool>XLA GPU compile worker|libtpu (?:compile )?worker|ptxas|nvdisasm|libtpu)"
    r"[^\n]*?(?:exited|killed|crashed|[Ss]egmentation fault|core dumped|[Ss]ignal|took over"
    r"|raised SIG\w+)",
)


def crashed_tool(text: str) -> str:
    """The tool a compile error says died ("ptxas", "the libtpu compile worker" ...).

    "" when the error is a compiler's verdict on the kernel rather than a crash.
    """
    found = _DIED.search(text)
    if found is None:
        return ""
    tool = found["tool"]
    return f"the {tool}" if "worker" in tool else tool


def exit_words(returncode: int | None) -> str:
    """How a process ended, in words: "exit status 1", "killed by SIGKILL (signal 9)"."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "a signal"
        return f"killed by {name} (signal {-returncode})"
    return f"exit status {returncode}"
