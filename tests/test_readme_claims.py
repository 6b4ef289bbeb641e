"""The README's factual claims, each against the code (the README is read, not paraphrased).

Where a claim quotes a name, a label, a list or a number, the test reads it from README.md
and checks the code has the same, so neither can drift alone. Claims about behaviour
(where caches live, what the emulator leaves to Pallas' interpreter) are run.
"""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallaslab
from pallaslab._src.base import messages
from pallaslab._src.bench import live
from pallaslab._src.core import chips, compile_cache, settings
from pallaslab._src.core.jax_adapter import gpu_interpret
from pallaslab._src.records import hardware

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PARAGRAPHS = re.sub(r"\s*\n\s*", " ", README)  # sentences across line breaks


def _table_rows(header: str) -> list[list[str]]:
    """The rows of the README table whose header line starts with `header`."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


# --- Caches: `$XDG_CACHE_HOME/pallaslab`, `PALLASLAB_CACHE_DIR`, `~/.cache/pallaslab` ------


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    """No cache variable set, and a home of the test's own."""
    monkeypatch.delenv("PALLASLAB_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def _tune_once() -> Path:
    def build(SCALE):  # noqa: N803 - the name tuned
        return lambda x: x * SCALE

    x = jnp.arange(64, dtype=jnp.float32)
    result = pallaslab.tune(build, {"SCALE": [2.0]}, x, ref=lambda x: 2 * x, live=False)
    path = Path(result.cache_path)
    assert path.is_file() and path.suffix == ".json"
    return path


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"XDG_CACHE_HOME": "xdg"}, "xdg/pallaslab"),
        ({"XDG_CACHE_HOME": "xdg", "PALLASLAB_CACHE_DIR": "mine"}, "mine"),  # overrides
        ({}, "home/.cache/pallaslab"),  # XDG's default
    ],
    ids=["xdg", "override", "neither"],
)
def test_tuning_timings_are_cached_where_the_readme_says(
    cache_env, monkeypatch, variables, expected
):
    assert (
        "Tuning timings are cached under `$XDG_CACHE_HOME/pallaslab` (override with "
        "`PALLASLAB_CACHE_DIR`)" in PARAGRAPHS
    )
    for name, value in variables.items():
        monkeypatch.setenv(name, str(cache_env / value))
    path = _tune_once()
    assert path.parent == cache_env / expected / "tune"


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"PALLASLAB_CACHE_DIR": "mine", "XDG_CACHE_HOME": "xdg"}, "mine/xla"),
        ({"XDG_CACHE_HOME": "xdg"}, "xdg/pallaslab/xla"),
        ({}, "home/.cache/pallaslab/xla"),
    ],
    ids=["override", "xdg", "neither"],
)
def test_the_persistent_compile_cache_defaults_to_the_cache_directory(
    cache_env, monkeypatch, variables, expected
):
    assert (
        "by default in `xla/` under pallaslab's cache directory: `$PALLASLAB_CACHE_DIR`, else "
        "`$XDG_CACHE_HOME/pallaslab`, else `~/.cache/pallaslab`" in PARAGRAPHS
    )
    assert "Off by default" in PARAGRAPHS and compile_cache.persistent_cache_dir() is None
    for name, value in variables.items():
        monkeypatch.setenv(name, str(cache_env / value))
    try:
        directory = pallaslab.use_persistent_cache()
        assert directory == cache_env / expected and directory.is_dir()
        assert compile_cache.persistent_cache_dir() == directory
    finally:
        pallaslab.use_persistent_cache(enabled=False)
    assert compile_cache.persistent_cache_dir() is None


# --- What the emulator leaves to Pallas' interpreter, with a one-line notice -------------

X = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128)
BLOCK = pl.BlockSpec((8, 128), lambda i: (i, 0))


def _semaphores():
    def kernel(x_ref, o_ref, sem):
        pl.semaphore_signal(sem, 1)
        pl.semaphore_wait(sem, 1)
        o_ref[...] = x_ref[...] * 2

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(4,),
            in_specs=[BLOCK],
            out_specs=BLOCK,
            scratch_shapes=[pltpu.SemaphoreType.REGULAR],
        ),
    )
    return call, (X,), np.asarray(X) * 2


def _dynamic_grid():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    @jax.jit
    def program(x, programs):  # the grid's bound is known only when it runs
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            grid=(programs,),
            in_specs=[BLOCK],
            out_specs=BLOCK,
        )(x)

    return program, (X, jnp.int32(4)), np.asarray(X) + 1


