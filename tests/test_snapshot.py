"""An inspection is a snapshot: every view, target and run comes from the program it traced.

A kernel's module is rewritten and reloaded after it was inspected, redefining every
global the kernel reads (the kernel function, a block size constant, a helper it
calls, the index map) in the same namespace, as a later notebook cell does. The
inspection's targets, runs, checks, tile map and Source tab must still show the
first version. The oracle for each target is the same kernel lowered by a separate
inspection *before* the rewrite; the new version is checked to lower differently,
so the comparison can fail.
"""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallaslab
from pallaslab._src.core import gpu_toolchain, snapshot
from pallaslab._src.views.tabs import source as source_tab

VERSION_1 = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 128
SCALE = 2.0


def helper(v):
    return v * SCALE


def index_map(i):
    return (i, 0)


def kernel(x_ref, o_ref):
    o_ref[...] = helper(x_ref[...]) + 1.0


def fn(x):
    spec = pl.BlockSpec((BLOCK, 128), index_map)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // BLOCK,),
        in_specs=[spec],
        out_specs=spec,
    )(x)
"""

# Every global fn reads, redefined: the old `fn` object is what the inspection holds.
VERSION_2 = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 64
SCALE = 3.0


def helper(v):
    return v * SCALE - 4.0


def index_map(i):
    return (0, 0)


def kernel(x_ref, o_ref):
    o_ref[...] = helper(x_ref[...]) - 5.0


def fn(x):
    spec = pl.BlockSpec((BLOCK, 128), index_map)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // BLOCK,),
        in_specs=[spec],
        out_specs=spec,
    )(x)
"""


def expected(x):
    return np.asarray(x) * 2.0 + 1.0


def _available(target: str) -> bool:
    if target.startswith(("triton", "ptx")):
        return importlib.util.find_spec("triton") is not None
    if target.startswith("tpu-compile"):
        return importlib.util.find_spec("libtpu") is not None
    if target.startswith("xla-gpu"):
        return gpu_toolchain.problem() is None
    return True


