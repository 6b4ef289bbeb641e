"""A standalone script that rebuilds one kernel call and reproduces its result or error.

For a compiler's authors, or a colleague without pallaslab: `write_reproducer` writes
`bug.py`, which needs only JAX and NumPy. It holds

- the kernel's source, with everything it closes over (helper functions, constants,
  closures; see `funcsource`), read from the files and notebook cells it came from;
- the `pallas_call` as it was written: out shapes, grid, BlockSpecs with their index
  maps, scratch shapes, compiler params, aliases, cost estimate (taken from the very
  objects the author passed, captured by tracing the program again);
- the operands' shapes and dtypes, and either the operands themselves (`bug.npz`
  beside it, with the outputs pallaslab got) or seeded random ones made the way
  pallaslab makes them, with the checksums pallaslab got on them;
- a target, when asked: the script then lowers the call for it and prints the IR (or
  the error) instead of running it.

Run, it prints each output's checksum and says whether it equals pallaslab's run (bit
for bit, or within the dtype's tolerance), exiting 1 when it does not or when the
call fails (the error is the reproduction).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import sources, version
from pallaslab._src.core import chips, compile_cache, funcsource, jax_adapter, lowering, running
from pallaslab._src.core.jax_adapter import capture
from pallaslab._src.core.jax_adapter.lowering import TPU_DEVICE_KINDS
from pallaslab._src.core.prefetch import kernel_inputs
from pallaslab._src.core.program import Traced, require_program
from pallaslab._src.core.seeded import example_arrays
from pallaslab._src.geometry.mismatch import tolerance_for
from pallaslab._src.records.targets import parse_target

# Public modules library objects are imported from, and the names scripts give them.
_ALIASES = {
    "jax": "jax",
    "jax.numpy": "jnp",
    "jax.lax": "lax",
    "numpy": "np",
    "jax.experimental.pallas": "pl",
    "jax.experimental.pallas.tpu": "pltpu",
    "jax.experimental.pallas.triton": "pltriton",
    "jax.experimental.pallas.mosaic_gpu": "plgpu",
    "jax.nn": "nn",
    "jax.random": "random",
    "functools": "functools",
    "math": "math",
    "operator": "operator",
}
_PUBLIC = funcsource.PublicNames(
    [
        "jax.experimental.pallas",
        "jax.experimental.pallas.tpu",
        "jax.experimental.pallas.triton",
        "jax.experimental.pallas.mosaic_gpu",
        "jax.numpy",
        "jax.lax",
        "jax.nn",
        "jax.random",
        "jax",
        "numpy",
        "math",
        "functools",
        "operator",
    ]
)

# Names the script's own code defines: the user's code cannot have them too.
_RESERVED = (
    "TARGET",
    "PLATFORM",
    "GPU_BACKEND",
    "TPU_CHIP",
    "PRINT_MODULE",
    "INTERPRET",
    "DEBUG",
    "INPUTS",
    "EXPECTED",
    "EXPECTED_ERROR",
    "TOLERANCES",
    "SAVED",
    "kernel_call",
    "hashlib",
    "sys",
    "Path",
)

# Floating outputs compare within these (rtol, atol relative to the largest magnitude),
# as pallaslab's own runs do (`mismatch.tolerance_for`).
_TOLERANCES = {
    dtype: tolerance_for(dtype)
    for dtype in ("bfloat16", "float16", "float32", "float64", "complex64", "complex128")
}


@dataclasses.dataclass(frozen=True)
class Reproducer:
    """What `Inspection.reproducer` wrote.

    Attributes:
        script: The script.
        inputs: The `.npz` beside it (operands and pallaslab's outputs), if saved.
        kernel: The kernel's name.
        target: The target the script lowers for (None: it runs the kernel).
        problems: What could not be written into the script (each is also a comment
            there, and the script fails clearly where it would be used).
        notes: What the reader should know (seeded inputs, a transformed kernel ...).
    """

    script: Path
    inputs: Path | None
    kernel: str
    target: str | None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        saved = f" and {self.inputs.name}" if self.inputs else ""
        lines = [
            f"Wrote {self.script}{saved}; run it with python {self.script.name} (it needs jax "
            "and numpy only)."
        ]
        lines += [f"Note: {note}" for note in self.notes]
        lines += [f"Not written: {problem}" for problem in self.problems]
        return "\n".join(lines)


def checksum(value: Any) -> str:
    """The checksum reproducers print: SHA-256 of the array's bytes (16 hex digits)."""
    array = np.ascontiguousarray(np.asarray(value))
    return hashlib.sha256(array.tobytes()).hexdigest()[:16]


def write_reproducer(
    inspection: Traced,
    path: str | Path,
    *,
    kernel: int | str = 0,
    save_inputs: bool = False,
    target: str | None = None,
) -> Reproducer:
    """Writes a standalone script reproducing one kernel call of `inspection`.

    Args:
        inspection: A traced program (`pallaslab.inspect`, `%%kernel CALL`).
        path: The script to write (`.py`); the inputs go beside it as `.npz`.
        kernel: The kernel's name or index.
        save_inputs: Save the kernel's operands (as the inspected program gives them
            to it) and pallaslab's outputs; otherwise the script makes seeded random
            operands the way pallaslab does.
        target: Lower for this target (e.g. "triton", "mosaic-tpu:v5e") and print the
            IR or the error, instead of running.

    Raises:
        ValueError: When there is no traced call, or the kernel is not a
            `pallas_call` the script can rebuild (says why).
    """
    program = require_program(inspection, "write a reproducer")
    if program.flat_fn is None:
        raise ValueError(
            "a reproducer rebuilds a traced call; name one on the magic line "
            "(%%kernel f(x) --reproducer bug.py) or use pallaslab.inspect(f, *args)"
        )
    if not inspection.kernels:
        raise ValueError(f"{inspection.name} runs no Pallas kernel: there is nothing to rebuild")
    record = inspection.kernel(kernel)
    site = program.sites[record.index]
    if site.primitive != "pallas_call":
        raise ValueError(
            f"{record.name} is a {site.primitive} kernel; reproducers rebuild pallas_call "
            "kernels only"
        )
    if any(not isinstance(d, int | np.integer) for d in record.grid):
        raise ValueError(f"{record.name} has a grid known only at run time; not written")
    parsed = parse_target(target) if target else None
    leaves = example_arrays(program.example_args)
    # Some kernels ask which TPU they are on while being traced (`emit_pipeline`); off
    # a TPU they are traced for pallaslab's chosen chip, and the script answers the same.
    asks_for_a_tpu = False
    try:
        sites, constructions = capture.trace_constructions(program.flat_fn, leaves)
    except Exception as error:
        if not jax_adapter.asks_for_a_tpu(error):
            raise
        asks_for_a_tpu = True
        with chips.tracing_chip():
            sites, constructions = capture.trace_constructions(program.flat_fn, leaves)
    if len(sites) != len(program.sites):
        raise ValueError(f"{program.name} traced differently a second time; not written")
    retraced = sites[record.index]
    construction = capture.construction_of(retraced, constructions)
    notes: list[str] = []
    vmap_axes = None
    if construction is None:
        construction, vmap_axes = capture.vmapped_construction(retraced, constructions, record.name)

    found = kernel_inputs(program, record.index, leaves, interpret_earlier=False)
    operands = list(found.values) if found.values is not None else None
    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in site.in_avals]
    if operands is None:
        notes.append(
            f"the kernel's operands in the program are unknown ({found.reason}): the "
            "script makes seeded random ones"
        )
    if not save_inputs or operands is None:
        operands = example_arrays(specs)
        if save_inputs is False:
            notes.append(
                "the script makes seeded random operands (as pallaslab does for shapes); "
                "save_inputs=True keeps the program's own"
            )
    operands = [np.asarray(o) for o in operands]
    expected, expected_error = _expected_outputs(site, operands)

    script_path = Path(path)
    npz_path = script_path.with_suffix(".npz") if save_inputs else None
    writer = _ScriptWriter(
        record=record,
        site=site,
        construction=construction,
        vmap_axes=vmap_axes,
        target=parsed,
        inspection=inspection,
        tpu_answer=TPU_DEVICE_KINDS[chips.traced_chip()] if asks_for_a_tpu else None,
    )
    text = writer.render(
        script_name=script_path.name,
        specs=specs,
        expected=expected,
        expected_error=expected_error,
        npz=npz_path,
        notes=notes,
    )
    script_path.parent.mkdir(parents=True, exist_ok=True)
    script_path.write_text(text, encoding="utf-8")
    if npz_path is not None:
        arrays = {f"input_{k}": _storable(a) for k, a in enumerate(operands)}
        arrays.update({f"expected_{k}": _storable(a) for k, a in enumerate(expected)})
        np.savez(npz_path, **arrays)  # type: ignore[arg-type]
    return Reproducer(
        script=script_path,
        inputs=npz_path,
        kernel=record.name,
        target=parsed.name if parsed else None,
        problems=tuple(writer.script.problems),
        notes=tuple(notes),
    )


