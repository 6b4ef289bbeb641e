"""Lowering one kernel for GPU or TPU on any machine, and reading what JAX emits.

JAX lowers a `pallas_call` for CUDA or TPU without the hardware
(`.lower(lowering_platforms=...)`); the kernel then sits in the StableHLO module as
a custom call whose backend config carries it: Triton IR bytecode (`ir`), a Mosaic
GPU module (`module`), or base64 Mosaic TPU bytecode (`custom_call_config.body`).
This module reads those private shapes and hands back plain text (MLIR printed with
debug info), so nothing outside the adapter depends on them.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import pickle
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax

from pallaslab._src.core.jax_adapter import chips, execution, gpu_chips, probes
from pallaslab._src.core.jax_adapter.kernels import KernelSite, find_kernel_sites, user_location
from pallaslab._src.core.jax_adapter.probes import (
    PALLAS_CALL,
    pallas_call_module,
)
from pallaslab._src.records import SourceLocation, hardware

# Private modules, imported defensively: each missing one disables one target.
jax_config = probes.optional_module("jax._src.config")
jax_mlir = probes.optional_module("jax._src.interpreters.mlir")
ir = probes.optional_module("jax._src.lib.mlir", "ir")
passmanager = probes.optional_module("jax._src.lib.mlir", "passmanager")
jax_triton = probes.optional_module("jax._src.lib.triton")
jax_tpu = probes.optional_module("jax._src.lib", "tpu")
jax_mosaic_gpu = probes.optional_module("jax._src.lib", "mosaic_gpu_dialect")


def _require(module: Any, name: str) -> Any:
    if module is None:
        raise RuntimeError(f"this needs {name}, which jax {jax.__version__} lacks")
    return module


# TPU generations pallaslab targets -> (device kind, TensorCores per device).
TPU_DEVICE_KINDS = chips.TPU_DEVICE_KINDS

# Custom-call targets of the three kernel backends.
TRITON_TARGET = "__gpu$xla.gpu.triton"
MOSAIC_GPU_TARGET = "mosaic_gpu_v2"
MOSAIC_TPU_TARGET = "tpu_custom_call"


@dataclasses.dataclass(frozen=True)
class KernelPayload:
    """A kernel as a lowered program's custom call carries it.

    Attributes:
        backend: "triton", "mosaic_gpu" or "mosaic_tpu".
        name: The kernel's name in the custom call ("" when it has none).
        asm: The kernel's module as MLIR text with debug info (locations).
        params: Launch parameters from the backend config (Triton: num_warps,
            num_stages, grid_x/y/z).
        generic_asm: The module in MLIR's generic op form (Triton only): other
            builds of the dialect (the triton package's) parse it even where the
            custom syntax of an op changed between versions.
        notices: What JAX warned about while lowering it (deprecations: the Triton
            backend from 0.11, `pl.pallas_call` for Mosaic GPU ...).
    """

    backend: str
    name: str
    asm: str
    params: tuple[tuple[str, Any], ...] = ()
    generic_asm: str = ""
    notices: tuple[str, ...] = ()

    def param(self, key: str, default: Any = None) -> Any:
        """One launch parameter."""
        return dict(self.params).get(key, default)


def kernel_function(site: KernelSite) -> Callable[..., Any]:
    """A function running just this kernel (compiled, not interpreted), to lower it alone.

    A kernel built with `interpret=True` is lowered as compiled code all the same: the
    IR explorer shows what the kernel becomes on the hardware.
    """
    if site.eqn is not None:
        primitive = site.eqn.primitive
    elif site.primitive == PALLAS_CALL and pallas_call_module is not None:
        primitive = pallas_call_module.pallas_call_p
    else:
        found = [p for p in execution.mesh_primitives() if p.name == site.primitive]
        if not found:
            raise NotImplementedError(f"lowering a recorded {site.primitive} kernel alone")
        primitive = found[0]
    params = dict(site.params)
    if params.get("interpret"):
        params["interpret"] = False

    def run_kernel(*args: Any) -> Any:
        return primitive.bind(*args, **params)

    if site.primitive == "core_map":
        # `pl.core_map` writes refs it closes over: lowered inside a `run_state`
        # over its operands, as the program that ran it does.
        run_state = probes.optional_module("jax.experimental.pallas", "run_state")

        def run_on_refs(*args: Any) -> Any:
            return run_state(lambda refs: primitive.bind(*refs, **params))(tuple(args))

        return run_on_refs
    return run_kernel


def with_vmem_limit(site: KernelSite, limit: int) -> KernelSite | None:
    """The kernel with its Mosaic TPU `vmem_limit_bytes` set to `limit` (other params kept).

    What `pltpu.CompilerParams(vmem_limit_bytes=limit)` in the kernel's `pallas_call`
    would make. None for kernels whose params are not Mosaic TPU's (GPU params, mesh
    kernels): those cannot be given a TPU VMEM limit this way.
    """
    if site.primitive != PALLAS_CALL:
        return None
    tpu_params: Any = getattr(
        probes.optional_module("jax._src.pallas.mosaic.core"), "CompilerParams", None
    )
    current: Any = site.params.get("compiler_params")
    if not isinstance(tpu_params, type) or not hasattr(tpu_params, "__dataclass_fields__"):
        return None
    if current is None:
        replaced = tpu_params(vmem_limit_bytes=limit)
    elif isinstance(current, tpu_params):
        replaced = dataclasses.replace(current, vmem_limit_bytes=limit)  # type: ignore[type-var]
    else:
        return None
    params = {**site.params, "compiler_params": replaced}
    return dataclasses.replace(site, params=params)


def kernel_avals(site: KernelSite) -> list[jax.ShapeDtypeStruct]:
    """The kernel's operands as ShapeDtypeStructs."""
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in site.in_avals]


