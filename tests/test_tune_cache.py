"""The tuning cache is keyed on what was traced, and never vouches for correctness.

Through IPython's testing shell: a `--tune` cell calls a kernel defined in an earlier
cell; redefining that kernel and running the cell again must measure it again (its
jaxpr changed), and a config whose timing comes from the cache is still checked
against the reference on the inputs at hand. The oracle is the reference itself (a
kernel that doubles, against `2 * x`), computed by hand for each case.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.utils.capture import capture_output

import pallaslab
from pallaslab._src.bench import harness, trial, tune, tunekeys
from pallaslab._src.core import programs


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path / "cache"))
    # Fast timings: the test is about what is cached, not about the numbers.
    real = harness.TimerSettings
    monkeypatch.setattr(
        harness,
        "TimerSettings",
        lambda *a, **k: real(*a, **{"warmup": 1, "min_reps": 2, "max_reps": 3, **k}),
    )


DEFINE = """
from jax.experimental import pallas as pl

def body(x):
    return {expression}

def scale_kernel(x_ref, o_ref):
    o_ref[...] = body(x_ref[...])
"""

TUNE_CELL = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
BLOCK = 128

def run(x):
    return pl.pallas_call(
        scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)),
    )(x)

x = jnp.arange(512, dtype=jnp.float32)
"""
LINE = 'run(x) --ref "lambda x: 2 * x" --tune BLOCK=64,128'


def define(ip, expression):
    result = ip.run_cell(DEFINE.format(expression=expression))
    assert result.success, result.error_in_exec


def tune_cell(ip, line=LINE, body=TUNE_CELL):
    with capture_output():
        result = ip.run_cell(f"%%kernel {line}\n{textwrap.dedent(body)}")
    assert result.success, result.error_in_exec
    return ip.user_ns["_kernel"], ip.user_ns["_tune"]


def pallas_rows(tuned):
    return [r for r in tuned.rows if r.impl == "pallas"]


def test_redefining_a_kernel_an_earlier_cell_made_measures_it_again(ip):
    define(ip, "2.0 * x")
    inspection, first = tune_cell(ip)
    assert inspection.result.comparison.ok
    assert [(r.status, r.correct, r.cached) for r in pallas_rows(first)] == [
        ("ok", True, False)
    ] * 2
    # The same cell, the same kernel: timings come from the cache, still checked.
    _, again = tune_cell(ip)
    assert [(r.status, r.correct, r.cached) for r in pallas_rows(again)] == [("ok", True, True)] * 2
    assert [r.median_ms for r in pallas_rows(again)] == [r.median_ms for r in pallas_rows(first)]
    # A bug planted in an earlier cell: the cell's text is unchanged, its program is not.
    define(ip, "3.0 * x")
    inspection, wrong = tune_cell(ip)
    assert not inspection.result.comparison.ok  # the inspector says it does not match ...
    rows = pallas_rows(wrong)
    assert [(r.status, r.correct, r.cached) for r in rows] == [("wrong", False, False)] * 2
    assert wrong.best is None  # ... and so does every config
    assert "no config ran and matched the reference" in wrong.summary()
    # Fixed again: back to the cached timings of the right kernel.
    define(ip, "2.0 * x")
    _, fixed = tune_cell(ip)
    assert [(r.status, r.correct, r.cached) for r in pallas_rows(fixed)] == [("ok", True, True)] * 2


def test_a_cached_timing_is_still_checked_on_the_inputs_at_hand(ip):
    # abs(x) doubles right only where x >= 0: the same program, other values.
    define(ip, "2.0 * jnp.abs(x)")
    ip.run_cell("import jax.numpy as jnp")
    _, first = tune_cell(ip)
    assert all(r.status == "ok" and not r.cached for r in pallas_rows(first))
    negative = TUNE_CELL.replace("x = jnp.arange(512", "x = -1.0 - jnp.arange(512")
    inspection, again = tune_cell(ip, body=negative)
    assert not inspection.result.comparison.ok
    rows = pallas_rows(again)
    assert all(r.cached for r in rows)  # same program, shapes and dtypes: timing reused
    assert [(r.status, r.correct) for r in rows] == [("wrong", False)] * 2
    # x < 0 everywhere: 2 |x| differs from 2 x in all 512 elements.
    errors = [r.error for r in rows]
    assert all(e.startswith("512 element(s) differ from the reference") for e in errors), errors


