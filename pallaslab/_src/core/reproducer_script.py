"""The text of a reproducer script: header, imports, the kernel's source, the call, the data.

`funcsource.Script` writes the kernel and what it closes over; this module adds the
`pallas_call` as it was written (from the traced construction), the target settings,
the operands' shapes and what pallaslab got, and ends with `reproducer_runner`'s code.
"""

from __future__ import annotations

import dataclasses
import datetime
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import sources, version
from pallaslab._src.core import funcsource, jax_adapter, lowering
from pallaslab._src.core.jax_adapter import capture
from pallaslab._src.core.jax_adapter.lowering import TPU_DEVICE_KINDS
from pallaslab._src.core.program import Traced
from pallaslab._src.core.reproducer_runner import RUNNER, TPU_ANSWER
from pallaslab._src.geometry.mismatch import tolerance_for

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


@dataclasses.dataclass(kw_only=True)
class ScriptWriter:
    """Composes the reproducer's text."""

    record: Any
    site: jax_adapter.KernelSite
    construction: capture.Construction
    vmap_axes: tuple[tuple[int, ...], tuple[int, ...]] | None
    target: Any
    inspection: Traced
    tpu_answer: tuple[str, int] | None = None
    script: funcsource.Script = dataclasses.field(
        default_factory=lambda: funcsource.Script(_PUBLIC, writers=[_jax_values], aliases=_ALIASES)
    )

    def render(
        self,
        *,
        script_name: str,
        specs: Sequence[jax.ShapeDtypeStruct],
        outputs: Sequence[dict[str, Any]],
        expected_error: str | None,
        npz: Path | None,
        notes: Sequence[str],
    ) -> str:
        """The script, with pallaslab's `outputs` as `reproducer` records them."""
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
            parts += ["", TPU_ANSWER.format(kind=self.tpu_answer[0], cores=self.tpu_answer[1])]
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
            RUNNER,
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
            f"Reproducer of the Pallas kernel `{record.name}`{where}.",
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
        return '"""' + _docstring_text(body) + '\n"""'

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


def _pretty(value: Any) -> str:
    if isinstance(value, list) and value:
        return "[\n" + "".join(f"    {item!r},\n" for item in value) + "]"
    return repr(value)


def _docstring_text(text: str) -> str:
    """Text as it may stand inside a triple-quoted docstring.

    Names and messages from the user's code (a kernel whose name holds three quotes
    and a statement) stay text, never code: backslashes and triple quotes escaped.
    """
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