@contextlib.contextmanager
def gpu_backend(mosaic_gpu: bool | None) -> Iterator[None]:
    """Within the block, kernels without GPU compiler params lower with Mosaic GPU.

    True selects Mosaic GPU, False Triton; None keeps JAX's default. Up to jax 0.11 it
    is JAX's `jax_pallas_use_mosaic_gpu` switch; jax 0.12 has none (Triton, unless a
    kernel's params say otherwise), and such kernels are given Mosaic GPU's params as
    they are bound.
    """
    state = getattr(jax_config, "jax_pallas_use_mosaic_gpu", None)
    if mosaic_gpu is None or (state is None and not mosaic_gpu):
        yield  # without the switch (jax 0.12), kernels without params lower with Triton
        return
    if state is None:
        with execution.prefer_mosaic_gpu():
            yield
        return
    with state(mosaic_gpu):
        yield


def tpu_chip(generation: str, *, fallback: bool = False) -> contextlib.AbstractContextManager[None]:
    """Within the block, Pallas traces and lowers for TPU as if on this chip.

    Every lookup of the chip answers for it (`chips.chip_scope`), also those made
    while lowering equations traced before. With `fallback`, only where no TPU (or
    abstract TPU device of the code's own) answers.
    """
    return chips.chip_scope(generation, fallback=fallback)


# The GPU that Pallas lowers for when none is at hand: what jax 0.10 assumed (sm_90).
DEFAULT_GPU_CHIP = "H100"


def gpu_chip_of(
    device_kind: str | None = None, compute_capability: tuple[int, int] | None = None
) -> gpu_chips.GpuChip:
    """The GPU a lowering is for, with `compute_capability` if given.

    The hardware table's chip of that device kind; without one, the chip device
    queries answer for now, else an H100.
    """
    chip = gpu_chips.GpuChip.named(gpu_chips.answering_chip() or DEFAULT_GPU_CHIP)
    if device_kind is not None:
        known = hardware.gpu_of_device_kind(device_kind)
        chip = (
            gpu_chips.GpuChip.named(known.name)
            if known is not None
            else dataclasses.replace(chip, name=device_kind, device_kind=device_kind)
        )
    if compute_capability is not None:
        major, minor = compute_capability
        chip = dataclasses.replace(chip, compute_capability=(int(major), int(minor)))
    return chip


