"""A traced call made portable: exported here, run or compiled in another process.

What a tuning sweep sends to a worker of a cluster is never the notebook: it is the
call each config traced to, exported with `jax.export` for the platform of the worker
that runs it (the kernels lowered here, closures and compile-time Python already
resolved by tracing), pickled, plus the call's array inputs. A worker of the same
Python, JAX and pallaslab loads it (`load`) and runs it, or compiles it for a chip it
does not have (`compile_check`: XLA's GPU compile, libtpu's TPU compile). Non-array
arguments (block sizes, callables) are fixed into the exported program, as the
timing harness fixes them into the program it compiles (`calls.prepare`).

On a CPU the program is exported as a local run would run it: kernels emulated (or
interpreted under `--interpret`), so the worker times what the notebook would time.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.core import emulator, jax_adapter, running
from pallaslab._src.records.targets import XLA_GPU_CHIPS, parse_target

# JAX platform names a program can be exported for, by the backend that runs it.
PLATFORMS = {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda", "tpu": "tpu"}
# Targets whose compile runs without the chip (on a CPU worker), by kind.
COMPILE_KINDS = ("xla-gpu", "tpu-compile")


@dataclasses.dataclass(frozen=True)
class Shipped:
    """One call exported for one platform, ready to cross to another process.

    Attributes:
        program: The pickled `jax.export.Exported` (its inputs: the call's array
            leaves, in order; its outputs: the call's outputs).
        platform: "cpu", "cuda" or "tpu".
        chip: The chip it was lowered for ("" on a CPU, or when none was named).
        mode: How its kernels run: "emulated", "interpret" (on a CPU) or "compiled".
        kernels: How many Pallas kernels the call holds.
        seconds: How long tracing and exporting took here.
    """

    program: bytes
    platform: str
    chip: str = ""
    mode: str = "compiled"
    kernels: int = 0
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class CompileCheck:
    """What compiling a shipped program for a chip said.

    Attributes:
        target: The target compiled for ("xla-gpu:H100", "tpu-compile:v5e").
        error: The compiler's error ("" when it compiled).
        unavailable: The compiler is not installed where this ran (not the
            program's fault: the config is then timed without this check).
        seconds: The compile's wall time.
    """

    target: str
    error: str = ""
    unavailable: bool = False
    seconds: float = 0.0


def array_inputs(args: Sequence[Any], kwargs: dict[str, Any]) -> list[np.ndarray]:
    """The call's array leaves, as host arrays: what a shipped program takes."""
    leaves = jax.tree_util.tree_leaves((tuple(args), dict(kwargs)))
    return [np.asarray(leaf) for leaf in leaves if _dynamic(leaf)]


def export_call(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    platform: str,
    chip: str = "",
    *,
    gpu: tuple[tuple[int, int], str] | None = None,
) -> Shipped:
    """`fn(*args, **kwargs)` exported for `platform` (as lowered for `chip`).

    Args:
        fn: The callable to export (any function that runs Pallas kernels).
        args: Its arguments: arrays become the program's inputs, anything else is
            fixed into it.
        kwargs: Its keyword arguments, likewise.
        platform: "cpu", "cuda" (or "gpu") or "tpu".
        chip: For "cuda", a chip of `xla-gpu` targets ("H100") that Pallas lowers
            for; for "tpu", a TPU generation ("v5e"); ignored on a CPU.
        gpu: For "cuda" and a chip without a target description: the device's
            (compute capability, device kind), as a worker of it reported them.

    Raises:
        ValueError: For a platform that cannot be exported for.
        Exception: Whatever tracing or lowering raised (the config's failure).
    """
    target = PLATFORMS.get(platform)
    if target is None:
        raise ValueError(f"cannot export for platform {platform!r}; one of: cpu, cuda, tpu")
    flat_fn, avals = _flat_call(fn, args, kwargs)
    started = time.perf_counter()
    jax_adapter.forget_kernel_traces()  # kernels reused on another grid trace afresh
    if target == "cpu":
        with running.kernel_scope():
            traced = jax.jit(flat_fn).trace(*avals)
            sites = jax_adapter.find_kernel_sites(traced.jaxpr)
            exported = jax.export.export(jax.jit(flat_fn), platforms=["cpu"])(*avals)
        plans = [emulator.plan_for_site(site) for site in sites]
        program = pickle.dumps(dataclasses.replace(exported, _get_vjp=None))
        mode = running.run_mode("cpu", False, bool(sites), plans) if sites else "xla"
        seconds = time.perf_counter() - started
        return Shipped(program, "cpu", "", mode, len(sites), seconds)
    if target == "cuda":
        from pallaslab._src.core.lowering.targets import xla_gpu  # noqa: PLC0415 - on use

        if gpu is not None and chip not in XLA_GPU_CHIPS:
            export = jax_adapter.export_for_gpu(flat_fn, avals, gpu[0], gpu[1])
        else:
            export = xla_gpu.export_program(flat_fn, avals, chip or "H100")
        seconds = time.perf_counter() - started
        return Shipped(export.pickled, "cuda", chip, "compiled", export.kernels, seconds)
    program = jax_adapter.export_for_tpu(flat_fn, avals, chip or "v5e")
    seconds = time.perf_counter() - started
    return Shipped(program, "tpu", chip, "compiled", 0, seconds)


def load(shipped: Shipped) -> Callable[..., Any]:
    """The shipped program as a callable of its array inputs (here, on this backend)."""
    exported = pickle.loads(shipped.program)  # our own export, same versions
    return exported.call  # type: ignore[no-any-return]


def compile_check(shipped: Shipped, target: str) -> CompileCheck:
    """Compiles a shipped program for `target`'s chip, which this machine need not have.

    `target` is an `xla-gpu:<chip>` target (a program exported for "cuda") or a
    `tpu-compile:<chip>` one (exported for "tpu"). Each compile runs in a fresh
    process (a crash or a stuck compile says so here rather than taking this process).
    """
    compile_platform(target)  # a target that is none says so
    parsed = parse_target(target)
    started = time.perf_counter()
    if parsed.kind == "xla-gpu":
        from pallaslab._src.core.lowering import xla_gpu  # noqa: PLC0415 - on use

        compiled = xla_gpu.compile_exports(parsed.arch, {"program": shipped.program}, ())
        error = compiled.error or next((j.error for j in compiled.jobs.values() if j.error), "")
        unavailable = bool(compiled.error) and "pip install" in compiled.error
    else:
        from pallaslab._src.core.lowering import tpu_compile  # noqa: PLC0415 - on use

        result = tpu_compile.compile_exported(shipped.program, parsed.arch)
        error = result.error
        unavailable = "pip install" in error
    return CompileCheck(
        parsed.name,
        error=messages.clip(error, max_lines=12) if error else "",
        unavailable=unavailable,
        seconds=time.perf_counter() - started,
    )


def compile_platform(target: str) -> tuple[str, str]:
    """(platform, chip) a compile target's program is exported for."""
    parsed = parse_target(target)
    if parsed.kind == "xla-gpu":
        return "cuda", parsed.arch
    if parsed.kind == "tpu-compile":
        return "tpu", parsed.arch
    raise ValueError(f"{target} is not a compile target; one of: xla-gpu:CHIP, tpu-compile:CHIP")


def _dynamic(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array | np.ndarray | np.generic)


def _flat_call(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], list[jax.ShapeDtypeStruct]]:
    """`fn` as a function of the call's array leaves alone, and their shapes."""
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    dynamic = [_dynamic(leaf) for leaf in leaves]
    static = [leaf for leaf, d in zip(leaves, dynamic, strict=True) if not d]
    avals = [
        jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype)
        for leaf, d in zip(leaves, dynamic, strict=True)
        if d
    ]

    def flat_fn(*arrays: Any) -> Any:
        arrays_iter, static_iter = iter(arrays), iter(static)
        rebuilt = [next(arrays_iter) if d else next(static_iter) for d in dynamic]
        call_args, call_kwargs = jax.tree_util.tree_unflatten(treedef, rebuilt)
        return fn(*call_args, **call_kwargs)

    return flat_fn, avals
