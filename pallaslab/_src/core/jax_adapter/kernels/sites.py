"""Finding Pallas kernels in a traced program, and what each is bound to there.

A `KernelSite` is a kernel as JAX bound it (its equation, params, operand avals and
the equations enclosing it); the rest reads which program inputs and which kernel
parameters its values are, and the mesh a mesh kernel runs on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pallaslab._src.core.jax_adapter.probes import (
    CALL_PRIMITIVES,
    MESH_KERNELS,
    PALLAS_CALL,
    jax_core,
)
from pallaslab._src.core.jax_adapter.shapes import call_body, inner_jaxpr


@dataclasses.dataclass(frozen=True)
class KernelSite:
    """A kernel as bound in a program: what JAX knows, before conversion.

    Holds JAX objects; it stays inside the core (for lowering and running one kernel
    on its own) and is never handed to views.
    """

    primitive: str
    params: dict[str, Any]
    in_avals: tuple[Any, ...]
    source_info: Any
    path: tuple[str, ...]
    # The equation itself and the equations enclosing it (outermost first), when the
    # kernel was found in a traced program rather than recorded as it was bound.
    eqn: Any = None
    trail: tuple[Any, ...] = ()


def find_kernel_sites(closed_jaxpr: Any) -> list[KernelSite]:
    """Every Pallas kernel in a traced program, in program order, depth first."""
    sites: list[KernelSite] = []
    _walk(inner_jaxpr(closed_jaxpr), (), (), sites)
    return sites


def _walk(
    jaxpr: Any, path: tuple[str, ...], trail: tuple[Any, ...], sites: list[KernelSite]
) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == PALLAS_CALL or name in MESH_KERNELS:
            sites.append(
                KernelSite(
                    primitive=name,
                    params=dict(eqn.params),
                    in_avals=tuple(v.aval for v in eqn.invars),
                    source_info=eqn.source_info,
                    path=path,
                    eqn=eqn,
                    trail=trail,
                )
            )
            continue
        label = _path_label(name, eqn.params)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            _walk(sub, (*path, label), (*trail, eqn), sites)


def _path_label(primitive: str, params: dict[str, Any]) -> str:
    inner = params.get("name")
    return f"{primitive}({inner})" if isinstance(inner, str) and inner else primitive


def _one_to_one_body(eqn: Any) -> Any:
    """The body of a call taking the equation's inputs one to one, or None.

    `plgpu.kernel` wraps its kernel in a `custom_vmap` (its body under "call").
    """
    name = eqn.primitive.name
    if name in CALL_PRIMITIVES:
        body = call_body(eqn.params)
    elif name == "custom_vmap_call":
        body = eqn.params.get("call")
    else:
        return None
    jaxpr = inner_jaxpr(body) if body is not None else None
    return jaxpr if hasattr(jaxpr, "eqns") else None


def program_inputs_of(closed_jaxpr: Any, site: KernelSite) -> tuple[int | None, ...]:
    """Per value a kernel is bound to: the program input it is, unchanged, or None.

    Values are followed through the calls enclosing the kernel (`jit`, `closed_call`
    ...), whose bodies take their inputs one to one; not through loops or branches,
    whose bodies see slices or carries.
    """
    if site.eqn is None:
        return ()
    unknown = (None,) * len(site.eqn.invars)
    where: dict[Any, int] = {v: k for k, v in enumerate(inner_jaxpr(closed_jaxpr).invars)}
    for depth, eqn in enumerate(site.trail):
        inner = site.trail[depth + 1] if depth + 1 < len(site.trail) else site.eqn
        jaxpr = _one_to_one_body(eqn)
        if (
            jaxpr is None
            or len(jaxpr.invars) != len(eqn.invars)
            or not any(e is inner for e in jaxpr.eqns)
        ):
            return unknown
        where = {
            var: where[outer]
            for var, outer in zip(jaxpr.invars, eqn.invars, strict=True)
            if not isinstance(outer, jax_core.Literal) and outer in where
        }
    return tuple(None if isinstance(v, jax_core.Literal) else where.get(v) for v in site.eqn.invars)


def kernel_operand_positions(site: KernelSite) -> tuple[int | None, ...]:
    """Per value a kernel is bound to: the operand (kernel parameter) it becomes.

    None where unknown: `pl.core_map` (its refs are made inside), and the values JAX
    binds before a pallas_call's operands (captured refs, dynamic grid bounds).
    """
    if site.eqn is None:
        return ()
    count = len(site.eqn.invars)
    if site.primitive in MESH_KERNELS and site.primitive != "core_map":
        return tuple(range(count))  # `pl.kernel`, `plgpu.kernel`: the inputs, in order
    grid_mapping = site.params.get("grid_mapping")
    if site.primitive != PALLAS_CALL or grid_mapping is None:
        return (None,) * count
    operands = int(grid_mapping.num_index_operands) + int(grid_mapping.num_inputs)
    if count < operands:
        return (None,) * count
    # The operands come last: pallas_call binds captured refs and grid bounds first.
    return (None,) * (count - operands) + tuple(range(operands))


def primitives_outside_kernels(closed_jaxpr: Any) -> list[str]:
    """The primitives a program runs outside its Pallas kernels, in program order.

    Sub-programs (`jit`, `cond`, `scan` bodies ...) are entered; kernel bodies are not.
    Each primitive is named once.
    """
    found: list[str] = []

    def walk(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name == PALLAS_CALL or name in MESH_KERNELS:
                continue
            if name not in found:
                found.append(name)
            for sub in jax_core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(inner_jaxpr(closed_jaxpr))
    return found


def mesh_of(params: dict[str, Any]) -> Any:
    """The mesh a mesh kernel runs on (the first, for several)."""
    return params["meshes"][0] if "meshes" in params else params["mesh"]


def mesh_backend(mesh: Any) -> str:
    """The backend a Pallas mesh belongs to: "mosaic_gpu", "mosaic_tpu" or ""."""
    module = type(mesh).__module__
    if "mosaic_gpu" in module or "triton" in module:
        return "mosaic_gpu"
    if "pallas.mosaic" in module:  # TensorCoreMesh, the SparseCore meshes
        return "mosaic_tpu"
    return ""
