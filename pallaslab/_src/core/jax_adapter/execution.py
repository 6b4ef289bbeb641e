"""Running kernels: interpret mode on CPU, recording binds, prefetch values."""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core.jax_adapter import gpu_interpret, observe, probes
from pallaslab._src.core.jax_adapter.kernels import KernelSite, mesh_backend, mesh_of
from pallaslab._src.core.jax_adapter.kernels.convert import backend_of
from pallaslab._src.core.jax_adapter.probes import (
    CALL_PRIMITIVES,
    PALLAS_CALL,
    feature_notice,
    jax_core,
    mlir_module,
    pallas_call_module,
    source_info_util,
    trace_state,
)
from pallaslab._src.core.jax_adapter.program_body import bounded_kernel_jaxpr
from pallaslab._src.core.jax_adapter.shapes import call_body, closed_parts

_auto_interpret = threading.local()
# Whether kernels lowered for CPU without an interpreter run emulated, where no
# `auto_interpret` block says otherwise: True, except while a test suite is observed
# (`pytest --pallaslab` changes no test's outcome: JAX's own error stands).
_auto_default = True


# Whether mesh kernels bound on a CPU get an interpreter (see `mesh_interpret`): in the
# trace context, so a function traced to be inspected is traced again to be run.
_MESH_INTERPRET = trace_state("pallaslab_mesh_interpret", True)
_cpu_rule_installed = False
_platform_rules: set[str] = set()
# pallaslab's emulator (core/emulator/hook.py registers it): given a pallas_call's params,
# its input avals and whether kernels should run on CPU at all, it returns a function
# computing the outputs, "interpret" for Pallas' interpreter, or None to leave the call
# to JAX.
_emulator: Callable[[dict[str, Any], Sequence[Any], bool], Any] | None = None
_emulator_failed: Callable[[dict[str, Any], BaseException], None] | None = None


def set_emulator(
    hook: Callable[[dict[str, Any], Sequence[Any], bool], Any],
    on_failure: Callable[[dict[str, Any], BaseException], None] | None = None,
) -> None:
    """Registers the emulator consulted for every pallas_call lowered.

    `on_failure` hears about a kernel the emulator failed to build; Pallas' interpreter
    then runs it.
    """
    global _emulator, _emulator_failed  # noqa: PLW0603
    _emulator = hook
    _emulator_failed = on_failure


def _lowering_rule(platform: str) -> Callable[..., Any]:
    assert pallas_call_module is not None
    assert mlir_module is not None
    jax_rule = pallas_call_module._pallas_call_lowering
    lower_fun = mlir_module.lower_fun

    def rule(ctx: Any, *in_nodes: Any, interpret: Any, **params: Any) -> Any:
        auto = platform == "cpu" and _auto_on()
        choice = (
            _emulator(dict(params, interpret=interpret), tuple(ctx.avals_in), auto)
            if _emulator is not None
            else None
        )
        if callable(choice):
            try:
                return lower_fun(choice, multiple_results=True)(ctx, *in_nodes)
            except Exception as error:  # never worse than Pallas' own interpreter
                if _emulator_failed is not None:
                    _emulator_failed(params, error)
                choice = "interpret"
        if choice == "interpret" or (auto and not interpret):
            interpret = interpret or True
        if interpret is True:
            params = _bounded_loops(params)
        outputs = jax_rule(ctx, *in_nodes, interpret=interpret, **params)
        if observe.observing():
            observe.after_lowering(
                ctx,
                PALLAS_CALL,
                dict(params, interpret=interpret),
                in_nodes,
                outputs,
                platform=platform,
            )
        return outputs

    return rule


def _bounded_loops(params: dict[str, Any]) -> dict[str, Any]:
    """The call's parameters with its kernel's loops bounded by the run budget.

    Pallas' interpreter runs the kernel as given: its `while` loops are made ones the
    budget (and an interrupt) can stop. A kernel that cannot be traced again keeps
    its loops as they are.
    """
    try:
        bounded = bounded_kernel_jaxpr(params["jaxpr"])
    except Exception:  # never worse than the interpreter with the kernel as given
        return params
    return params if bounded is params["jaxpr"] else dict(params, jaxpr=bounded)


