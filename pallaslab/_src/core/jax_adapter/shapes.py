"""Private JAX shapes (and behaviours) that moved between versions, read one way.

Each function probes the shape in front of it (never the version number), so one
pallaslab reads jax 0.10.2 through the newest. What moved, and where each form is
pinned (tests/test_jax_adapter.py, `TestVersionShapes`):

- Closed jaxprs: a `ClosedJaxpr` wrapping a `Jaxpr` (0.10), or one `Jaxpr` class with
  its const values attached (0.11: `ClosedJaxpr` is an alias and `.jaxpr` returns the
  object itself, both marked for removal). `closed_parts` / `with_consts`.
- `scan` params: `num_consts` / `num_carry` (0.10), or the flat trees `ft_in` /
  `ft_out` whose unpacked parts are (consts, carry, xs) and (carry, ys) (0.11).
  `scan_counts`.
- Call-like primitives: `closed_call` / `core_call` (0.10, 0.11), or the
  `eval_jaxpr` primitive taking `call_jaxpr` (newer). `call_body`.
- `run_scoped`: its jaxpr's leading inputs are the refs it closes over, bound as the
  equation's inputs; they are constvars without values (0.10), constvars with the
  outer trace's tracers attached as consts (0.11), or, once constvars mean only the
  inputs carrying values, plain leading invars. `scoped_refs`.
- Named grids under `jax.vmap`: the grid gains leading axes while `grid_names` keeps
  one name per original axis (0.10, 0.11), or gains a `None` per vmapped axis (newer).
  `grid_axis_names`.
- Kernel bodies are traced through `partial_eval.trace_to_jaxpr`, memoized on the
  kernel function and its block types but not on the grid (0.11 and main; 0.10
  traced afresh): a kernel function reused with another grid gets the body traced
  for the first, `pl.num_programs` of that grid folded in. `forget_kernel_traces`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from pallaslab._src.core.jax_adapter.probes import jax_core

try:
    from jax._src.interpreters import partial_eval
except ImportError:  # pragma: no cover
    partial_eval = None  # type: ignore[assignment]

# Param names under which call-like primitives keep their body, in the order tried.
CALL_BODY_KEYS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


def closed_parts(closed: Any) -> tuple[Any, list[Any]]:
    """The jaxpr to walk and the values of its constvars.

    Takes a 0.10 `ClosedJaxpr`, a 0.11 `Jaxpr` with consts attached, or an open
    `Jaxpr` (no consts).
    """
    inner = getattr(closed, "jaxpr", closed)
    consts = getattr(closed, "consts", None)
    return inner, list(consts) if consts is not None else []


def inner_jaxpr(closed: Any) -> Any:
    """The jaxpr of a closed jaxpr (itself once the two classes are one)."""
    return getattr(closed, "jaxpr", closed)


def with_consts(jaxpr: Any, consts: Sequence[Any]) -> Any:
    """`jaxpr` closed over `consts`, in this JAX's form."""
    attach = getattr(jaxpr, "with_consts", None)
    if attach is not None:  # one Jaxpr class (0.11+)
        return attach(list(consts))
    return jax_core.ClosedJaxpr(jaxpr, list(consts))


def discharge(closed: Any) -> Any:
    """`state.discharge.discharge_state(closed)`, as Pallas' interpreter discharges.

    From jax 0.12 discharged values keep their refs' memory spaces unless told to strip
    them (`strip_memory_space=True`, as Pallas' interpreter asks): primitives such as
    `pad` and `broadcast_in_dim` then refuse them ("unknown memory_space type"). Before,
    discharge stripped them without the keyword.
    """
    from jax._src.state import discharge as state_discharge  # noqa: PLC0415 - probed

    run: Any = state_discharge.discharge_state
    if "strip_memory_space" in inspect.signature(run).parameters:
        return run(closed, strip_memory_space=True)
    return run(closed)


def scan_counts(params: dict[str, Any]) -> tuple[int, int]:
    """(consts, carry) counts of a `scan` equation; its other inputs are the xs."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def call_body(params: dict[str, Any]) -> Any:
    """The body of a call-like equation (a closed or open jaxpr), or None."""
    for key in CALL_BODY_KEYS:
        body = params.get(key)
        if body is not None and hasattr(inner_jaxpr(body), "eqns"):
            return body
    return None


def scoped_refs(eqn: Any) -> tuple[list[Any], list[Any]]:
    """A `run_scoped` equation's body inputs: (the refs it closes over, those it allocates).

    The closed-over refs are the equation's inputs, one to one and first, whatever
    this JAX calls them (constvars with or without values attached, or invars).
    """
    body = inner_jaxpr(eqn.params["jaxpr"])
    inputs = [*body.constvars, *body.invars]
    count = len(eqn.invars)
    return inputs[:count], inputs[count:]


def grid_axis_names(
    names: Sequence[Any] | None, rank: int, vmapped_dims: Sequence[int]
) -> tuple[str, ...] | None:
    """One name per grid axis ("" for an unnamed one, such as an axis `vmap` added).

    None when the grid has no names.
    """
    if not names:
        return None
    texts = ["" if n is None else str(n) for n in names]
    if len(texts) < rank:  # the vmapped axes carry no name at all
        vmapped = set(vmapped_dims)
        rest = iter(texts)
        texts = ["" if d in vmapped else next(rest, "") for d in range(rank)]
    return tuple(texts)


def forget_kernel_traces() -> None:
    """Drops JAX's memoized traces, so each kernel body is traced for its own grid.

    JAX's memo of `trace_to_jaxpr` (0.11+) does not key kernel bodies on the grid they
    were traced in: `pl.num_programs(axis)` (folded to a constant while tracing) would
    keep the first grid's value when the same kernel function runs on another grid
    with the same blocks, and the kernel would compute wrong results. Called before
    pallaslab traces a program; on JAX without the memo it does nothing.
    """
    clear = getattr(getattr(partial_eval, "trace_to_jaxpr", None), "cache_clear", None)
    if clear is not None:
        clear()