TARGETS = [
    "triton",
    "ptx:sm_90",
    "mosaic-tpu:v5e",
    "tpu-compile:v5e",
    "mosaic-gpu",
    "xla-gpu:H100",
    "stablehlo",
    "stablehlo:tpu",
]


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    """(the module, an inspection before the rewrite, the oracle's lowerings) after it."""
    folder = tmp_path_factory.mktemp("snapshot")
    path = folder / "snapshot_kernels.py"
    path.write_text(VERSION_1, encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module("snapshot_kernels")
        x = jnp.arange(256 * 128, dtype=jnp.float32).reshape(256, 128) / 1000.0
        inspection = pallaslab.inspect(module.fn, x)
        oracle = pallaslab.inspect(module.fn, x)
        texts = {t: oracle.lower(t).text for t in TARGETS if _available(t)}
        errors = {t: oracle.lower(t).error for t in texts}
        assert all(e is None for e in errors.values()), errors
        path.write_text(VERSION_2, encoding="utf-8")
        linecache.checkcache(str(path))
        importlib.reload(module)
        yield module, inspection, texts, x
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("snapshot_kernels", None)


def test_the_module_really_changed(rewritten):
    module, _, _, x = rewritten
    assert module.BLOCK == 64
    fresh = pallaslab.inspect(module.fn, x)
    assert fresh.kernels[0].operands[0].block_shape == (64, 128)
    assert not np.allclose(fresh.run().values[0], expected(x))


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_lowers_the_inspected_kernel(rewritten, target):
    _, inspection, texts, _ = rewritten
    if target not in texts:
        pytest.skip(f"{target} is not installed here")
    lowered = inspection.lower(target)
    assert lowered.error is None, lowered.error
    assert lowered.text == texts[target]


@pytest.mark.parametrize("target", ["mosaic-tpu:v5e", "stablehlo", "triton"])
def test_the_new_version_lowers_differently(rewritten, target):
    module, _, texts, x = rewritten
    if target not in texts:
        pytest.skip(f"{target} is not installed here")
    assert pallaslab.inspect(module.fn, x).lower(target).text != texts[target]


def test_run_and_check_use_the_inspected_kernel(rewritten):
    _, inspection, _, x = rewritten
    np.testing.assert_allclose(inspection.run().values[0], expected(x), rtol=1e-6)
    assert inspection.check(lambda v: v * 2.0 + 1.0).ok
    # Other dtypes and shapes need the function traced again: its globals pinned.
    assert inspection.check(lambda v: v * 2.0 + 1.0, dtypes=["bfloat16"]).ok
    bigger = jnp.ones((512, 128), jnp.float32)
    result = inspection.run(bigger, ref=lambda v: v * 2.0 + 1.0)
    assert result.comparison is not None and result.comparison.ok


def test_the_tile_map_is_the_inspected_one(rewritten):
    _, inspection, _, _ = rewritten
    tiles = inspection.tiles()
    assert tiles.ranges(0, (1,)) == ((128, 256), (0, 128))
    assert inspection.kernels[0].operands[0].index_map.text == "lambda i: (i, 0)"


def test_the_source_tab_shows_the_source_as_traced(rewritten):
    module, inspection, _, _ = rewritten
    shown = "\n".join(line for f in source_tab.payload(inspection)["files"] for line in f["lines"])
    assert "BLOCK = 128" in shown
    assert "return v * SCALE\n" in shown + "\n"
    assert "BLOCK = 64" not in shown
    # The file itself holds the new version now.
    assert "BLOCK = 64" in "".join(linecache.getlines(module.__file__))


def test_the_globals_are_back_after_a_retrace(rewritten):
    module, inspection, _, _ = rewritten
    inspection.check(lambda v: v * 2.0 + 1.0, dtypes=["float16"])
    assert (module.BLOCK, module.SCALE) == (64, 3.0)
    assert module.helper(jnp.float32(1.0)) == -1.0


def test_pins_follow_closures_partials_and_blockspecs():
    namespace: dict = {}
    code = textwrap.dedent(
        """
        import functools
        from jax.experimental import pallas as pl
        ROWS = 8
        def index_map(i):
            return (i * ROWS, 0)
        def body(x_ref, o_ref, scale):
            o_ref[...] = x_ref[...] * scale * FACTOR
        FACTOR = 2.0
        spec = pl.BlockSpec((8, 128), index_map)
        kernel = functools.partial(body, scale=3.0)
        def make():
            return lambda x: pl.pallas_call(kernel, out_shape=x, in_specs=[spec])(x)
        """
    )
    exec(compile(code, "<pins>", "exec"), namespace)
    pins = snapshot.pin(namespace["make"]())
    # `make` reads nothing global itself; the lambda reads pl, kernel and spec; the
    # partial's body reads FACTOR; the BlockSpec's index map reads ROWS.
    assert {"kernel", "spec", "FACTOR", "ROWS"} <= set(pins.names)
    namespace["FACTOR"] = 5.0
    with pins.applied():
        assert namespace["FACTOR"] == 2.0
    assert namespace["FACTOR"] == 5.0


def test_a_magic_cell_keeps_its_kernel_after_a_later_cell(ip):
    from IPython.utils.capture import capture_output

    first = (
        textwrap.dedent(
            """\
        %%kernel fn(x) --name first
        """
        )
        + VERSION_1
        + "x = jnp.ones((256, 128), jnp.float32)\n"
    )
    with capture_output():
        assert ip.run_cell(first).success
        assert ip.run_cell(VERSION_2).success
    inspection = ip.user_ns["first"]
    assert ip.user_ns["BLOCK"] == 64
    np.testing.assert_allclose(inspection.run().values[0], 3.0)
    assert "vector<128x128xf32>" in inspection.lower("mosaic-tpu:v5e").text
    shown = "\n".join(line for f in source_tab.payload(inspection)["files"] for line in f["lines"])
    assert "SCALE = 2.0" in shown
    assert jax.default_backend() == "cpu"


def test_lowering_for_another_platform_traces_the_program_again():
    # A replayed jaxpr keeps the trace context it was traced in (a nested jit its own
    # abstract mesh), so lowerings for another platform or chip trace the function
    # again, its globals pinned. Oracle: a Python side effect runs only when traced.
    from jax.experimental import pallas as pl

    from pallaslab._src.core.program import program_of

    traced = []

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @jax.jit
    def double(x):
        traced.append(1)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    inspection = pallaslab.inspect(double, jnp.ones((8, 128)))
    program = program_of(inspection)
    before = len(traced)
    jax.jit(program.flat_fn).trace(*program.example_args)
    assert len(traced) == before  # the snapshot replays
    jax.jit(program.lowering_fn).trace(*program.example_args)
    assert len(traced) == before + 1  # the lowering function traces again
    assert inspection.lower("stablehlo:cuda").ok
