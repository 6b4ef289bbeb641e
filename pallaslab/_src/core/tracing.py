"""Tracing a callable with example arguments into a `Program` (JAX objects inside)."""

from __future__ import annotations

import dataclasses
import functools
import inspect as pyinspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import chips, jax_adapter, snapshot
from pallaslab._src.core.program import Program, held_weakly
from pallaslab._src.records import ArraySpec
from pallaslab._src.records.targets import DEFAULT_GPU_CHIP


def trace_program(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None] = (),
    chip: str | chips.ChipChoice | None = None,
) -> Program:
    """Traces `fn` and returns the core's view of the program (JAX objects inside).

    Args:
        fn: The callable.
        args: Its positional arguments.
        kwargs: Its keyword arguments.
        arg_names: How the call names its positional arguments (`x` in `%%kernel
            add(x, y)`), for those `fn`'s own signature leaves unnamed (`*args`).
        chip: The GPU or TPU the device queries of kernels answer for while traced
            ("B200", "v6e"); by default the device at hand, else (off a GPU, for a
            program that asked and holds GPU kernels) an H100, and for TPU lookups the
            `tpu_generation` setting.

    Raises:
        ValueError: For a chip pallaslab's hardware table does not have.
    """
    choice = chip if isinstance(chip, chips.ChipChoice) else chips.choice_for(chip)
    jax_adapter.forget_kernel_traces()  # kernels reused on another grid trace afresh
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    dynamic = [_is_array_like(leaf) for leaf in leaves]
    dynamic_leaves = [leaf for leaf, d in zip(leaves, dynamic, strict=True) if d]
    static_leaves = [leaf for leaf, d in zip(leaves, dynamic, strict=True) if not d]

    def rebuild(traced: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        traced_iter, static_iter = iter(traced), iter(static_leaves)
        rebuilt = [next(traced_iter) if d else next(static_iter) for d in dynamic]
        call_args, call_kwargs = jax.tree_util.tree_unflatten(treedef, rebuilt)
        return tuple(call_args), dict(call_kwargs)

    def split(new_args: Sequence[Any], new_kwargs: dict[str, Any]) -> list[Any]:
        new_leaves, new_treedef = jax.tree_util.tree_flatten((tuple(new_args), dict(new_kwargs)))
        if new_treedef != treedef:  # type: ignore[operator]  # PyTreeDef lacks stubs
            raise ValueError(
                f"arguments are laid out differently from the inspected call: "
                f"{new_treedef} vs {treedef}"
            )
        return [leaf for leaf, d in zip(new_leaves, dynamic, strict=True) if d]

    def live_fn(*traced: Any) -> Any:
        call_args, call_kwargs = rebuild(traced)
        return fn(*call_args, **call_kwargs)

    name = callable_name(fn)
    # The globals the function reads, as they are now: what a later re-trace sees.
    pins = snapshot.pin((fn, static_leaves))
    retrace_fn = _retrace_function(live_fn, pins)
    abstract = [jax.ShapeDtypeStruct(np.shape(x), _dtype_of(x)) for x in dynamic_leaves]
    choice, (closed, out_shapes), deprecated = _trace_for_chip(live_fn, abstract, choice)
    sites = tuple(jax_adapter.find_kernel_sites(closed))
    flat_fn = (
        # A mesh kernel's interpreter is chosen when it is bound, by the code that binds
        # it: such programs are traced again (their globals pinned) rather than replayed.
        retrace_fn
        if any(site.primitive in jax_adapter.MESH_KERNELS for site in sites)
        else _snapshot_function(closed, out_shapes, retrace_fn)
    )
    for made in (flat_fn, retrace_fn):
        functools.update_wrapper(made, fn, assigned=("__name__", "__qualname__"), updated=())
    example_args, weak_args = held_weakly(dynamic_leaves)
    arg_paths = _named_by_kernels(
        _argument_paths(fn, args, kwargs, dynamic, arg_names), closed, sites
    )
    return Program(
        name=name,
        flat_fn=flat_fn,
        closed_jaxpr=closed,
        args=tuple(
            ArraySpec(path, tuple(a.shape), str(a.dtype))
            for path, a in zip(arg_paths, abstract, strict=True)
        ),
        outputs=tuple(
            ArraySpec(jax.tree_util.keystr(path) or "out", tuple(s.shape), str(s.dtype))
            for path, s in jax.tree_util.tree_flatten_with_path(out_shapes)[0]
        ),
        example_args=example_args,
        weak_args=weak_args,
        sites=sites,
        jitted=jax.jit(flat_fn, **run_options()),
        split=split,
        rebuild=rebuild,
        fn=fn,
        retrace_fn=retrace_fn,
        pins=pins,
        chip=choice,
        notices=deprecated,
    )


def _retrace_function(live_fn: Callable[..., Any], pins: snapshot.Pins) -> Callable[..., Any]:
    """`live_fn` traced again as it was: its globals pinned, kept apart in JAX's caches.

    For what the jaxpr cannot serve: other shapes or dtypes, another TPU chip.
    """

    def retrace(*traced: Any) -> Any:
        jax_adapter.forget_kernel_traces()  # kernels reused on another grid trace afresh
        with pins.applied():
            return live_fn(*traced)

    setattr(retrace, snapshot.PINS_ATTRIBUTE, pins)
    return retrace


def _snapshot_function(
    closed: Any, out_shapes: Any, retrace_fn: Callable[..., Any]
) -> Callable[..., Any]:
    """The traced program as a function of its leaves: the inspection's snapshot.

    On the traced shapes and dtypes it replays the jaxpr (the very program traced,
    whatever the user's globals hold by now); on others it re-traces with the
    globals pinned.
    """
    replay = jax_adapter.replay_function(closed, jax.tree_util.tree_structure(out_shapes))
    avals = jax_adapter.traced_avals(closed)

    def snapshot_fn(*traced: Any) -> Any:
        if jax_adapter.same_avals(avals, traced):
            return replay(*traced)
        return retrace_fn(*traced)

    setattr(snapshot_fn, snapshot.PINS_ATTRIBUTE, getattr(retrace_fn, snapshot.PINS_ATTRIBUTE))
    return snapshot_fn


def _trace_for_chip(
    flat_fn: Callable[..., Any], abstract: Sequence[Any], choice: chips.ChipChoice
) -> tuple[chips.ChipChoice, Any, tuple[str, ...]]:
    """`make_jaxpr` of the program as it traces on the chips chosen.

    Returns the chips, the result, and what JAX deprecated in the code as it traced
    (`pl.core_map`, the old `out_shape` of `plgpu.kernel` ...), as one-line notices.

    TPU programs ask which TPU they are on while tracing: off a TPU, the chosen one
    answers. GPU kernels ask the GPU (SM count, compute capability): without a chosen
    GPU, nothing answers the first trace but pallaslab notes whether kernel code
    asked; if it did and the program holds GPU kernels (or failed: a CPU device has no
    SM count), it is traced again as on an H100, the default GPU off a GPU. Kernels
    are traced as written (no interpreter chosen for them: that is a run's).
    """

    def attempt(chosen: chips.ChipChoice) -> tuple[Any, BaseException | None, list[str]]:
        with (
            chips.tracing_chip(chosen, watch_gpu=not chosen.gpu) as watch,
            jax_adapter.mesh_interpret(False),
            jax_adapter.deprecation_notices() as deprecated,
        ):
            result: tuple[Any, BaseException | None, list[str]]
            try:
                result = jax.make_jaxpr(flat_fn, return_shape=True)(*abstract), None, watch.asked
            except Exception as error:
                result = None, error, watch.asked
        notices[:] = deprecated  # filled as the block ended
        return result

    notices: list[str] = []
    result, error, asked = attempt(choice)
    gpu_kernels = result is not None and any(
        jax_adapter.site_backend(site) in ("mosaic_gpu", "triton")
        for site in jax_adapter.find_kernel_sites(result[0])
    )
    if not choice.gpu and asked and (error is not None or gpu_kernels):
        jax_adapter.forget_kernel_traces()
        retried = dataclasses.replace(choice, gpu=DEFAULT_GPU_CHIP)
        result, error, _ = attempt(retried)
        choice = retried
    if error is not None:
        raise error
    return choice, result, tuple(notices)


def _is_array_like(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array | np.ndarray | jax.ShapeDtypeStruct | np.generic)


def _dtype_of(x: Any) -> Any:
    return x.dtype


def callable_name(fn: Callable[..., Any]) -> str:
    """The name of a callable (of the function a `functools.partial` wraps)."""
    inner = getattr(fn, "func", fn)  # functools.partial
    return str(getattr(inner, "__name__", type(inner).__name__))


def _argument_paths(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    dynamic: list[bool],
    arg_names: Sequence[str | None] = (),
) -> list[tuple[str, str] | str]:
    """Readable names for the traced leaves: `x`, `params['w']`, `(args[2], tail)`.

    A positional argument nothing names is left as (`args[2]`, its tail) to be named
    after the kernel parameter it is passed to, if any. Flattened exactly as the leaves
    are, so names and leaves line up.
    """
    try:
        parameters = list(pyinspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    positional = [
        p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    paths: list[tuple[str, str] | str] = []
    for path, _ in jax.tree_util.tree_flatten_with_path((tuple(args), dict(kwargs)))[0]:
        group, key, *rest = path
        tail = jax.tree_util.keystr(tuple(rest))
        if getattr(group, "idx", 0) == 0:
            index = key.idx
            if index < len(positional):
                paths.append(positional[index] + tail)
            elif index < len(arg_names) and arg_names[index]:
                paths.append(f"{arg_names[index]}{tail}")
            else:
                paths.append((f"args[{index}]", tail))
        else:
            paths.append(str(key.key) + tail)
    return [p for p, d in zip(paths, dynamic, strict=True) if d]


def _named_by_kernels(
    paths: list[tuple[str, str] | str], closed: Any, sites: Sequence[Any]
) -> list[str]:
    """Names the leaves nothing named (of a bare `pallas_call`, of `*args`).

    Each takes the name of the kernel parameter it is passed to unchanged (`x_ref`),
    when no other leaf has that name; else it stays `args[k]`.
    """
    kernel_names = [""] * len(paths)
    for site in sites:
        sources = jax_adapter.program_inputs_of(closed, site)
        for source, name in zip(sources, jax_adapter.kernel_parameter_names(site), strict=True):
            if source is not None and source < len(paths) and name and not kernel_names[source]:
                kernel_names[source] = name
    taken = {p for p in paths if isinstance(p, str)}
    named = []
    for path, kernel_name in zip(paths, kernel_names, strict=True):
        if isinstance(path, str):
            named.append(path)
            continue
        fallback, tail = path
        name = kernel_name if kernel_name and not tail and kernel_name not in taken else ""
        taken.add(name or fallback + tail)
        named.append(name or fallback + tail)
    return named


def run_options() -> dict[str, Any]:
    """How the program pallaslab runs is compiled.

    On CPU a run is one call of the emulated program, where compiling is most of the
    wait: XLA's level-1 backend optimisation compiles notebook 04's matmul ~20% faster
    than the default for the same run time (benchmarks/inspector_latency.py). The
    timing harness compiles its own copy at full optimisation.
    """
    if jax.default_backend() == "cpu":
        return {"compiler_options": {"xla_backend_optimization_level": 1}}
    return {}