def _expected_outputs(
    site: jax_adapter.KernelSite, operands: Sequence[np.ndarray]
) -> tuple[list[np.ndarray], str | None]:
    """The kernel's outputs as pallaslab runs it (emulated on CPU), or its error."""
    function = jax_adapter.site_function(site)
    try:
        with running.kernel_scope():
            compiled = compile_cache.compile_function(function, list(operands))
            outputs = jax.block_until_ready(compiled(*operands))
    except Exception as error:  # the script will show the same failure
        return [], f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(outputs)], None


def _storable(array: np.ndarray) -> np.ndarray:
    """NumPy's .npz keeps standard dtypes; bfloat16 and friends go as their raw bits."""
    if array.dtype.kind == "V" or array.dtype.name not in np.sctypeDict:
        return array.view(f"u{array.dtype.itemsize}")
    return array


# ---------------------------------------------------------------------------
# Writing the script.


def _jax_values(script: funcsource.Script, value: Any) -> str | None:
    """Source for JAX values `funcsource` does not know."""
    if isinstance(value, jax.ShapeDtypeStruct):
        return (
            f"{script.module('jax', 'jax')}.ShapeDtypeStruct({tuple(value.shape)!r}, "
            f"{_dtype(script, value.dtype)})"
        )
    if isinstance(value, jax.Array):
        return (
            f"{script.module('jax.numpy', 'jnp')}.asarray({script.expression(np.asarray(value))})"
        )
    inner = getattr(value, "inner_aval", None)
    space = getattr(value, "memory_space", None)
    if inner is not None and callable(space) and hasattr(inner, "shape"):
        # Scratch: `pltpu.VMEM((8, 128), jnp.float32)`.
        return f"{script.expression(space)}({tuple(inner.shape)!r}, {_dtype(script, inner.dtype)})"
    if type(value).__name__.endswith("ScalarMeta"):  # jnp.float32 and its kind
        return f"{script.module('jax.numpy', 'jnp')}.{value.dtype.name}"
    if type(value).__name__ == "_IndexMapFunc":  # BlockSpec's wrapper of an index map
        return script.expression(value.index_map)
    return None


