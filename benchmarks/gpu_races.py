"""Does the race pallaslab predicts under GPU rules happen on the GPU?

Two kernels, each a matmul that walks K with a third grid axis and accumulates into its
output block (the first K step zeroes it): right in interpret mode and on a TPU, where a
core runs its programs in grid order; racy on a GPU, where all programs may run at once.
- notebook 08's "right on TPU, wrong on GPU" kernel (read from the notebook's cell);
- the same kind of kernel at 1024 x 1024 in 64 x 64 blocks (a 16 x 16 x 16 grid).

For each: what pallaslab predicts (`find_races(kernel, "gpu")` / `("tpu")`), then what running
it shows: on a GPU, compiled with each GPU backend this JAX has (the default one, and
Triton), on fresh random inputs a number of times, compared with `x @ y`; on a CPU, in
pallaslab's emulator in grid order and in seeded GPU-like orders (what the course shows).

Run: python benchmarks/gpu_races.py [--runs 20]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.geometry.races import find_races

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOK = ROOT / "notebooks" / "08_debugging.ipynb"


@dataclasses.dataclass(frozen=True)
class RaceCase:
    """A kernel and inputs: `build()` gives the function, `shapes` its inputs' shapes."""

    name: str
    build: Callable[[], Callable[..., Any]]
    shapes: tuple[tuple[int, ...], ...]


@dataclasses.dataclass(frozen=True)
class Observation:
    """What running a case showed.

    Attributes:
        case: The case's name.
        how: Where and how it ran ("GPU, Triton backend", "CPU emulator, GPU order").
        predicted_gpu: Conflicts pallaslab finds under GPU rules.
        predicted_tpu: Conflicts under TPU rules.
        runs: Runs made.
        wrong: Runs whose result differed from `x @ y`.
        max_error: The largest absolute difference seen.
        error: Why it could not run ("" when it ran).
    """

    case: str
    how: str
    predicted_gpu: int
    predicted_tpu: int
    runs: int
    wrong: int
    max_error: float
    error: str = ""


def notebook_kernel(path: Path = NOTEBOOK) -> Callable[..., Any]:
    """Notebook 08's "right on TPU, wrong on GPU" matmul, as the notebook defines it.

    The `%%kernel` cell is run as the magic runs it (ordinary Python, its first line
    dropped) in a namespace with the notebook's imports.
    """
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if (
            cell["cell_type"] == "code"
            and source.startswith("%%kernel matmul(")
            and "program_id(2)" in source
        ):
            namespace: dict[str, Any] = {"jax": jax, "jnp": jnp, "np": np, "pl": pl}
            exec(compile(source.split("\n", 1)[1], str(path), "exec"), namespace)
            return namespace["matmul"]  # type: ignore[no-any-return]
    raise LookupError(f"no k-accumulating matmul cell in {path}")