def install_cpu_interpret() -> str | None:
    """Lets `pallas_call` run on CPU: emulated, or in Pallas' interpreter.

    JAX refuses to lower a `pallas_call` for CPU unless `interpret=True` was passed;
    while `auto_interpret` is on, pallaslab lowers such calls through its emulator
    (when registered with `set_emulator`) or JAX's own interpreter instead. Returns a
    notice when this JAX cannot do that.
    """
    global _cpu_rule_installed  # noqa: PLW0603
    notice = feature_notice("cpu-interpret")
    if notice or _cpu_rule_installed:
        return notice
    assert pallas_call_module is not None
    assert mlir_module is not None
    mlir_module.register_lowering(
        pallas_call_module.pallas_call_p, _lowering_rule("cpu"), platform="cpu"
    )
    _install_mesh_interpret()
    _install_pallas_call_gpu_interpret()
    _install_observed_mpmd_map()
    _cpu_rule_installed = True
    return None


def _install_mesh_interpret() -> None:
    """Lets mesh kernels (`pl.kernel`, `pl.core_map`) bound on a CPU run interpreted.

    JAX lowers a mesh kernel for CPU only when it asked for an interpreter, and the
    interpreter's effects are fixed when the kernel is bound: so the choice is made
    there. A kernel on a TPU mesh that asked for none gets Pallas' TPU interpreter
    (`pltpu.InterpretParams`, faithful to TPU memory spaces, DMAs and semaphores), one
    on a GPU mesh JAX's Mosaic GPU interpreter (also instead of Pallas' generic one,
    which cannot run it), one on another mesh Pallas' interpreter; never while
    `auto_interpret` is off.
    """
    for primitive in mesh_primitives():
        if "bind" in vars(primitive):
            continue
        inner = types.MethodType(type(primitive).bind, primitive)

        def bind(*args: Any, _inner: Any = inner, **params: Any) -> Any:
            asked = params.get("interpret")
            gpu = mesh_backend(mesh_of(params)) == "mosaic_gpu"
            if (not asked or (asked is True and gpu)) and _auto_mesh_interpret():
                params = dict(params, interpret=mesh_interpreter(params))
            return _inner(*args, **params)

        primitive.bind = bind


def _install_pallas_call_gpu_interpret() -> None:
    """Lets `pallas_call`s with Mosaic GPU compiler params run in JAX's Mosaic GPU interpreter.

    As for mesh kernels, the interpreter is chosen when the kernel is bound (its
    effects are fixed there): on a CPU, under `auto_interpret`, a kernel with Mosaic
    GPU params that takes its arrays whole (the interpreter has no BlockSpec windows;
    kernels with windows stay with pallaslab's emulator) is bound with the
    interpreter's params and what `pallas_call` passes along with them, the
    transforms (tiling, swizzle) of its kernel arguments.
    """
    assert pallas_call_module is not None
    primitive: Any = pallas_call_module.pallas_call_p
    if "bind" in vars(primitive):
        return
    inner = types.MethodType(type(primitive).bind, primitive)

    def bind(*args: Any, **params: Any) -> Any:
        if getattr(_preferred, "mosaic_gpu", False) and params.get("compiler_params") is None:
            params = dict(params, compiler_params=_mosaic_gpu_params())
        if gpu_interpreted_params(params) and _auto_mesh_interpret():
            params = dict(
                params,
                interpret=gpu_interpret.make_params(**gpu_interpret_options()),
                kernel_arg_transforms=_kernel_arg_transforms(params["grid_mapping"]),
            )
        return inner(*args, **params)

    primitive.bind = bind


# Kernels without compiler params bound in `prefer_mosaic_gpu()`: lowered with Mosaic GPU.
_preferred = threading.local()


@contextlib.contextmanager
def prefer_mosaic_gpu() -> Iterator[None]:
    """Within the block, `pallas_call`s bound without compiler params get Mosaic GPU's.

    What `jax_pallas_use_mosaic_gpu` did for a GPU lowering up to jax 0.11; jax 0.12
    has no such switch (a kernel without params lowers with Triton), so the choice is
    made where the kernel is bound.
    """
    _install_pallas_call_gpu_interpret()
    previous = getattr(_preferred, "mosaic_gpu", False)
    _preferred.mosaic_gpu = True
    try:
        yield
    finally:
        _preferred.mosaic_gpu = previous


def _mosaic_gpu_params() -> Any:
    module = probes.optional_module("jax.experimental.pallas.mosaic_gpu")
    return module.CompilerParams()


def gpu_interpreted_params(params: dict[str, Any]) -> bool:
    """Whether a `pallas_call` bound with these params runs in the Mosaic GPU interpreter.

    Off a GPU: Mosaic GPU compiler params, whole arrays, no interpreter of its own.
    """
    asked = params.get("interpret")
    if asked and asked is not True:
        return gpu_interpret.is_params(asked)
    mapping = params.get("grid_mapping")
    return (
        backend_of(params.get("compiler_params")) == "mosaic_gpu"
        and gpu_interpret.params_class() is not None
        and mapping is not None
        and not getattr(mapping, "num_index_operands", 0)
        and all(_whole(bm) for bm in mapping.block_mappings)
    )