@contextlib.contextmanager
def gpu_chip(
    device_kind: str | None = None, compute_capability: tuple[int, int] | None = None
) -> Iterator[list[str]]:
    """Within the block, Pallas lowers for CUDA as if on this GPU.

    From jax 0.11, Pallas' Triton lowering asks which GPU it lowers for and fails with
    "No supported GPU devices found" when the default device is no GPU (0.10 assumed
    sm_90); Mosaic GPU asks its architecture query (`_infer_arch`: the default device's,
    else sm_90); kernels traced again on the way ask for the SM count. The chip answers
    them all (`gpu_chips.gpu_chip_scope`: an abstract device of the chip, public JAX
    API, and the wrapped queries). With a GPU as the default device and no chip asked
    for, the real GPU answers instead.

    Yields:
        Notices for what could not be set for the chip (filled in the block).
    """
    notices: list[str] = []
    if (
        device_kind is None
        and compute_capability is None
        and jax.default_backend() in ("gpu", "cuda")
    ):
        yield notices
        return
    if compute_capability is not None and not gpu_chips.install_arch():
        notices.append(
            f"jax {jax.__version__}'s Mosaic GPU has no architecture query pallaslab can "
            "answer: its lowering chose the architecture itself (sm_90 without a GPU)."
        )
    with gpu_chips.gpu_chip_scope(gpu_chip_of(device_kind, compute_capability), platform="cuda"):
        yield notices


# Each Pallas backend registers which compiler params it lowers when its module is
# first imported, and JAX imports it only when lowering for that backend: a kernel with
# TPU params lowered for CUDA first in a process got "install jaxlib GPU" instead of
# "compiler params for platform tpu cannot be used for gpu lowering". Imported before
# any cross-platform lowering, so the error does not depend on what was lowered before.
_BACKEND_REGISTRATIONS = (
    "jax._src.pallas.mosaic.pallas_call_registration",
    "jax._src.pallas.mosaic_gpu.pallas_call_registration",
    "jax._src.pallas.triton.pallas_call_registration",
)


@functools.cache
def _register_pallas_backends() -> None:
    for name in _BACKEND_REGISTRATIONS:
        probes.optional_module(name)


def lower_module(
    fn: Callable[..., Any],
    args: Sequence[Any],
    platform: str | None,
    *,
    mosaic_gpu: bool | None = None,
    tpu_generation: str | None = None,
    gpu_device_kind: str | None = None,
) -> Any:
    """Lowers `fn(*args)` for a platform; returns the StableHLO module.

    `platform` is "cuda", "tpu" or "cpu"; None lowers for the backend at hand.
    `gpu_device_kind` names the GPU a CUDA lowering is for (e.g. "NVIDIA A100");
    without one, the GPU at hand, else the chip device queries answer for (an H100).
    """
    if tpu_generation:
        chip: contextlib.AbstractContextManager[Any] = tpu_chip(tpu_generation)
    elif platform == "cuda":
        chip = gpu_chip(gpu_device_kind)
    else:
        chip = contextlib.nullcontext()
    # Mesh kernels get an interpreter only where they run on this CPU.
    cross = platform not in (None, "cpu")
    if cross:
        _register_pallas_backends()
    with gpu_backend(mosaic_gpu), chip, execution.mesh_interpret(not cross):
        traced = jax.jit(fn).trace(*args)
        if platform is None:
            lowered = traced.lower()
        else:
            lowered = traced.lower(lowering_platforms=(platform,))
        return lowered.compiler_ir("stablehlo")


def sites_on_chip(fn: Callable[..., Any], args: Sequence[Any], chip: str) -> list[KernelSite]:
    """The kernels of `fn(*args)`, traced as if on TPU generation or GPU `chip` (as written)."""
    scope: contextlib.AbstractContextManager[Any] = (
        tpu_chip(chip)
        if chip in TPU_DEVICE_KINDS
        else gpu_chips.gpu_chip_scope(gpu_chips.GpuChip.named(chip))
    )
    with scope, execution.mesh_interpret(False):
        closed = jax.make_jaxpr(fn)(*args)
    return find_kernel_sites(closed)


@contextlib.contextmanager
def deprecation_notices() -> Iterator[list[str]]:
    """Collects the deprecation warnings JAX gives in the block, as one-line notices.

    Recorded instead of shown (or raised), so a view can say them once, beside what
    they are about. The list is filled when the block ends.
    """
    found: list[str] = []
    _warn_again()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        try:
            yield found
        finally:
            for warning in caught:
                if issubclass(warning.category, DeprecationWarning):
                    text = f"jax {jax.__version__}: {warning.message}"
                    if text not in found:
                        found.append(text)


