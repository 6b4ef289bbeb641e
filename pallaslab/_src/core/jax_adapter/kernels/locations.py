"""Where a kernel is in the user's source: its function's definition, its call, an equation's line.

JAX's own frames and pallaslab's are skipped, and so are the wrappers `pl.kernel` and
`plgpu.kernel` trace around the user's function.
"""

from __future__ import annotations

from typing import Any

from pallaslab._src.base import sources
from pallaslab._src.core.jax_adapter.kernels.sites import KernelSite
from pallaslab._src.core.jax_adapter.probes import jax_core, source_info_util
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr
from pallaslab._src.records import SourceLocation


def user_location(source_info: Any) -> SourceLocation | None:
    """The innermost frame of user (or kernel library) code that made an equation.

    JAX skips its own frames and pallaslab's (registered with it); frames of other
    internals (where that registration is missing) are skipped here.
    """
    frames = source_info_util.user_frames(getattr(source_info, "traceback", None))
    for frame in frames:
        if not sources.is_internal_file(frame.file_name):
            return SourceLocation(frame.file_name, int(frame.start_line), frame.function_name)
    return None


def function_location(debug: Any) -> SourceLocation | None:
    """Where a traced function is defined; None for JAX's or pallaslab's own wrappers."""
    if debug is None or debug.func_filename is None or debug.func_lineno is None:
        return None
    if sources.is_internal_file(str(debug.func_filename)):
        return None
    return SourceLocation(str(debug.func_filename), int(debug.func_lineno), debug.func_name)


def kernel_location(body: Any) -> SourceLocation | None:
    """Where a kernel's function is defined, past the wrappers JAX puts around it.

    `plgpu.kernel` and `pl.kernel` trace a wrapper of their own (in JAX's core.py)
    that calls the user's function inside: the first function of the body, depth
    first, defined outside JAX and pallaslab is the kernel; else the first line of
    the body written there.
    """
    for jaxpr in _nested_jaxprs(body):
        location = function_location(getattr(jaxpr, "debug_info", None))
        if location is not None:
            return location
    return first_body_location(inner_jaxpr(body))


def kernel_parameters(body: Any, count: int) -> tuple[str, ...]:
    """The first `count` parameter names of the kernel function a wrapper calls."""
    location = kernel_location(body)
    if location is None:
        return ()
    names = sources.parameter_names(location.file, location.line)
    return names[:count] if len(names) >= count else ()


def _nested_jaxprs(body: Any) -> list[Any]:
    found = [inner_jaxpr(body)]
    for eqn in found[0].eqns:
        for sub in jax_core.jaxprs_in_params(eqn.params):
            found.extend(_nested_jaxprs(sub))
    return found


def first_body_location(jaxpr: Any) -> SourceLocation | None:
    for eqn in jaxpr.eqns:
        location = user_location(eqn.source_info)
        if location is not None:
            return location
    return None


def call_site(site: KernelSite) -> SourceLocation | None:
    """Where the kernel is called, past the wrappers that bind it.

    Its equation's user frame, else the nearest enclosing equation's
    (`plgpu.kernel` binds the kernel inside a wrapper of JAX's).
    """
    for eqn in (site.eqn, *reversed(site.trail)) if site.eqn is not None else ():
        location = user_location(eqn.source_info)
        if location is not None:
            return location
    return user_location(site.source_info)