def _dtype(script: funcsource.Script, dtype: Any) -> str:
    name = np.dtype(dtype).name
    jnp_name = script.module("jax.numpy", "jnp")
    return f"{jnp_name}.{name}" if hasattr(jax.numpy, name) else f"{jnp_name}.dtype({name!r})"


class _ScriptWriter:
    """Composes the reproducer's text."""

    def __init__(
        self,
        *,
        record: Any,
        site: jax_adapter.KernelSite,
        construction: capture.Construction,
        vmap_axes: tuple[tuple[int, ...], tuple[int, ...]] | None,
        target: Any,
        inspection: Traced,
        tpu_answer: tuple[str, int] | None = None,
    ) -> None:
        self.record = record
        self.tpu_answer = tpu_answer
        self.site = site
        self.construction = construction
        self.vmap_axes = vmap_axes
        self.target = target
        self.inspection = inspection
        self.script = funcsource.Script(_PUBLIC, writers=[_jax_values], aliases=_ALIASES)

    def render(
        self,
        *,
        script_name: str,
        specs: Sequence[jax.ShapeDtypeStruct],
        expected: Sequence[np.ndarray],
        expected_error: str | None,
        npz: Path | None,
        notes: Sequence[str],
    ) -> str:
        script = self.script
        for name in ("np", "jax", "jnp", "pl"):  # the names the generated code uses
            script.module({v: k for k, v in _ALIASES.items()}[name], name)
        script.reserve(_RESERVED)
        for line in ("import hashlib", "import sys", "from pathlib import Path"):
            script.require(line)
        if self.tpu_answer is not None:
            script.require("import importlib")
        kernel_text = self._expression(self.construction.kernel, "kernel")
        call_text = self._call(kernel_text)
        inputs = [
            (label, tuple(spec.shape), np.dtype(spec.dtype).name)
            for label, spec in zip(self._operand_labels(len(specs)), specs, strict=True)
        ]
        outputs = [
            {
                "shape": tuple(o.shape),
                "dtype": o.dtype.name,
                "sha256": checksum(o),
                **_stats(o),
            }
            for o in expected
        ]
        target = self.target
        platform, gpu_backend, chip = _platform(target)
        parts = [
            self._header(script_name, npz, notes, expected_error),
            "from __future__ import annotations",
            "",
            script.imports(),
        ]
        if script.needs_placeholder:
            parts += ["", funcsource.PLACEHOLDER_CLASS]
        if self.tpu_answer is not None:
            parts += ["", _TPU_ANSWER.format(kind=self.tpu_answer[0], cores=self.tpu_answer[1])]
        parts += [
            "",
            "# " + "-" * 76,
            "# The kernel and what it closes over.",
            "",
            "\n\n\n".join(script.definitions()),
            "",
            "# " + "-" * 76,
            "# The call, as it was written (on a CPU Pallas' interpreter runs it).",
            "",
            f"TARGET = {target.name if target else None!r}",
            f"PLATFORM = {platform!r}  # lowering platform for TARGET",
            f"GPU_BACKEND = {gpu_backend!r}",
            f"TPU_CHIP = {chip!r}",
            f"PRINT_MODULE = {bool(target and target.kind == 'stablehlo')!r}"
            "  # the whole lowered module, or only the kernel's IR",
            'INTERPRET = PLATFORM is None and jax.default_backend() == "cpu"',
            "DEBUG = TARGET is not None  # Pallas prints the kernel's IR as it lowers it",
            "",
            f"kernel_call = {call_text}",
            "",
            "# " + "-" * 76,
            "# Operands, and what pallaslab got.",
            "",
            f"INPUTS = {_pretty(inputs)}  # (name, shape, dtype)",
            f"EXPECTED = {_pretty(outputs)}",
            f"EXPECTED_ERROR = {expected_error!r}",
            f"TOLERANCES = {_TOLERANCES!r}  # dtype: (rtol, atol relative to max |expected|)",
            f"SAVED = {npz.name if npz else None!r}  # operands and outputs, beside this file",
            "",
            _RUNNER,
        ]
        return "\n".join(parts).rstrip() + "\n"

    def _expression(self, value: Any, what: str) -> str:
        """Source for a piece of the call; a placeholder (and a problem) if it has none."""
        try:
            return self.script.expression(value)
        except funcsource.NotWritableError as error:
            name = self.script.fresh(what)
            self.script.placeholder(name, value, str(error))
            return name

    def _operand_labels(self, count: int) -> list[str]:
        labels = [
            op.name or op.origin
            for op in self.record.operands
            if op.role == "in" or op.scalar_prefetch
        ]
        return [labels[k] if k < len(labels) else f"operand_{k}" for k in range(count)]

    def _call(self, kernel_text: str) -> str:
        script = self.script
        construction = self.construction
        keywords = capture.call_keywords(
            self.site, construction, vmapped=self.vmap_axes is not None
        )
        pl = script.module("jax.experimental.pallas", "pl")
        value_of = self._expression
        arguments = [kernel_text, f"out_shape={value_of(keywords.out_shape, 'out_shape')}"]
        if keywords.grid_spec is None:
            arguments.append(f"grid={value_of(keywords.grid, 'grid')}")
            for field, value in (
                ("in_specs", keywords.in_specs),
                ("out_specs", keywords.out_specs),
            ):
                if value is not None:
                    arguments.append(f"{field}={value_of(value, field)}")
            if keywords.scratch_shapes:
                scratch = value_of(list(keywords.scratch_shapes), "scratch_shapes")
                arguments.append(f"scratch_shapes={scratch}")
        else:
            arguments.append(f"grid_spec={value_of(keywords.grid_spec, 'grid_spec')}")
        if keywords.input_output_aliases:
            aliases = value_of(keywords.input_output_aliases, "aliases")
            arguments.append(f"input_output_aliases={aliases}")
        for key, value in (
            ("compiler_params", keywords.compiler_params),
            ("cost_estimate", keywords.cost_estimate),
        ):
            if value:
                arguments.append(f"{key}={value_of(value, key)}")
        function = getattr(construction.kernel, "func", construction.kernel)  # a partial's
        if keywords.name and keywords.name != getattr(function, "__name__", None):
            arguments.append(f"name={keywords.name!r}")
        if keywords.metadata:
            arguments.append(f"metadata={value_of(keywords.metadata, 'metadata')}")
        if keywords.interpret and keywords.interpret is not True:
            arguments.append(f"interpret={value_of(keywords.interpret, 'interpret')}")
        else:
            arguments.append("interpret=INTERPRET")
        arguments.append("debug=DEBUG")
        body = "".join(textwrap.indent(a, "    ") + ",\n" for a in arguments)
        call = f"{pl}.pallas_call(\n{body})"
        if self.vmap_axes is None:
            return call
        in_axes, out_axes = self.vmap_axes
        jax_name = script.module("jax", "jax")
        out = out_axes[0] if len(out_axes) == 1 else out_axes
        inner = textwrap.indent(call, "    ")
        return f"{jax_name}.vmap(\n{inner},\n    in_axes={in_axes!r},\n    out_axes={out!r},\n)"

    def _header(
        self,
        script_name: str,
        npz: Path | None,
        notes: Sequence[str],
        expected_error: str | None,
    ) -> str:
        record = self.record
        where = ""
        if record.source is not None:
            where = f" ({sources.label(record.source.file)}, line {record.source.line})"
        action = (
            f"Lowers it for {self.target.name} ({self.target.title}) and prints the IR, "
            "or the error."
            if self.target
            else "Runs it once (on a CPU in Pallas' interpreter, elsewhere compiled) and compares "
            "its outputs with pallaslab's."
        )
        inputs = (
            f"Operands: {npz.name}, beside this file (with pallaslab's outputs)."
            if npz
            else "Operands: seeded random, made as pallaslab makes them."
        )
        lines = [
            f'"""Reproducer of the Pallas kernel `{record.name}`{where}.',
            "",
            f"Written by pallaslab {version.__version__} with jax {jax.__version__} on "
            f"{jax.default_backend()}, {datetime.date.today().isoformat()}.",
            f"Needs jax and numpy only:  python {script_name}",
            action,
            inputs,
        ]
        if expected_error:
            lines.append(f"pallaslab's run failed: {expected_error}")
        lowered = self._lowering_seen()
        if lowered:
            lines.append(lowered)
        lines += [f"Note: {note}." for note in notes]
        lines += [f"NOT WRITTEN: {problem}." for problem in self.script.problems]
        body = "\n".join(textwrap.fill(line, 88) if line else "" for line in lines)
        return body + '\n"""'

    def _lowering_seen(self) -> str:
        """What pallaslab saw lowering for the target, when it did."""
        if self.target is None:
            return ""
        for lowered in lowering.lowerings(self.inspection):
            if lowered.target != self.target.name or (
                lowered.kernel_index is not None and lowered.kernel_index != self.record.index
            ):
                continue
            if lowered.error is not None:
                return (
                    f"pallaslab's lowering for {self.target.name} failed: {lowered.error.message}"
                )
            return f"pallaslab lowered it for {self.target.name} without error."
        return ""