def test_a_stored_verdict_is_never_trusted():
    def build(SCALE):  # noqa: N803 - the name tuned
        return lambda x: x * SCALE

    x = jnp.arange(256, dtype=jnp.float32)
    first = pallaslab.tune(build, {"SCALE": [1.0, 2.0]}, x, ref=lambda x: 2 * x, live=False)
    assert [r.status for r in first.rows if r.impl == "pallas"] == ["wrong", "ok"]
    # Someone (or an older pallaslab) stored the opposite verdicts.
    path = Path(first.cache_path)
    data = json.loads(path.read_text())
    for entry in data["configs"].values():
        if entry.get("impl") == "pallas":
            entry["status"], entry["correct"], entry["error"] = "ok", True, ""
    path.write_text(json.dumps(data))
    again = pallaslab.tune(build, {"SCALE": [1.0, 2.0]}, x, ref=lambda x: 2 * x, live=False)
    rows = [r for r in again.rows if r.impl == "pallas"]
    assert all(r.cached for r in rows)
    assert [(r.status, r.correct) for r in rows] == [("wrong", False), ("ok", True)]
    assert again.best == {"SCALE": 2.0}


def test_the_key_is_what_was_traced_and_the_reference():
    def build(SCALE):  # noqa: N803
        return jax.jit(lambda x: x * SCALE)

    x = jnp.ones((64,), jnp.float32)
    built = tune.Built(build(2.0), (x,))
    traced = trial.trace_config(built)
    again = trial.trace_config(tune.Built(build(2.0), (x,)))  # traced anew: the same program
    other = trial.trace_config(tune.Built(build(3.0), (x,)))
    ref = tunekeys.reference_digest(lambda x: 2 * x, built)
    key = tunekeys.entry_key({"SCALE": 2.0}, traced, ref)
    assert key == tunekeys.entry_key({"SCALE": 2.0}, again, ref)
    assert key != tunekeys.entry_key({"SCALE": 2.0}, other, ref)
    assert key != tunekeys.entry_key({"SCALE": 2.0}, traced, tunekeys.reference_digest(None, built))
    assert ref != tunekeys.reference_digest(lambda x: x + x, built)
    # Untraceable references are keyed on their values; constant ones too.
    numpy_ref = tunekeys.reference_digest(lambda x: np.asarray(x) * 2, built)
    assert numpy_ref.startswith("values:")
    assert numpy_ref == tunekeys.reference_digest(np.full((64,), 2.0, np.float32), built)
    file_key = tunekeys.file_key(built, tunekeys.local_measurer(_context()))
    assert {"inputs", "device", "backend", "chip", "jax", "jaxlib", "pallaslab"} <= set(file_key)
    assert file_key["inputs"] == [[[64], "float32"]]
    assert file_key["jaxlib"]


def test_closed_over_constants_are_part_of_the_key():
    table = np.arange(64, dtype=np.float32)

    def program(values):
        return jax.jit(lambda x: x + jnp.asarray(values))

    x = jnp.ones((64,), jnp.float32)
    a = trial.trace_config(tune.Built(program(table), (x,)))
    b = trial.trace_config(tune.Built(program(table + 1), (x,)))
    assert programs.fingerprint(a) != programs.fingerprint(b)


def _context():
    from pallaslab._src.bench import sweep

    return sweep.sweep_context(None, "t", kind="tune", total=1, x_label="config")
