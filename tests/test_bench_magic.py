"""`%%kernel --ref` locating bad blocks, `--bench` and `--tune`, through IPython's shell."""

from __future__ import annotations

import textwrap

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from pallaslab._src.bench import live
from pallaslab._src.magic import KernelCellError

MATMUL_CELL = """\
import functools, jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
NUM_WARPS = 4

def _matmul_kernel(a_ref, b_ref, c_ref, *, num_k_tiles):
    acc = jnp.zeros((BLOCK_M, BLOCK_N), dtype=jnp.float32)
    def body(t, acc):
        k_idx = pl.dslice(t * BLOCK_K, BLOCK_K)
        a_tile = plgpu.load(a_ref.at[:, k_idx])
        b_tile = plgpu.load(b_ref.at[k_idx, :])
        return acc + plgpu.dot(a_tile, b_tile).astype(jnp.float32)
    acc = jax.lax.fori_loop(0, num_k_tiles - BUG, body, acc)
    plgpu.store(c_ref, acc.astype(c_ref.dtype))

@jax.jit
def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    return pl.pallas_call(
        functools.partial(_matmul_kernel, num_k_tiles=pl.cdiv(K, BLOCK_K)),
        out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),
        grid=(pl.cdiv(M, BLOCK_M), pl.cdiv(N, BLOCK_N)),
        in_specs=[pl.BlockSpec((BLOCK_M, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((K, BLOCK_N), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
        compiler_params=plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=3),
    )(a, b)

a = jax.random.normal(jax.random.key(0), (128, 128))
b = jax.random.normal(jax.random.key(1), (128, 128))
"""

REF = '--ref "lambda a, b: a @ b"'


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path / "cache"))


def run(ip, line: str, body: str, bug: int = 0):
    with capture_output() as captured:
        result = ip.run_cell(f"%%kernel {line}\nBUG = {bug}\n{textwrap.dedent(body)}")
    return result, captured


def widget_bundles(captured):
    return [
        o.data for o in captured.outputs if "application/vnd.jupyter.widget-view+json" in o.data
    ]


def test_ref_locates_the_blocks_that_differ(ip):
    planted = MATMUL_CELL.replace(
        "num_k_tiles - BUG", "num_k_tiles - BUG * (pl.program_id(1) == pl.num_programs(1) - 1)"
    )
    result, captured = run(ip, f"matmul(a, b) {REF}", planted, bug=1)
    assert result.success, result.error_in_exec
    comparison = ip.user_ns["_kernel"].result.comparison
    assert not comparison.ok
    (tile,) = comparison.tiles
    assert tile.bad_tiles == ((0, 1), (1, 1))
    assert tile.pattern == "the last column of blocks"
    html = next(
        b["text/html"]
        for b in widget_bundles(captured)
        if "pallaslab inspection" in b["text/plain"]
    )
    assert "the last column of blocks" in html


def test_bench_times_the_call_and_its_baseline(ip):
    result, captured = run(ip, f"matmul(a, b) {REF} --bench", MATMUL_CELL)
    assert result.success, result.error_in_exec
    frame = ip.user_ns["_bench"]
    assert list(frame["impl"]) == ["xla", "pallas"]
    assert (frame["median_ms"] > 0).all() and frame["correct"].iloc[1]
    assert (frame["note"] == live.CPU_LABEL).all()
    texts = [b["text/plain"] for b in widget_bundles(captured)]
    assert any("matmul vs XLA: finished (2/2)" in t for t in texts)


def test_bench_without_a_reference_times_the_kernel_alone(ip):
    result, _ = run(ip, "matmul(a, b) --bench", MATMUL_CELL)
    assert result.success, result.error_in_exec
    assert list(ip.user_ns["_bench"]["impl"]) == ["pallas"]


def test_tune_sweeps_names_the_cell_reads(ip):
    line = f"matmul(a, b) {REF} --tune BLOCK_M=32,64 BLOCK_N=64,48 NUM_WARPS=4"
    result, captured = run(ip, line, MATMUL_CELL)
    assert result.success, result.error_in_exec
    tuned = ip.user_ns["_tune"]
    statuses = {r.point: r.status for r in tuned.rows}
    assert statuses["BLOCK_M=32, BLOCK_N=48, NUM_WARPS=4"] == "failed to lower"
    # The cell's own `BLOCK_M, BLOCK_N = 64, 64` did not undo the configs: the grid changed.
    ok = [r for r in tuned.rows if r.impl == "pallas" and r.status == "ok"]
    assert [r.config for r in ok] == [
        {"BLOCK_M": 32, "BLOCK_N": 64, "NUM_WARPS": 4},
        {"BLOCK_M": 64, "BLOCK_N": 64, "NUM_WARPS": 4},
    ]
    assert all(r.correct is True for r in ok)
    # The best is the faster of the two right configs (which one, the timings decide).
    assert tuned.best == min(ok, key=lambda r: r.median_ms).config
    # The table keeps integer configs integers; the baseline has none, and says so.
    table = tuned.table
    assert [str(table[n].dtype) for n in ("BLOCK_M", "BLOCK_N", "NUM_WARPS")] == ["Int64"] * 3
    pallas = table[table["impl"] == "pallas"]
    assert list(pallas["BLOCK_M"]) == [32, 32, 64, 64]
    assert "32.0" not in pallas.to_string() and "NaN" not in table[["BLOCK_M"]].to_string()
    assert table[table["impl"] == "xla"]["BLOCK_M"].isna().all()
    # The user's namespace keeps the cell's values.
    assert ip.user_ns["BLOCK_M"] == 64 and ip.user_ns["BLOCK_N"] == 64
    texts = [b["text/plain"] for b in widget_bundles(captured)]
    # Four configs; the XLA baseline measured after them is not one.
    assert any("tuning matmul: finished (4/4 configs)" in t for t in texts)
    # Run again: every config comes from the cache.
    result, _ = run(ip, line, MATMUL_CELL)
    assert result.success, result.error_in_exec
    assert all(r.cached for r in ip.user_ns["_tune"].rows)