def _warn_again() -> None:
    """Lets JAX's deprecated module attributes warn again (`pl.core_map` ...).

    JAX serves them through a cached module `__getattr__` that warns on the first
    access only: a program inspected again would say nothing.
    """
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("jax"):
            continue
        getter: Any = getattr(module, "__dict__", {}).get("__getattr__")
        clear = getattr(getter, "cache_clear", None)
        if isinstance(getattr(module, "_deprecations", None), dict) and callable(clear):
            clear()


def module_text(module: Any) -> str:
    """A module as MLIR text with locations (large constants elided)."""
    return str(module.operation.get_asm(enable_debug_info=True, large_elements_limit=32))


def kernel_payloads(module: Any) -> list[KernelPayload]:
    """Every Pallas kernel in a lowered module, in the order the module holds them."""
    found: list[KernelPayload] = []
    for op in _walk(module.operation):
        if op.name != "stablehlo.custom_call":
            continue
        attributes = op.attributes
        target = ir.StringAttr(attributes["call_target_name"]).value
        if target == TRITON_TARGET:
            found.append(_triton_payload(attributes))
        elif target == MOSAIC_GPU_TARGET:
            found.append(_mosaic_gpu_payload(attributes))
        elif target == MOSAIC_TPU_TARGET:
            found.append(_mosaic_tpu_payload(attributes))
    return found


def _walk(op: Any) -> Iterator[Any]:
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                inner = child.operation
                yield inner
                yield from _walk(inner)


def _config_dict(attributes: Any) -> dict[str, Any]:
    config = attributes["mhlo.backend_config"]
    return {named.name: named.attr for named in _named_attrs(config)}


def _named_attrs(dictionary: Any) -> list[Any]:
    return [dictionary[k] for k in range(len(dictionary))]


def _triton_payload(attributes: Any) -> KernelPayload:
    config = _config_dict(attributes)
    bytecode = ir.StringAttr(config["ir"]).value_bytes
    params = [
        (key, int(ir.IntegerAttr(config[key]).value))
        for key in ("num_warps", "num_stages", "grid_x", "grid_y", "grid_z")
        if key in config
    ]
    name = ir.StringAttr(config["name"]).value if "name" in config else ""
    context = private_context(_require(jax_triton, "jax._src.lib.triton").dialect.register_dialect)
    asm, generic = _parse_and_print(bytecode, context, generic=True)
    return KernelPayload("triton", name, asm, tuple(params), generic)


def _mosaic_gpu_payload(attributes: Any) -> KernelPayload:
    config = _config_dict(attributes)
    bytecode = ir.StringAttr(config["module"]).value_bytes
    context = private_context(
        _require(jax_mosaic_gpu, "jax._src.lib.mosaic_gpu_dialect").register_dialect
    )
    # The module is stored in Mosaic GPU's versioned (serialized) form: undo that.
    asm, _ = _parse_and_print(bytecode, context, "mosaic_gpu-serde{serialize=false}")
    name = _module_name(asm)
    return KernelPayload("mosaic_gpu", name, asm)


def _mosaic_tpu_payload(attributes: Any) -> KernelPayload:
    config = json.loads(ir.StringAttr(attributes["backend_config"]).value)
    call_config = config["custom_call_config"]
    bytecode = base64.b64decode(call_config["body"])
    context = private_context(_require(jax_tpu, "jax._src.lib.tpu").register_dialect)
    asm, _ = _parse_and_print(bytecode, context, "mosaic-serde{serialize=false}")
    params = tuple(
        (k, v) for k, v in call_config.items() if k != "body" and isinstance(v, (str, int, bool))
    )
    return KernelPayload("mosaic_tpu", _first_func_name(asm), asm, params)