def gpu_interpreted(site: KernelSite) -> bool:
    """Whether a kernel, as bound, runs in JAX's Mosaic GPU interpreter."""
    return gpu_interpret.is_params(site.params.get("interpret"))


def _whole(block_mapping: Any) -> bool:
    try:
        return bool(block_mapping.has_trivial_window())
    except Exception:  # a mapping this JAX cannot judge: not whole
        return False


def _kernel_arg_transforms(mapping: Any) -> tuple[tuple[Any, ...], ...]:
    """Per kernel argument (prefetch, inputs, outputs, scratch), its ref's transforms."""
    refs = [bm.ref_aval for bm in mapping.block_mappings] + list(mapping.scratch_avals)
    leading: list[tuple[Any, ...]] = [()] * int(getattr(mapping, "num_index_operands", 0))
    return tuple(leading + [tuple(getattr(ref, "transforms", ()) or ()) for ref in refs])


def _install_observed_mpmd_map() -> None:
    """Lets the observer see `mpmd_map` kernels (`plgpu.kernel` in jax 0.10) lowered for CPU.

    JAX lowers them through `pallas_call`'s lowering function directly, not through
    `pallas_call`'s registered rule; this rule lowers them as JAX does, then tells the
    observer (`observe.after_lowering`).
    """
    mpmd = probes.optional_module("jax._src.pallas.mpmd")
    primitive = getattr(mpmd, "mpmd_map_p", None)
    jax_rule = _registered_rule(primitive)
    if primitive is None or jax_rule is None or mlir_module is None:
        return

    def rule(ctx: Any, *in_nodes: Any, **params: Any) -> Any:
        outputs = jax_rule(ctx, *in_nodes, **params)
        if observe.observing():
            observe.after_lowering(ctx, primitive.name, params, in_nodes, outputs, platform="cpu")
        return outputs

    mlir_module.register_lowering(primitive, rule, platform="cpu")


def _registered_rule(primitive: Any) -> Any:
    """JAX's own lowering rule of `primitive` for every platform, or None.

    Read from JAX's registry: the module's name for it (`mpmd._mpmd_map_lowering`) is
    None, since JAX registers it with a decorator that returns nothing.
    """
    if primitive is None or mlir_module is None:
        return None
    entry = getattr(mlir_module, "_lowerings", {}).get(primitive)
    rule = getattr(entry, "rule", entry)
    return rule if callable(rule) else None


def _auto_on() -> bool:
    return bool(getattr(_auto_interpret, "on", _auto_default))


def set_auto_interpret_default(on: bool) -> bool:
    """Sets whether CPU kernels run emulated outside `auto_interpret` blocks; the old value."""
    global _auto_default
    previous, _auto_default = _auto_default, bool(on)
    return previous


def _auto_mesh_interpret() -> bool:
    return (
        _auto_on()
        and (_MESH_INTERPRET is None or bool(_MESH_INTERPRET.value))
        and jax.default_backend() == "cpu"
    )


# How the Mosaic GPU interpreter runs kernels bound now (in the trace context: a run
# with other options traces again): (detect races, what out-of-bounds reads do).
_GPU_INTERPRET = trace_state("pallaslab_gpu_interpret", (True, "raise"))


def gpu_interpret_options() -> dict[str, Any]:
    """The Mosaic GPU interpreter's options for kernels bound now."""
    races, reads = _GPU_INTERPRET.value if _GPU_INTERPRET is not None else (True, "raise")
    return {"detect_races": races, "out_of_bounds_reads": reads}


@contextlib.contextmanager
def gpu_interpret_scope(
    *, detect_races: bool = True, out_of_bounds_reads: str = "raise"
) -> Iterator[None]:
    """Within the block, Mosaic GPU kernels bound on a CPU interpret with these options."""
    if _GPU_INTERPRET is None:  # pragma: no cover - depends on the JAX version
        yield
        return
    previous = _GPU_INTERPRET.swap_local((detect_races, out_of_bounds_reads))
    try:
        yield
    finally:
        _GPU_INTERPRET.set_local(previous)


