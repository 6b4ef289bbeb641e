"""Tracing a callable with example arguments into a `Program` (JAX objects inside)."""

from __future__ import annotations

import functools
import inspect as pyinspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import chips, jax_adapter
from pallaslab._src.core.program import Program, held_weakly
from pallaslab._src.records import ArraySpec


def trace_program(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    arg_names: Sequence[str | None] = (),
) -> Program:
    """Traces `fn` and returns the core's view of the program (JAX objects inside).

    Args:
        fn: The callable.
        args: Its positional arguments.
        kwargs: Its keyword arguments.
        arg_names: How the call names its positional arguments (`x` in `%%kernel
            add(x, y)`), for those `fn`'s own signature leaves unnamed (`*args`).
    """
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

    def flat_fn(*traced: Any) -> Any:
        call_args, call_kwargs = rebuild(traced)
        return fn(*call_args, **call_kwargs)

    name = callable_name(fn)
    functools.update_wrapper(flat_fn, fn, assigned=("__name__", "__qualname__"), updated=())
    abstract = [jax.ShapeDtypeStruct(np.shape(x), _dtype_of(x)) for x in dynamic_leaves]
    # TPU programs ask which TPU they are on while tracing: off a TPU, the chosen one.
    # Kernels are traced as written (no interpreter chosen for them: that is a run's).
    with chips.tracing_chip(), jax_adapter.mesh_interpret(False):
        closed, out_shapes = jax.make_jaxpr(flat_fn, return_shape=True)(*abstract)
    sites = tuple(jax_adapter.find_kernel_sites(closed))
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
    )


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