def _platform(target: Any) -> tuple[str | None, str | None, str | None]:
    """(lowering platform, GPU backend, TPU chip) for a target."""
    if target is None:
        return None, None, None
    if target.kind == "stablehlo":
        return (target.arch or None), None, None
    if target.kind in ("mosaic-tpu", "tpu-compile"):
        kind, _ = TPU_DEVICE_KINDS.get(target.arch, ("", 1))
        return "tpu", None, kind or None
    return "cuda", ("mosaic_gpu" if target.kind == "mosaic-gpu" else "triton"), None


def _stats(array: np.ndarray) -> dict[str, Any]:
    """Sum and largest magnitude of the finite values (as the script computes them)."""
    values = array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)
    finite = values[np.isfinite(values)]
    total = complex(finite.sum()) if finite.size else 0.0
    return {
        "sum": total if array.dtype.kind == "c" else float(total.real),
        "absmax": float(np.abs(finite).max()) if finite.size else 0.0,
        "nonfinite": int(values.size - finite.size),
    }


def _pretty(value: Any) -> str:
    if isinstance(value, list) and value:
        return "[\n" + "".join(f"    {item!r},\n" for item in value) + "]"
    return repr(value)


# Kernels that ask which TPU they are on while traced (`pltpu.emit_pipeline`) get an
# answer off a TPU, as pallaslab gave them: JAX has no public way to name one.
_TPU_ANSWER = """
# This kernel asks which TPU it is on while it is traced; on a machine without one,
# answer as a {kind!r} does (as pallaslab did). Private JAX: the lookups live in
# jax._src.tpu_info (newer JAX) or jax._src.pallas.mosaic.tpu_info.
if jax.default_backend() != "tpu":
    for _name in ("jax._src.tpu_info", "jax._src.pallas.mosaic.tpu_info"):
        try:
            _info = importlib.import_module(_name)
        except ImportError:
            continue
        if hasattr(_info, "get_device_kind"):
            _info.get_device_kind = lambda: {kind!r}
            _info.get_num_device_cores = lambda: {cores!r}
            if hasattr(getattr(_info, "get_tpu_info", None), "cache_clear"):
                _info.get_tpu_info.cache_clear()
""".strip("\n")