@contextlib.contextmanager
def mesh_interpret(on: bool) -> Iterator[None]:
    """Within the block, mesh kernels bound on a CPU get an interpreter when `on`.

    Off while tracing a program to inspect it (the kernel as written) and while
    lowering for another platform (the kernel as it compiles there).
    """
    if _MESH_INTERPRET is None:  # pragma: no cover - depends on the JAX version
        yield
        return
    previous = _MESH_INTERPRET.swap_local(on)
    try:
        yield
    finally:
        _MESH_INTERPRET.set_local(previous)


def mesh_primitives() -> list[Any]:
    """The primitives mesh kernels bind (`mpmd_map`, `core_map`) this JAX has."""
    found = []
    for module_name, attribute in (
        ("jax._src.pallas.mpmd", "mpmd_map_p"),
        ("jax._src.pallas.core", "core_map_p"),
    ):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - depends on the JAX version
            continue
        primitive = getattr(module, attribute, None)
        if primitive is not None:
            found.append(primitive)
    return found


def mesh_interpreter(params: dict[str, Any]) -> Any:
    """The interpreter a mesh kernel runs in off its hardware (see above).

    Raises:
        NotImplementedError: For a GPU mesh, naming the JAX that has the Mosaic GPU
            interpreter, where this one lacks it.
    """
    if mesh_backend(mesh_of(params)) == "mosaic_gpu":
        return gpu_interpret.make_params(**gpu_interpret_options())
    if mesh_backend(mesh_of(params)) == "mosaic_tpu":
        tpu = probes.optional_module("jax.experimental.pallas.tpu")
        make = getattr(tpu, "InterpretParams", None)
        if make is not None:
            return make()
    return True


def install_platform_rule(platform: str) -> None:
    """Lets the emulator run pallas_calls lowered for another platform when asked to.

    `platform` is "cuda", "rocm" or "tpu"; without a request JAX's own rule runs them.
    """
    if platform == "cpu":
        install_cpu_interpret()
        return
    if platform in _platform_rules or feature_notice("cpu-interpret"):
        return
    assert pallas_call_module is not None
    assert mlir_module is not None
    mlir_module.register_lowering(
        pallas_call_module.pallas_call_p, _lowering_rule(platform), platform=platform
    )
    _platform_rules.add(platform)


@contextlib.contextmanager
def auto_interpret(on: bool = True) -> Iterator[None]:
    """Within the block, kernels lowered for CPU run in interpret mode when `on`."""
    previous = getattr(_auto_interpret, "on", None)
    _auto_interpret.on = on
    try:
        yield
    finally:
        if previous is None:
            del _auto_interpret.on
        else:
            _auto_interpret.on = previous


def lowering_state() -> tuple[Any, ...]:
    """What pallaslab's lowering rules do now, besides JAX's trace context.

    Whether kernels lowered for CPU run emulated/interpreted (`auto_interpret`), which
    platforms have pallaslab's rule, and the emulator hook: a compile cache keys on
    it, since the same jaxpr lowers differently under another state.
    """
    return (
        _auto_on(),
        _cpu_rule_installed,
        tuple(sorted(_platform_rules)),
        _emulator,
        _emulator_failed,
    )


# ---------------------------------------------------------------------------
# Recording the kernels a block of code binds.


@contextlib.contextmanager
def recording_kernels() -> Iterator[list[KernelSite]]:
    """Records every kernel (`pallas_call`, mesh kernel) bound while the block runs.

    Kernels inside a function that JAX already compiled are not traced again, so
    they are not seen here; callers say so when nothing was recorded.
    """
    sites: list[KernelSite] = []
    if feature_notice("record-kernels"):
        yield sites
        return
    assert pallas_call_module is not None
    with contextlib.ExitStack() as stack:
        for primitive in (pallas_call_module.pallas_call_p, *mesh_primitives()):
            stack.enter_context(_recording(primitive, sites))
        yield sites


@contextlib.contextmanager
def _recording(primitive: Any, sites: list[KernelSite]) -> Iterator[None]:
    shadowed = primitive.__dict__.get("bind")
    inner_bind = shadowed or types.MethodType(type(primitive).bind, primitive)

    def recording_bind(*args: Any, **params: Any) -> Any:
        sites.append(
            KernelSite(
                primitive=primitive.name,
                params=dict(params),
                in_avals=tuple(_aval_of(a) for a in args),
                source_info=source_info_util.current(),
                path=(),
            )
        )
        return inner_bind(*args, **params)

    primitive.bind = recording_bind
    try:
        yield
    finally:
        if shadowed is None:
            del primitive.bind
        else:
            primitive.bind = shadowed