def private_context(register_dialect: Callable[[Any], None]) -> Any:
    """A fresh MLIR context of pallaslab's own, with one kernel dialect registered.

    Never JAX's: `mlir.make_ir_context()` hands out a per-thread context that JAX
    reuses for its own lowerings (from the main branch after 0.11.0), so registering
    a dialect on it, or allowing unregistered dialects, would change JAX's context.
    This one holds the upstream dialects JAX registers (func, arith, scf, gpu, llvm,
    nvvm ...; JAX's `upstream_dialects` registry) and the kernel's own.
    """
    context = _require(ir, "jax._src.lib.mlir.ir").Context()
    registry = getattr(jax_mlir, "upstream_dialects", None)
    if registry is not None:
        context.append_dialect_registry(registry)
        context.load_all_available_dialects()
    register_dialect(context)
    return context


def _parse_and_print(
    bytecode: bytes, context: Any, deserialize: str = "", *, generic: bool = False
) -> tuple[str, str]:
    """The module as text with locations, and (if asked) in generic op form."""
    with context:
        if deserialize:
            context.allow_unregistered_dialects = True
        module = ir.Module.parse(bytecode)
        if deserialize:
            passmanager.PassManager.parse(f"builtin.module({deserialize})").run(module.operation)
            context.allow_unregistered_dialects = False
        operation = module.operation
        asm = str(operation.get_asm(enable_debug_info=True, large_elements_limit=32))
        generic_asm = (
            str(operation.get_asm(enable_debug_info=True, print_generic_op_form=True))
            if generic
            else ""
        )
        return asm, generic_asm


def _module_name(asm: str) -> str:
    for line in asm.splitlines():
        if line.startswith("module @"):
            return line.split("@", 1)[1].split()[0]
    return ""


def _first_func_name(asm: str) -> str:
    for line in asm.splitlines():
        stripped = line.strip()
        if stripped.startswith("func.func @"):
            return stripped.split("@", 1)[1].split("(")[0]
    return ""


def export_for_tpu(fn: Callable[..., Any], args: Sequence[Any], generation: str) -> bytes:
    """`fn` exported for TPU (as if on `generation`), pickled for a compile worker.

    `jax.export` serialization needs the optional `flatbuffers` package; a pickle of
    the `Exported` (without its VJP closure) crosses to a worker process of the same
    Python and JAX just as well.
    """
    with tpu_chip(generation), execution.mesh_interpret(False):
        exported = jax.export.export(jax.jit(fn), platforms=["tpu"])(*args)
    return pickle.dumps(dataclasses.replace(exported, _get_vjp=None))


def mosaic_gpu_default_semantics() -> str:
    """How Mosaic GPU lowers a kernel that asks for nothing: "Lane" or "Warpgroup".

    Lane semantics up to jax 0.10, warpgroup semantics from 0.11 (the default of
    `plgpu.CompilerParams.lowering_semantics`); "" when this JAX does not say.
    """
    params = getattr(
        probes.optional_module("jax._src.pallas.mosaic_gpu.core"), "CompilerParams", None
    )
    if params is None or not dataclasses.is_dataclass(params):
        return ""
    for field in dataclasses.fields(params):
        if field.name == "lowering_semantics":
            return str(getattr(field.default, "name", ""))
    return ""


def tpu_chip_known(generation: str) -> bool:
    """Whether this JAX's Pallas knows the chip's device kind."""
    return chips.chip_known(generation)


def lowering_error_location(traceback: types.TracebackType | None) -> SourceLocation | None:
    """The source line of the equation being lowered when an error was raised.

    JAX's lowerings walk the kernel's equations in frames whose `eqn` local holds
    the one being lowered; its source info names the user's line.
    """
    found = None
    tb = traceback
    while tb is not None:
        eqn = tb.tb_frame.f_locals.get("eqn")
        info = getattr(eqn, "source_info", None)
        if info is not None:
            found = user_location(info) or found
        tb = tb.tb_next
    return found


def lowering_error_primitive(traceback: types.TracebackType | None) -> str:
    """The name of the primitive being lowered when an error was raised ("" if none)."""
    name = ""
    tb = traceback
    while tb is not None:
        eqn = tb.tb_frame.f_locals.get("eqn")
        primitive = getattr(eqn, "primitive", None)
        if primitive is not None:
            name = str(getattr(primitive, "name", ""))
        tb = tb.tb_next
    return name