def kacc_matmul(n: int = 1024, block: int = 64) -> Callable[..., Any]:
    """A matmul accumulating into its output across a K grid axis (no compiler params)."""

    def kernel(x_ref, y_ref, o_ref):  # type: ignore[no-untyped-def]
        @pl.when(pl.program_id(2) == 0)
        def _():  # type: ignore[no-untyped-def]
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32),
        grid=(n // block, n // block, n // block),
        in_specs=[
            pl.BlockSpec((block, block), lambda i, j, k: (i, k)),
            pl.BlockSpec((block, block), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((block, block), lambda i, j, k: (i, j)),
    )


def cases(n: int = 1024, block: int = 64) -> list[RaceCase]:
    """Notebook 08's kernel and the larger one."""
    return [
        RaceCase("notebook 08 matmul (128^2, grid 2x2x2)", notebook_kernel, ((128, 128),) * 2),
        RaceCase(
            f"k-accumulating matmul ({n}^2, grid {n // block}^3)",
            lambda: kacc_matmul(n, block),
            ((n, n),) * 2,
        ),
    ]


def predicted(fn: Callable[..., Any], shapes: Sequence[tuple[int, ...]]) -> tuple[int, int]:
    """Conflicts pallaslab finds in the kernel under GPU and TPU rules."""
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    kernel = pallaslab.inspect(fn, *specs).kernels[0]
    return len(find_races(kernel, "gpu")), len(find_races(kernel, "tpu"))


def _inputs(shapes: Sequence[tuple[int, ...]], run: int) -> list[Any]:
    keys = jax.random.split(jax.random.key(run), len(shapes))
    return [jax.random.normal(k, s, jnp.float32) for k, s in zip(keys, shapes, strict=True)]


def _count_wrong(
    call: Callable[..., Any], shapes: Sequence[tuple[int, ...]], runs: int
) -> tuple[int, float]:
    wrong, worst = 0, 0.0
    for run in range(runs):
        x, y = _inputs(shapes, run)
        want = np.asarray(jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST))
        got = np.asarray(jax.block_until_ready(call(x, y)))
        error = float(np.nanmax(np.abs(got - want))) if np.isfinite(got).all() else float("inf")
        # Tensor cores round float32 inputs (TF32): compare against the scale of x @ y.
        if not error <= 1e-2 * float(np.max(np.abs(want))):
            wrong += 1
        worst = max(worst, error)
    return wrong, worst


@contextlib.contextmanager
def _triton_backend(on: bool) -> Iterator[None]:
    """Kernels without GPU compiler params lower with Triton (on) or JAX's default."""
    if not on:
        yield
        return
    previous = jax.config.jax_pallas_use_mosaic_gpu
    jax.config.update("jax_pallas_use_mosaic_gpu", False)
    try:
        yield
    finally:
        jax.config.update("jax_pallas_use_mosaic_gpu", previous)


def _ways_to_run(runs: int) -> list[tuple[str, Callable[[Callable[..., Any]], Any], Any]]:
    """(how, wrap the kernel, context) for each way of running it on this machine."""
    if jax.default_backend() == "gpu":
        default = "Mosaic GPU" if jax.config.jax_pallas_use_mosaic_gpu else "Triton"
        return [
            (f"GPU, JAX's default backend ({default})", jax.jit, lambda: _triton_backend(False)),
            ("GPU, Triton backend", jax.jit, lambda: _triton_backend(True)),
        ]
    return [
        ("CPU emulator, grid order", pallaslab.emulate, contextlib.nullcontext),
        *(
            (
                f"CPU emulator, GPU order (seed {seed})",
                lambda fn, seed=seed: pallaslab.emulate(fn, order="gpu", seed=seed),
                contextlib.nullcontext,
            )
            for seed in range(min(runs, 3))
        ),
    ]


def observe(case: RaceCase, runs: int = 20) -> list[Observation]:
    """What pallaslab predicts for the case, and what running it shows."""
    try:
        fn = case.build()
        gpu, tpu = predicted(fn, case.shapes)
    except Exception as error:
        return [Observation(case.name, "", -1, -1, 0, 0, 0.0, f"{type(error).__name__}: {error}")]
    found = []
    for how, wrap, context in _ways_to_run(runs):
        count = runs if jax.default_backend() == "gpu" else 1
        try:
            with context():
                wrong, worst = _count_wrong(wrap(fn), case.shapes, count)
        except Exception as error:  # e.g. a backend that cannot take the kernel
            message = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
            found.append(
                Observation(
                    case.name, how, gpu, tpu, 0, 0, 0.0, f"{type(error).__name__}: {message}"
                )
            )
            continue
        found.append(Observation(case.name, how, gpu, tpu, count, wrong, worst))
    return found


def format_observations(observations: Sequence[Observation], device: str) -> str:
    """Markdown: one line per (kernel, way of running it)."""
    lines = [
        f"Races on {device} (jax {jax.__version__}):",
        "",
        "| kernel | ran as | pallaslab: GPU-rule conflicts | TPU-rule conflicts | "
        "wrong runs | largest error | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in observations:
        if o.error:
            lines.append(
                f"| {o.case} | {o.how or 'n/a'} | {o.predicted_gpu} | {o.predicted_tpu} | "
                f"n/a | n/a | could not run: {o.error} |"
            )
            continue
        race_predicted = o.predicted_gpu > 0
        race_seen = o.wrong > 0
        if race_predicted and race_seen:
            verdict = "predicted race seen"
        elif race_predicted:
            verdict = "predicted race not seen in these runs"
        elif race_seen:
            verdict = "WRONG with no race predicted"
        else:
            verdict = "right, as predicted"
        lines.append(
            f"| {o.case} | {o.how} | {o.predicted_gpu} | {o.predicted_tpu} | "
            f"{o.wrong}/{o.runs} | {o.max_error:.3g} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per backend on a GPU")
    parser.add_argument("--json", type=Path, help="also write the observations here")
    options = parser.parse_args(argv)
    observations = [o for case in cases() for o in observe(case, options.runs)]
    from pallaslab._src.bench import harness

    print(format_observations(observations, harness.device_name()))
    if options.json:
        options.json.write_text(json.dumps([dataclasses.asdict(o) for o in observations]))
    return 1 if any(o.wrong and not o.predicted_gpu for o in observations) else 0


if __name__ == "__main__":
    sys.exit(main())
