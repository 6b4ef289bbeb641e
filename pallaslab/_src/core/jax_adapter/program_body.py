"""A kernel body as a pure function of program ids and block values, for the emulator.

Pallas' own state discharge, with `program_id` / `num_programs` resolved to explicit
inputs (loops and branches that read them rebuilt over Python functions), and what the
body writes and what those writes depend on (scratch state carried between programs,
blocks read on entry).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter.body_eval import (
    bind,
    eqn_site,
    evaluate_eqns,
    hlo_interpreter,
    inner_aval,
    pallas_core,
    physical_dtype,
)
from pallaslab._src.core.jax_adapter.host_prints import (
    HOST_PRINTS,
    is_host_print,
    rolled_host_print,
)
from pallaslab._src.core.jax_adapter.instrument import uses_grid
from pallaslab._src.core.jax_adapter.loop_budget import bounded_while_loop
from pallaslab._src.core.jax_adapter.probes import jax_core, source_info_util

try:
    from jax._src import linear_util
    from jax._src.interpreters import partial_eval
except ImportError:  # pragma: no cover - loops of interpreted kernels stay unbounded
    linear_util = None  # type: ignore[assignment]
    partial_eval = None  # type: ignore[assignment]
from pallaslab._src.core.jax_adapter.shapes import (
    call_body,
    closed_parts,
    discharge,
    inner_jaxpr,
    scan_counts,
    with_consts,
)


@dataclasses.dataclass(frozen=True)
class ProgramBody:
    """One program of a kernel, as a pure function.

    `fn(pids, scalars, blocks, scratch)` returns `(blocks, scratch)`: the final value of
    every blocked input and output block, and of every scratch buffer. `pids` is one
    int32 scalar per grid axis.

    Attributes:
        fn: The function.
        written: Per blocked operand (inputs, then outputs), whether the body can change
            its block.
        scratch_carries: Whether any block the body writes can depend on the value
            scratch buffers hold when the program starts (state carried between
            programs).
        reads_initial_block: Per blocked operand, whether what the body writes can
            depend on the block's value on entry.
    """

    fn: Callable[..., tuple[list[Any], list[Any]]]
    written: tuple[bool, ...]
    scratch_carries: bool
    reads_initial_block: tuple[bool, ...]


def program_body(params: dict[str, Any], grid: tuple[int, ...]) -> ProgramBody:
    jaxpr = params["jaxpr"]
    mapping = params["grid_mapping"]
    vmapped = set(mapping.vmapped_dims)

    # Physicalise and discharge as Pallas' interpreter does; program_id and
    # num_programs stay primitives there, even inside loops and branches.
    with mapping.trace_env():
        physical, consts = hlo_interpreter.resolve_physical_types(jaxpr, ())
        discharged, discharged_consts = closed_parts(
            discharge(with_consts(inner_jaxpr(physical), consts))
        )

    def traced(pids: Sequence[Any], *values: Any) -> list[Any]:
        if mapping.local_grid_env is not None:
            env = mapping.local_grid_env(tuple(pids), grid)
        else:
            env = tuple(
                pallas_core.GridAxis(pids[d], grid[d]) for d in range(len(grid)) if d not in vmapped
            )
        return _eval_with_grid(discharged, discharged_consts, values, env)

    pid_avals = [jax.ShapeDtypeStruct((), jnp.int32) for _ in grid]
    value_avals = []
    for var in jaxpr.invars:
        aval = inner_aval(var.aval)
        value_avals.append(jax.ShapeDtypeStruct(aval.shape, physical_dtype(aval.dtype)))
    closed = jax.make_jaxpr(traced)(pid_avals, *value_avals)
    num_scalars = int(mapping.num_index_operands)
    num_blocks = len(mapping.block_mappings)
    body = inner_jaxpr(closed)
    value_invars = body.invars[len(grid) :]
    if len(body.outvars) != len(value_invars):
        raise NotImplementedError("the discharged kernel body does not return every buffer")
    block_in = value_invars[num_scalars : num_scalars + num_blocks]
    block_out = body.outvars[num_scalars : num_scalars + num_blocks]
    scratch_in = value_invars[num_scalars + num_blocks :]
    changed = [o is not i for o, i in zip(block_out, block_in, strict=True)]
    # A load can leave a rebuilt (but equal) value behind after discharge: trust the
    # kernel's own write effects, falling back to the discharged dataflow.
    effects = _written_refs(jaxpr)
    if effects is not None:
        changed = [c and (num_scalars + k) in effects for k, c in enumerate(changed)]
    written = tuple(changed)
    written_outs = [o for o, w in zip(block_out, written, strict=True) if w]
    depends = _dependencies(body, written_outs)
    scratch_carries = any(v in depends for v in scratch_in)
    reads_initial = tuple(v in depends for v in block_in)
    run = jax_core.jaxpr_as_fun(closed)

    def fn(
        pids: Sequence[Any], scalars: Sequence[Any], blocks: Sequence[Any], scratch: Sequence[Any]
    ) -> tuple[list[Any], list[Any]]:
        outs = run(*pids, *scalars, *blocks, *scratch)
        return list(outs[num_scalars : num_scalars + num_blocks]), list(
            outs[num_scalars + num_blocks :]
        )

    return ProgramBody(fn, written, scratch_carries, reads_initial)


def _written_refs(jaxpr: Any) -> set[int] | None:
    """Positions of the ref arguments the kernel writes, from its state effects.

    None when the effects cannot be read.
    """
    try:
        from jax._src.state import types as state_types  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return None
    positions = {v: k for k, v in enumerate(jaxpr.invars)}
    found: set[int] = set()
    for effect in jaxpr.effects:
        if not isinstance(effect, (state_types.WriteEffect, state_types.AccumEffect)):
            continue
        target = getattr(effect, "input", getattr(effect, "input_index", None))
        if isinstance(target, (int, np.integer)):
            found.add(int(target))
        elif target in positions:
            found.add(positions[target])
        else:
            return None
    return found


def _eval_with_grid(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], env: Any) -> list[Any]:
    """Evaluates a discharged kernel body, program ids read from `env`.

    `env` is a sequence of `GridAxis`, as Pallas' grid environment holds; None leaves
    program ids (and prints) as they are, for a body that is traced again as a kernel
    (`bounded_kernel_jaxpr`).

    Loops and branches whose bodies ask for program ids, loop with `while` or print
    are rebuilt with `lax.scan`, `lax.while_loop` (bounded by the run budget) and
    `lax.switch` over Python functions, so the ids reach them as ordinary closed-over
    values; calls are inlined. Everything else is bound as is.
    """

    def apply(eqn: Any, inputs: list[Any]) -> list[Any]:
        name = eqn.primitive.name
        if env is not None and name == "program_id":
            return [jnp.asarray(env[eqn.params["axis"]].index, jnp.int32)]
        if env is not None and name == "num_programs":
            return [jnp.asarray(env[eqn.params["axis"]].size, jnp.int32)]
        if env is not None and is_host_print(eqn):  # JAX would unroll it per program
            return rolled_host_print(eqn, inputs)
        if name == "while" or any(
            _rebuilt_inside(sub) for sub in jax_core.jaxprs_in_params(eqn.params)
        ):
            return _eval_higher_order(eqn, inputs, env)
        with source_info_util.user_context(eqn.source_info.traceback), eqn.ctx.manager:
            return bind(eqn, inputs)

    bindings = [*zip(jaxpr.constvars, consts, strict=True)]
    bindings += zip(jaxpr.invars, args, strict=True)
    return evaluate_eqns(jaxpr, bindings, apply)


# Primitives the evaluator binds its own way (besides reading program ids).
_REBUILT = frozenset({"while", *HOST_PRINTS})


def _rebuilt_inside(jaxpr: Any) -> bool:
    """Whether the evaluator must rebuild an equation holding `jaxpr`.

    It must when the body reads program ids, loops with `while` (bounded by the run
    budget) or prints (printed once per program without unrolling), at any depth.
    """
    if uses_grid(jaxpr):
        return True
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name in _REBUILT:
            return True
        if any(_rebuilt_inside(sub) for sub in jax_core.jaxprs_in_params(eqn.params)):
            return True
    return False


def _closed_fn(closed: Any, env: Any) -> Callable[..., list[Any]]:
    inner, consts = closed_parts(closed)
    return lambda *args: _eval_with_grid(inner, consts, args, env)


def _eval_higher_order(eqn: Any, inputs: list[Any], env: Any) -> list[Any]:
    name = eqn.primitive.name
    params = eqn.params
    if name == "scan":
        body = _closed_fn(params["jaxpr"], env)
        num_consts, num_carry = scan_counts(params)
        consts = inputs[:num_consts]
        carry = inputs[num_consts : num_consts + num_carry]
        xs = inputs[num_consts + num_carry :]

        def scan_body(c: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
            outs = body(*consts, *c, *x)
            return list(outs[:num_carry]), list(outs[num_carry:])

        final, ys = jax.lax.scan(
            scan_body,
            list(carry),
            list(xs),
            length=params["length"],
            reverse=params["reverse"],
            unroll=params.get("unroll", 1),
        )
        return [*final, *ys]
    if name == "while":
        cond = _closed_fn(params["cond_jaxpr"], env)
        body = _closed_fn(params["body_jaxpr"], env)
        cond_n, body_n = params["cond_nconsts"], params["body_nconsts"]
        cond_consts = inputs[:cond_n]
        body_consts = inputs[cond_n : cond_n + body_n]
        init = inputs[cond_n + body_n :]
        # Bounded by the run budget: a loop that never ends can be stopped.
        return list(
            bounded_while_loop(
                lambda c: cond(*cond_consts, *c)[0],
                lambda c: list(body(*body_consts, *c)),
                list(init),
                eqn_site(eqn),
            )
        )
    if name == "cond":
        branches = [_closed_fn(b, env) for b in params["branches"]]
        index, *operands = inputs
        # Operands are closed over, not passed: refs may be among them.
        return list(jax.lax.switch(index, [lambda f=f: list(f(*operands)) for f in branches]))
    # Calls (jit, closed_call / eval_jaxpr, custom derivatives, checkpoints ...): inline
    # the body.
    sub = call_body(params)
    if sub is not None:
        return list(_closed_fn(sub, env)(*inputs))
    if not any(uses_grid(sub) for sub in jax_core.jaxprs_in_params(params)):
        # Only loops or prints inside something the evaluator cannot rebuild: bound as
        # is (its loops unbounded, its prints JAX's).
        with source_info_util.user_context(eqn.source_info.traceback), eqn.ctx.manager:
            return bind(eqn, inputs)
    raise NotImplementedError(f"program ids inside {name} are not supported by the emulator")


def _dependencies(jaxpr: Any, targets: Sequence[Any]) -> set[Any]:
    """The variables `targets` may depend on.

    Walks equations backwards; every output of an equation depends on all its inputs,
    except that a crop of a `dynamic_update_slice` lying wholly inside the update
    (how Pallas discharges a store of a whole block) depends on the update only.
    """
    producers = {o: eqn for eqn in jaxpr.eqns for o in eqn.outvars}
    needed = {t for t in targets if not isinstance(t, jax_core.Literal)}
    for eqn in reversed(jaxpr.eqns):
        if any(o in needed for o in eqn.outvars):
            inputs = _overwritten_crop_inputs(eqn, producers) or eqn.invars
            needed.update(v for v in inputs if not isinstance(v, jax_core.Literal))
    return needed


def _overwritten_crop_inputs(eqn: Any, producers: dict[Any, Any]) -> list[Any] | None:
    """The inputs a crop of an overwritten region really reads, when it is one.

    For `pad` with non-positive padding (a crop) of a `dynamic_update_slice` at constant
    indices whose update covers the crop: the update (all the crop reads); else None.
    """
    if eqn.primitive.name != "pad" or eqn.invars[0] not in producers:
        return None
    config = eqn.params["padding_config"]
    if any(lo > 0 or hi > 0 or interior != 0 for lo, hi, interior in config):
        return None
    update_eqn = producers[eqn.invars[0]]
    if update_eqn.primitive.name != "dynamic_update_slice":
        return None
    operand, update, *indices = update_eqn.invars
    if not all(isinstance(i, jax_core.Literal) for i in indices):
        return None
    shape = operand.aval.shape
    for (lo, hi, _), index, size, extent in zip(
        config, (int(i.val) for i in indices), update.aval.shape, shape, strict=True
    ):
        start = min(max(index, 0), extent - size)  # dynamic_update_slice clamps
        if not (start <= -lo and extent + hi <= start + size):
            return None
    return [update]


@functools.lru_cache(maxsize=64)
def bounded_kernel_jaxpr(jaxpr: Any) -> Any:
    """A kernel's jaxpr (refs and all) with its `while` loops bounded by the run budget.

    For Pallas' own interpreter, which evaluates the kernel as given: the same
    equations, traced again with every `while` loop (also inside branches, scans and
    other loops) made a `bounded_while_loop`. The jaxpr itself when it has no loop,
    or when tracing it again would need constants a kernel cannot take.
    """
    if partial_eval is None or not _has_while(jaxpr):
        return jaxpr

    def again(*args: Any) -> list[Any]:
        return _eval_with_grid(jaxpr, (), args, None)

    debug_info = getattr(jaxpr, "debug_info", None)
    wrapped = (
        linear_util.wrap_init(again, debug_info=debug_info)
        if debug_info is not None
        else linear_util.wrap_init(again)  # type: ignore[call-arg]
    )
    traced, _, consts = partial_eval.trace_to_jaxpr_dynamic(wrapped, [v.aval for v in jaxpr.invars])
    return jaxpr if consts or jaxpr.constvars else traced


def _has_while(jaxpr: Any) -> bool:
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name == "while":
            return True
        if any(_has_while(sub) for sub in jax_core.jaxprs_in_params(eqn.params)):
            return True
    return False