@pytest.mark.parametrize("flags", ["--tune BLOCK_M=32,64", "--bench"])
def test_a_value_reference_says_there_is_no_xla_baseline(ip, flags):
    # `--ref EXPR` may be the expected value: every config is checked against it, but
    # there is no function to time as XLA's baseline, and the run says so.
    result, captured = run(ip, f'matmul(a, b) --ref "a @ b" {flags}', MATMUL_CELL)
    assert result.success, result.error_in_exec
    views = [b for b in widget_bundles(captured) if "No XLA baseline" in b["text/plain"]]
    assert views, [b["text/plain"] for b in widget_bundles(captured)]
    assert "--ref" in views[-1]["text/html"] and "No XLA baseline" in views[-1]["text/html"]
    if flags == "--bench":
        assert list(ip.user_ns["_bench"]["impl"]) == ["pallas"]
        return
    tuned = ip.user_ns["_tune"]
    assert [r.impl for r in tuned.rows] == ["pallas", "pallas"]
    assert all(r.correct is True for r in tuned.rows)  # checked against the value
    assert any(n.startswith("No XLA baseline") for n in tuned.notices)
    assert "note: No XLA baseline" in tuned.summary()
    assert tuned.plan.notices == tuned.notices[:1]


def test_a_config_that_breaks_the_cell_names_the_line(ip):
    body = MATMUL_CELL + "assert BLOCK_M != 32, 'no 32 today'\n"
    result, _ = run(ip, f"matmul(a, b) {REF} --tune BLOCK_M=32,64", body)
    assert result.success, result.error_in_exec
    rows = {r.point: r for r in ip.user_ns["_tune"].rows}
    failed = rows["BLOCK_M=32"]
    assert failed.status == "failed to build"
    assert failed.error.startswith("Cell line")
    assert "no 32 today" in failed.error
    assert rows["BLOCK_M=64"].status == "ok"


def test_tune_names_the_cell_never_reads_are_an_error(ip):
    result, _ = run(ip, "matmul(a, b) --tune BLOCK_Q=1,2", MATMUL_CELL)
    error = result.error_in_exec
    assert isinstance(error, KernelCellError)
    assert str(error).startswith("Cell line 1: --tune sets BLOCK_Q, but the cell never reads")
    assert "_tune" not in ip.user_ns


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("matmul(a, b) --tune BLOCK_M", "NAME=V1,V2"),
        ("matmul(a, b) --tune BLOCK_M=32,,64", "the value between 32 and 64 is empty"),
        ("matmul(a, b) --tune BLOCK_M=32,64,", "the value after 64 is empty"),
        ("--tune BLOCK_M=32", "name one"),
        ("--bench", "name one"),
    ],
)
def test_usage_errors(ip, line, message):
    result, _ = run(ip, line, MATMUL_CELL)
    assert isinstance(result.error_in_exec, UsageError)
    assert message in str(result.error_in_exec)


@pytest.fixture
def inline_backend():
    """pyplot on the notebook's inline backend, as in a Jupyter kernel; restored after."""
    import matplotlib
    import matplotlib.pyplot as plt

    before = matplotlib.get_backend()
    fallback = matplotlib.rcParams["backend_fallback"]
    plt.switch_backend("module://matplotlib_inline.backend_inline")
    yield "module://matplotlib_inline.backend_inline"
    plt.switch_backend(before)
    matplotlib.rcParams["backend_fallback"] = fallback


@pytest.mark.parametrize("flags", ["--bench", "--tune BLOCK_M=32,64"])
def test_bench_and_tune_leave_the_users_matplotlib_backend_alone(ip, inline_backend, flags):
    import matplotlib

    fallback = matplotlib.rcParams["backend_fallback"]
    result, captured = run(ip, f"matmul(a, b) {REF} {flags}", MATMUL_CELL)
    assert result.success, result.error_in_exec
    # The static plot was drawn (its PNG is in the saved output) ...
    assert any("image/png;base64" in b["text/html"] for b in widget_bundles(captured))
    # ... without switching the session to Agg: a later plt.show() still draws inline.
    assert matplotlib.get_backend() == inline_backend
    assert matplotlib.rcParams["backend_fallback"] == fallback