def _not_a_failed_callback(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("jax.debug.callback failed")


@contextlib.contextmanager
def quiet_failed_callbacks() -> Iterator[None]:
    """Within the block, JAX logs no traceback for a `jax.debug.callback` that raised.

    JAX logs it (`jax._src.debugging`) and raises an error carrying the same
    traceback; pallaslab explains that error in one message naming the line, so the
    log would only print the traceback again.
    """
    logger = logging.getLogger("jax._src.debugging")
    logger.addFilter(_not_a_failed_callback)
    try:
        yield
    finally:
        logger.removeFilter(_not_a_failed_callback)


@contextlib.contextmanager
def forced_interpret(on: bool) -> Iterator[None]:
    """Within the block (when `on`), every `pallas_call` traced runs in interpret mode.

    Uses JAX's own interpret-mode switch, which is part of the jit cache key, so
    functions compiled before are traced again under it.
    """
    config = getattr(getattr(jax, "_src", None), "config", None)
    switch = getattr(config, "pallas_tpu_interpret_mode_context_manager", None)
    if not on or switch is None:
        yield
        return
    previous = switch.swap_local(True)
    try:
        yield
    finally:
        switch.set_local(previous)


def site_prefetch_count(site: KernelSite) -> int:
    """How many scalar-prefetch operands the kernel takes (0 for mesh kernels)."""
    mapping = site.params.get("grid_mapping")
    return int(getattr(mapping, "num_index_operands", 0) or 0)


def kernel_inputs(site: KernelSite, program: Any, leaves: Sequence[Any]) -> list[Any] | None:
    """The values a kernel is bound to when the program runs on `leaves`.

    Evaluates the program's equations up to the kernel, one by one (descending into
    `jit`s on the way). None when the kernel sits where that cannot be done (inside
    a loop or a branch, or a kernel recorded while a cell ran); an equation that
    fails raises (`core/prefetch.py` says what could not be done, and why).
    """
    if site.eqn is None or program.closed_jaxpr is None:
        return None
    if any(e.primitive.name not in CALL_PRIMITIVES for e in site.trail):
        return None
    jaxpr, consts = closed_parts(program.closed_jaxpr)
    env = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, leaves, strict=True))
    return list(_evaluate_until(jaxpr, env, [*site.trail, site.eqn]))


def site_prefetch_offset(site: KernelSite) -> int:
    """Position of the first scalar-prefetch operand among the kernel's inputs."""
    # Dynamic grid bounds come first, then the scalar-prefetch operands.
    grid = site.params["grid_mapping"].grid
    return sum(1 for d in grid if not isinstance(d, (int, np.integer)))


def _evaluate_until(jaxpr: Any, env: dict[Any, Any], trail: list[Any]) -> list[Any]:
    """Evaluates `jaxpr` until `trail[0]`; returns the input values of `trail[-1]`."""
    target = trail[0]

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jax_core.Literal) else env[atom]

    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        if eqn is target:
            if len(trail) == 1:
                return values
            sub, consts = closed_parts(call_body(eqn.params))
            inner = dict(zip(sub.constvars, consts, strict=True))
            inner.update(zip(sub.invars, values, strict=True))
            return _evaluate_until(sub, inner, trail[1:])
        outputs = eqn.primitive.bind(*values, **eqn.params)
        if not eqn.primitive.multiple_results:
            outputs = [outputs]
        env.update(zip(eqn.outvars, outputs, strict=True))
    raise LookupError("kernel not found in its program")


def _aval_of(value: Any) -> Any:
    typeof = getattr(jax_core, "typeof", None) or getattr(jax_core, "get_aval")  # noqa: B009
    return typeof(value)


def same_kernel(a: KernelSite, b: KernelSite) -> bool:
    """Whether two sites bind the same kernel body on the same operand types."""
    return (
        a.primitive == b.primitive
        and _body(a) is _body(b)
        and _body(a) is not None
        and a.in_avals == b.in_avals
    )


def _body(site: KernelSite) -> Any:
    bodies = site.params.get("jaxprs")
    return bodies[0] if bodies else site.params.get("jaxpr")


def site_function(site: KernelSite) -> Callable[..., Any]:
    """A function that runs just this kernel, for lowering or running it alone."""
    assert pallas_call_module is not None
    primitive = pallas_call_module.pallas_call_p if site.primitive == PALLAS_CALL else None
    if primitive is None:
        raise NotImplementedError(f"running a {site.primitive} kernel alone")
    params = site.params

    def run_kernel(*args: Any) -> Any:
        return primitive.bind(*args, **params)

    return run_kernel