_RUNNER = """
def _checksum(x):
    \"\"\"SHA-256 of the array's bytes (16 hex digits), as pallaslab computes it.\"\"\"
    return hashlib.sha256(np.ascontiguousarray(np.asarray(x)).tobytes()).hexdigest()[:16]


def _as_numbers(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _load_inputs():
    \"\"\"The operands: saved beside this file, else seeded random as pallaslab makes them.\"\"\"
    if SAVED:
        saved = Path(__file__).with_name(SAVED)
        if not saved.exists():
            sys.exit(f"{saved} is missing: it holds the operands this script runs on")
        with np.load(saved) as data:
            arrays = [data[f"input_{k}"] for k in range(len(INPUTS))]
            expected = [data[f"expected_{k}"] for k in range(len(EXPECTED))]
        # bfloat16 and other dtypes NumPy's .npz lacks are stored as their bits.
        arrays = [a.view(jnp.dtype(d)) for a, (_, _, d) in zip(arrays, INPUTS)]
        expected = [a.view(jnp.dtype(e["dtype"])) for a, e in zip(expected, EXPECTED)]
        return [jnp.asarray(a) for a in arrays], expected
    rng = np.random.default_rng(0)
    arrays = []
    for _, shape, dtype in INPUTS:
        dtype = jnp.dtype(dtype)
        if dtype.kind == "f" or dtype.name == "bfloat16":
            value = rng.standard_normal(shape, dtype=np.float32)
        elif dtype.kind in "iu":
            value = rng.integers(0, 4, shape)
        elif dtype.kind == "b":
            value = rng.random(shape) < 0.5
        else:
            value = rng.standard_normal(shape)
        arrays.append(jnp.asarray(value, dtype=dtype))
    return arrays, None


def _lower(args):
    \"\"\"Lowers the call for TARGET and prints the module (Pallas prints the kernel's IR).\"\"\"
    import contextlib

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    context = contextlib.ExitStack()
    if GPU_BACKEND is not None and hasattr(jax.config, "jax_pallas_use_mosaic_gpu"):
        jax.config.update("jax_pallas_use_mosaic_gpu", GPU_BACKEND == "mosaic_gpu")
    if TPU_CHIP is not None and hasattr(jax.sharding, "AbstractDevice"):
        # Lowering for a TPU on a machine without one: an abstract device names the chip.
        device = jax.sharding.AbstractDevice(
            device_kind=TPU_CHIP, num_cores=1, platform="tpu"
        )
        mesh = jax.sharding.AbstractMesh(
            (1,), ("_chip",), (jax.sharding.AxisType.Explicit,), abstract_device=device
        )
        context.enter_context(jax.sharding.use_abstract_mesh(mesh))
    print(f"# lowering for {TARGET} (platform {PLATFORM or jax.default_backend()})")
    with context:
        traced = jax.jit(kernel_call).trace(*specs)
        if PLATFORM:
            lowered = traced.lower(lowering_platforms=(PLATFORM,))
        else:
            lowered = traced.lower()
    if PRINT_MODULE:
        print(lowered.as_text())
    else:
        print(f"# lowered for {TARGET} without error: the kernel's IR is printed above")
    return 0


def _compare(name, got, want, entry):
    \"\"\"One line for an output: equal to pallaslab's bit for bit, close, or not.\"\"\"
    got = np.asarray(got)
    theirs = f"{entry['dtype']}{list(entry['shape'])}"
    if f"{got.dtype.name}{list(got.shape)}" != theirs:
        return f"{name}: {got.dtype.name}{list(got.shape)}, pallaslab's is {theirs}", False
    if _checksum(got) == entry["sha256"]:
        return f"{name}: equal to pallaslab's, bit for bit", True
    rtol, atol = TOLERANCES.get(entry["dtype"], (0.0, 0.0))
    a = _as_numbers(got)
    if want is not None:
        b = _as_numbers(want)
        scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
        bad = ~np.isclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True)
        if not bad.any():
            return f"{name}: within tolerance of pallaslab's (rtol {rtol:g})", True
        worst = float(np.nanmax(np.abs(a - b)[bad]))
        return f"{name}: DIFFERS at {int(bad.sum())} elements (max |diff| {worst:.6g})", False
    # Only pallaslab's checksum and sum are known: compare the sums.
    finite = a[np.isfinite(a)]
    slack = rtol * (abs(entry["sum"]) + 4 * entry["absmax"] * max(finite.size, 1) ** 0.5)
    if rtol and abs(finite.sum() - entry["sum"]) <= slack:
        return f"{name}: close to pallaslab's (sum {finite.sum():.6g}), not bit for bit", True
    return f"{name}: DIFFERS (checksum {_checksum(got)}, pallaslab's {entry['sha256']})", False


def _main():
    print(f"jax {jax.__version__} on {jax.default_backend()}: {len(INPUTS)} operand(s)")
    args, expected = _load_inputs()
    if TARGET is not None:
        return _lower(args)
    try:
        outputs = jax.tree_util.tree_leaves(jax.block_until_ready(kernel_call(*args)))
    except Exception as error:
        print(f"the kernel call failed: {type(error).__name__}: {error}", file=sys.stderr)
        if EXPECTED_ERROR:
            print(f"(pallaslab's run failed too: {EXPECTED_ERROR})", file=sys.stderr)
        raise
    ok = len(outputs) == len(EXPECTED)
    for k, out in enumerate(outputs):
        out = np.asarray(out)
        values = _as_numbers(out)
        total = complex(values[np.isfinite(values)].sum())
        total_text = f"{total.real:.9g}" if not total.imag else f"{total:.9g}"
        print(f"output {k}: {out.dtype.name}{list(out.shape)} sha256={_checksum(out)}"
              f" sum={total_text}")
        if k < len(EXPECTED):
            want = expected[k] if expected else None
            line, same = _compare(f"output {k}", out, want, EXPECTED[k])
            print("  " + line)
            ok = ok and same
    if EXPECTED_ERROR:
        print(f"pallaslab's run failed ({EXPECTED_ERROR}); this one did not")
        return 1
    print("reproduced pallaslab's result" if ok else "the result DIFFERS from pallaslab's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_main())
""".strip()
