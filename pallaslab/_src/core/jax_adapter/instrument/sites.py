"""Finding a kernel body's access sites (its loads and stores) and the ref each touches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pallaslab._src.core.jax_adapter.body_eval import eqn_site
from pallaslab._src.core.jax_adapter.instrument.records import AccessSite
from pallaslab._src.core.jax_adapter.probes import jax_core, tree_util

# Primitives that load or store through a ref, and what they do to it.
_KINDS = {
    "get": "load",
    "masked_load": "load",
    "swap": "store",
    "masked_swap": "store",
    "addupdate": "update",
    "atomic_rmw": "atomic",
}


def find_sites(jaxpr: Any) -> tuple[list[AccessSite], dict[int, AccessSite]]:
    sites: list[AccessSite] = []
    by_eqn: dict[int, AccessSite] = {}

    def walk(inner: Any, refs: dict[Any, int]) -> None:
        for eqn in inner.eqns:
            name = eqn.primitive.name
            if name in _KINDS:
                ref_var = eqn.invars[0]
                masked, other, dynamic = _access_facts(eqn)
                file, line = eqn_site(eqn)
                site = AccessSite(
                    index=len(sites),
                    kind=_KINDS[name],
                    primitive=name,
                    ref=refs.get(ref_var, -2),
                    masked=masked,
                    other=other,
                    dynamic=dynamic,
                    file=file,
                    line=line,
                )
                sites.append(site)
                by_eqn[id(eqn)] = site
                continue
            for sub, mapping in _sub_bindings(eqn, refs):
                walk(sub, mapping)

    walk(jaxpr, {v: k for k, v in enumerate(jaxpr.invars)})
    return sites, by_eqn


def _access_facts(eqn: Any) -> tuple[bool, bool, bool]:
    """(masked, has other, any index dynamic) of an access equation."""
    name = eqn.primitive.name
    masked = other = False
    if name in ("masked_load", "masked_swap", "atomic_rmw"):
        unflat = tree_util.tree_unflatten(eqn.params["args_tree"], list(eqn.invars))
        if name == "masked_load":
            _, transforms, mask, value = unflat
            other = value is not None
        else:
            _, transforms, _, mask = unflat
        masked = mask is not None
        leaves = tree_util.tree_leaves(transforms)
    else:
        skip = 1 if name == "get" else 2
        leaves = list(eqn.invars[skip:])
    dynamic = any(not isinstance(v, jax_core.Literal) for v in leaves)
    return masked, other, dynamic


def _sub_bindings(eqn: Any, refs: dict[Any, int]) -> list[tuple[Any, dict[Any, int]]]:
    """Sub-jaxprs of an equation, each with its invars mapped to the refs they hold."""
    name = eqn.primitive.name
    params = eqn.params

    def bound(inner: Any, outer: Sequence[Any]) -> dict[Any, int]:
        return {
            v: refs[o]
            for v, o in zip(inner.invars, outer, strict=False)
            if not isinstance(o, jax_core.Literal) and o in refs
        }

    if name == "scan":
        body = params["jaxpr"].jaxpr
        return [(body, bound(body, eqn.invars))]
    if name == "while":
        cond, body = params["cond_jaxpr"].jaxpr, params["body_jaxpr"].jaxpr
        nc, nb = int(params["cond_nconsts"]), int(params["body_nconsts"])
        carry = list(eqn.invars[nc + nb :])
        return [
            (cond, bound(cond, [*eqn.invars[:nc], *carry])),
            (body, bound(body, [*eqn.invars[nc : nc + nb], *carry])),
        ]
    if name == "cond":
        return [(b.jaxpr, bound(b.jaxpr, eqn.invars[1:])) for b in params["branches"]]
    if name == "run_scoped":
        body = params["jaxpr"]
        mapping = {
            v: refs[o]
            for v, o in zip(body.constvars, eqn.invars, strict=False)
            if not isinstance(o, jax_core.Literal) and o in refs
        }
        mapping.update(dict.fromkeys(body.invars, -1))
        return [(body, mapping)]
    found = []
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = params.get(key)
        inner = getattr(sub, "jaxpr", sub)
        if inner is not None and hasattr(inner, "eqns"):
            found.append((inner, bound(inner, eqn.invars)))
            break
    return found


_GRID_PRIMITIVES = frozenset({"program_id", "num_programs"})


def uses_grid(jaxpr: Any) -> bool:
    """Whether a jaxpr (or one inside it) reads the grid: `program_id`, `num_programs`."""
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name in _GRID_PRIMITIVES:
            return True
        if any(uses_grid(sub) for sub in jax_core.jaxprs_in_params(eqn.params)):
            return True
    return False