def _remote_copy():
    from jax.sharding import Mesh, PartitionSpec

    try:
        from jax import shard_map
    except ImportError:  # jax 0.10: only the experimental one
        from jax.experimental.shard_map import shard_map

    def kernel(x_ref, o_ref, send, receive):
        me = jax.lax.axis_index("x")
        copy = pltpu.make_async_remote_copy(
            src_ref=x_ref, dst_ref=o_ref, send_sem=send, recv_sem=receive, device_id=me,
            device_id_type=pl.DeviceIdType.MESH,
        )  # fmt: skip
        copy.start()
        copy.wait()

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA],
    )
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    spec = PartitionSpec("x")
    loose = (
        {"check_vma": False}
        if "check_vma" in shard_map.__code__.co_varnames
        else {"check_rep": False}
    )
    program = jax.jit(shard_map(call, mesh=mesh, in_specs=spec, out_specs=spec, **loose))
    x = X[:8]
    return program, (x,), np.asarray(x)


def _tpu_mesh_kernel():
    def body(x_ref, o_ref):
        pltpu.sync_copy(x_ref, o_ref)

    mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
    kernel = pl.kernel(body, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=mesh)
    x = X[:8]
    return kernel, (x,), np.asarray(x)


FALLBACKS = {
    # name: (make, what the notice names, whether `pallaslab.emulate` warns too)
    "semaphores": (_semaphores, "it uses semaphores (semaphore_signal, semaphore_wait)", True),
    "dynamic grids": (_dynamic_grid, "its grid has bounds known only at run time", True),
    "remote copies": (_remote_copy, "it uses remote copies and collectives", True),
    # A mesh kernel never reaches the emulator: the Run tab says why (emulate is silent).
    "TPU mesh": (_tpu_mesh_kernel, "it is a mesh kernel (pl.kernel on a TPU mesh", False),
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_kernels_the_emulator_does_not_cover_run_in_pallas_interpreter(name):
    assert (
        "kernels it does not cover (DMAs and `pltpu.emit_pipeline`, semaphores, remote copies, "
        "dynamic grids) run in Pallas' interpreter, and kernels on a TPU mesh (`pl.kernel`, "
        "`pl.core_map`) in Pallas' TPU interpreter, with a one-line notice saying why"
    ) in PARAGRAPHS
    make, reason, emulate_warns = FALLBACKS[name]
    fn, args, expected = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pallaslab.emulate(fn)(*args)
    np.testing.assert_array_equal(np.asarray(out), expected)
    notices = [
        str(w.message) for w in caught if issubclass(w.category, pallaslab.types.EmulationNotice)
    ]
    assert len(notices) == (1 if emulate_warns else 0), notices
    result = pallaslab.inspect(fn, *args).run(*args)
    assert result.mode == "interpret"
    np.testing.assert_array_equal(np.asarray(result.values[0]), expected)
    (notice,) = result.notices
    assert "\n" not in notice and "ran in Pallas' interpreter" in notice and reason in notice
    for text in notices:
        assert text == notice


# --- Names, labels, lists and numbers the README quotes ----------------------------------


def test_the_cpu_timing_label_is_the_one_quoted():
    assert f'On CPU every timing is labelled "{live.CPU_LABEL}"' in PARAGRAPHS


def test_the_mosaic_gpu_label_and_default_chip_are_the_ones_quoted():
    assert f'timings are labelled "{live.MOSAIC_GPU_LABEL}"' in PARAGRAPHS
    chip, note = chips.traced_for(chips.ChipChoice(), ["mosaic_gpu"])
    assert f'the inspector\'s header says so ("for {chip} ({note})")' in PARAGRAPHS
    assert f"(from jax {gpu_interpret.SINCE})" in PARAGRAPHS


def test_the_option_table_is_the_magic_s_options(ip):
    rows = _table_rows("| option | meaning |")
    documented = {row[0].strip("`").split()[0] for row in rows} - {"CALL"}
    usage = ip.find_cell_magic("kernel").__doc__
    accepted = set(re.findall(r"\[(--[a-z-]+)", usage))
    assert documented == accepted
    assert "`%%kernel?` shows this help" in PARAGRAPHS


def test_messages_are_at_most_a_dozen_lines():
    # tests/test_bad_inputs.py holds every bad input's message to this.
    assert "Messages are at most a dozen lines" in PARAGRAPHS and messages.MAX_LINES == 12


def test_the_layout_table_names_paths_that_exist():
    # A bare file name beside a path is in that path's folder.
    named = []
    for row in _table_rows("| path | what |"):
        first, *rest = _code_spans(row[0])
        named += [
            first,
            *(name if "/" in name else str(Path(first).parent / name) for name in rest),
        ]
    assert [path for path in named if not (ROOT / path).exists()] == []


def test_the_course_table_lists_every_notebook():
    listed = [row[0].strip("`") for row in _table_rows("| notebook | what it teaches |")]
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert listed == notebooks
    # "Solutions are in `notebooks/solutions/`, one file per notebook".
    solutions = sorted(p.stem for p in (ROOT / "notebooks" / "solutions").glob("*.py"))
    assert solutions == notebooks


def test_every_jax_from_0_10_2_and_no_upper_bound():
    assert "`pyproject.toml` sets `jax>=0.10.2` and no upper bound" in PARAGRAPHS
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (jax_requirement,) = [d for d in project["dependencies"] if re.match(r"jax\b(?!lib)", d)]
    assert jax_requirement.replace(" ", "") == "jax>=0.10.2"


def test_the_compile_cache_bounds_are_the_readme_s():
    assert "bounded by a count of programs (64) and by bytes (512 MiB)" in PARAGRAPHS
    assert (compile_cache.DEFAULT_MAX_ENTRIES, compile_cache.DEFAULT_MAX_BYTES) == (64, 512 << 20)


def test_the_targets_the_readme_lists_exist():
    targets = set(pallaslab.targets())
    rows = {row[0]: row for row in _table_rows("| target | what | produced by |")}
    triton_row = next(row for key, row in rows.items() if key.startswith("`ttgir`"))
    archs = re.findall(r"sm_\d+", triton_row[0])
    assert archs == ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    for stage in ("ttgir", "llir", "ptx", "sass"):
        assert {f"{stage}:{arch}" for arch in archs} <= targets
    # "occupancy on A100, H100, H200, B200, L4, RTX 4090": the hardware table's GPUs.
    chips = re.search(r"occupancy on (.+)$", triton_row[1]).group(1)
    assert chips.replace(" and ", ", ").split(", ") == list(hardware.GPUS)
    tpu_row = next(row for key, row in rows.items() if key.startswith("`mosaic-tpu:"))
    generations = [span.removeprefix("mosaic-tpu:") for span in _code_spans(tpu_row[0])]
    assert generations == list(hardware.TPUS)
    assert {f"mosaic-tpu:{g}" for g in generations} | {f"tpu-compile:{g}" for g in generations} <= (
        targets
    )
    xla_row = next(row for key, row in rows.items() if key.startswith("`xla-gpu:"))
    listed = _code_spans(xla_row[0])
    assert listed == ["xla-gpu:A100", "H100", "H200", "B200"]
    assert {t for t in targets if t.startswith("xla-gpu:")} == {
        "xla-gpu:" + name.removeprefix("xla-gpu:") for name in listed
    }
    for name in ("stablehlo", "stablehlo:cuda", "stablehlo:tpu", "mosaic-gpu", "triton"):
        assert name in targets


def test_tpu_programs_are_traced_for_a_v5e_by_default():
    assert "the `tpu_generation` setting (v5e by default)" in PARAGRAPHS
    assert settings.Settings().tpu_generation == "v5e"


def test_the_notebook_budget_the_readme_names():
    # conftest.py's budget (tested in tests/test_notebook_budget.py) is the one quoted.
    assert "A notebook that runs past four minutes" in PARAGRAPHS
    conftest = (ROOT / "conftest.py").read_text(encoding="utf-8")
    assert 'os.environ.get("PALLASLAB_NOTEBOOK_BUDGET_S", "240")' in conftest
    assert "Every notebook runs top to bottom on a laptop's CPU in well under a minute" in (
        PARAGRAPHS
    )


def test_the_program_and_element_limits_the_readme_names():
    from pallaslab._src.core import sharing
    from pallaslab._src.geometry import limits

    assert "races and runs on CPU stop at 2^24 programs" in PARAGRAPHS
    assert limits.MAX_PROGRAMS == 2**24
    assert "past `2**28` programs x elements it checks runs of consecutive programs" in PARAGRAPHS
    assert sharing.MAX_ELEMENT_WORK == 2**28
