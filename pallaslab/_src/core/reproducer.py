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

The script's text is composed by `reproducer_script`; the code it ends with (loading
operands, lowering, comparing) is `reproducer_runner`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import words
from pallaslab._src.core import chips, compile_cache, jax_adapter, reproducer_files, running
from pallaslab._src.core.jax_adapter import capture
from pallaslab._src.core.jax_adapter.lowering import TPU_DEVICE_KINDS
from pallaslab._src.core.prefetch import kernel_inputs
from pallaslab._src.core.program import Traced, require_program
from pallaslab._src.core.reproducer_script import ScriptWriter
from pallaslab._src.core.seeded import example_arrays
from pallaslab._src.records.targets import parse_target


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
    replaced: tuple[Path, ...] = ()

    def __str__(self) -> str:
        written = [f"{self.script} (the script, {_size(self.script)})"]
        if self.inputs is not None:
            written.append(
                f"{self.inputs} (the operands and pallaslab's outputs, {_size(self.inputs)})"
            )
        replaced = (
            f" It replaced the earlier {words.and_list([p.name for p in self.replaced])}."
            if self.replaced
            else ""
        )
        lines = [
            f"Wrote {words.and_list(written)}; run it with python {self.script.name} (it "
            f"needs jax and numpy only).{replaced}"
        ]
        lines += [f"Note: {note}" for note in self.notes]
        lines += [f"Not written: {problem}" for problem in self.problems]
        return "\n".join(lines)


def _size(path: Path) -> str:
    try:
        return words.nbytes(path.stat().st_size)
    except OSError:
        return "size unknown"


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
    overwrite: bool = False,
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
        overwrite: Replace the script (and the `.npz`) where they exist already.

    Raises:
        ValueError: When there is no traced call, or the kernel is not a
            `pallas_call` the script can rebuild, or the files cannot go where they
            were asked to (`ReproducerPathError`; says why). Nothing is then written.
    """
    dest = reproducer_files.destination(path, save_inputs=save_inputs, overwrite=overwrite)
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
    leaves = example_arrays(program.examples())
    # Some kernels ask which TPU they are on while being traced (`emit_pipeline`); off
    # a TPU they are traced for pallaslab's chosen chip, and the script answers the same.
    asks_for_a_tpu = False
    # The pallas_call is rebuilt from the function as inspected: its globals pinned.
    retrace = program.retrace_fn or program.flat_fn
    try:
        sites, constructions = capture.trace_constructions(retrace, leaves)
    except Exception as error:
        if not jax_adapter.asks_for_a_tpu(error):
            raise
        asks_for_a_tpu = True
        with chips.tracing_chip():
            sites, constructions = capture.trace_constructions(retrace, leaves)
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

    script_path, npz_path = dest.script, dest.inputs
    writer = ScriptWriter(
        record=record,
        site=site,
        construction=construction,
        vmap_axes=vmap_axes,
        target=parsed,
        inspection=inspection,
        tpu_answer=TPU_DEVICE_KINDS[chips.traced_chip()] if asks_for_a_tpu else None,
    )
    # The script names the values the kernel's globals had when it was inspected.
    with program.pins.applied() if program.pins else contextlib.nullcontext():
        text = writer.render(
            script_name=script_path.name,
            specs=specs,
            outputs=[_expected_entry(o) for o in expected],
            expected_error=expected_error,
            npz=npz_path,
            notes=notes,
        )
    arrays = {f"input_{k}": _storable(a) for k, a in enumerate(operands)}
    arrays.update({f"expected_{k}": _storable(a) for k, a in enumerate(expected)})
    reproducer_files.check_space(dest, sum(a.nbytes for a in arrays.values()))

    def save(where: Path) -> None:
        np.savez(where, **arrays)  # type: ignore[arg-type]

    reproducer_files.write_together(dest, text, save if npz_path is not None else None)
    return Reproducer(
        script=script_path,
        inputs=npz_path,
        kernel=record.name,
        target=parsed.name if parsed else None,
        problems=tuple(writer.script.problems),
        notes=tuple(notes),
        replaced=dest.replaced,
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


def _expected_entry(output: np.ndarray) -> dict[str, Any]:
    """One output as the script records pallaslab's: shape, dtype, checksum, sums."""
    return {
        "shape": tuple(output.shape),
        "dtype": output.dtype.name,
        "sha256": checksum(output),
        **_stats(output),
    }


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
