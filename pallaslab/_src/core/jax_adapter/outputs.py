"""Which kernel writes each output of a traced program."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pallaslab._src.core.jax_adapter.kernels import KernelSite
from pallaslab._src.core.jax_adapter.probes import CALL_PRIMITIVES, jax_core
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr


def output_writers(closed_jaxpr: Any, sites: Sequence[KernelSite]) -> list[tuple[int, int] | None]:
    """For each program output, the kernel that writes it as it is returned.

    Returns:
        One entry per output of the program: `(kernel index, output index among that
        kernel's outputs)` when the value returned is a kernel's output unchanged
        (through any number of enclosing `jit`s), else None (the output is computed
        after the kernel, or by no kernel).
    """
    owners = {id(site.eqn): k for k, site in enumerate(sites) if site.eqn is not None}
    jaxpr = inner_jaxpr(closed_jaxpr)
    return [_writer(jaxpr, var, owners) for var in jaxpr.outvars]


def _writer(jaxpr: Any, var: Any, owners: dict[int, int]) -> tuple[int, int] | None:
    if isinstance(var, jax_core.Literal):
        return None
    for eqn in reversed(jaxpr.eqns):
        for position, out in enumerate(eqn.outvars):
            if out is not var:
                continue
            if id(eqn) in owners:
                return owners[id(eqn)], position
            if eqn.primitive.name not in CALL_PRIMITIVES:
                return None
            for body in jax_core.jaxprs_in_params(eqn.params):
                if len(body.outvars) == len(eqn.outvars):
                    return _writer(body, body.outvars[position], owners)
            return None
    return None  # an input returned as is
