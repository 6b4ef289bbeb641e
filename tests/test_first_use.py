"""What a new user stumbled on (issue 15): each stumble, checked where it happened."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import nbformat
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src import cli
from pallaslab._src.geometry import merit
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.views.static_page import static_tab
from tests import corpus
from tests.test_cli import KERNELS as CLI_KERNELS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _lower(tmp_path, capsys, *flags):
    path = tmp_path / "kernels.py"
    path.write_text(CLI_KERNELS)
    argv = ["lower", f"{path}:add", "-t", "mosaic-tpu:v5e", "-a", "f32[1024],f32[1024]"]
    code = cli.main([*argv, *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_cli_resources_come_after_the_mapped_text(tmp_path, capsys):
    out = _lower(tmp_path, capsys, "--map", "--resources")
    lines = out.splitlines()
    # The mapped IR: the add is on kernels.py line 5, and the line carries it.
    add = next(n for n, line in enumerate(lines) if "arith.addf" in line)
    assert lines[add].lstrip().startswith("kernels.py:5 | ")
    # The resources follow the text, as comments of the IR's language.
    vmem = next(n for n, line in enumerate(lines) if "VMEM of blocks and scratch" in line)
    assert vmem > add and lines[vmem].startswith("// ")
    assert any("x_ref" in line for line in lines[vmem:])


def test_cli_resources_only_prints_no_text(tmp_path, capsys):
    out = _lower(tmp_path, capsys, "--resources-only")
    assert "VMEM of blocks and scratch" in out and "arith.addf" not in out
    assert "arith.addf" in _lower(tmp_path, capsys, "--resources")


def test_kernel_help_shows_the_cell_magic_usage(ip):
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        ip.run_cell("%%kernel?")
    text = captured.stdout
    usage = text[text.index("::") :].split("\n\n")[1].strip()
    # A cell magic, its call first, then the options.
    assert usage.startswith("%%kernel [CALL] [--ref EXPR]")
    assert "  %kernel" not in text and "positional arguments" not in text
    assert "CALL, the call on the" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_open_unmodified(path):
    """JupyterLab marks a notebook modified as it opens when it must change anything."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import get_kernel_dict

    raw = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(raw, as_version=nbformat.NO_CONVERT)
    # Nothing to upgrade: the current format, every cell with an id ...
    assert (notebook.nbformat, notebook.nbformat_minor) == (
        nbformat.current_nbformat,
        nbformat.current_nbformat_minor,
    )
    assert all(cell.get("id") for cell in notebook.cells)
    # ... written as Jupyter's server writes it ...
    assert nbformat.writes(notebook) + "\n" == raw
    # ... and the kernelspec and language_info Lab sets from the kernel it starts
    # (ipykernel's, as a fresh clone's environment has it; the Python version varies).
    spec = get_kernel_dict()
    assert dict(notebook.metadata.kernelspec) == {
        "display_name": spec["display_name"],
        "language": spec["language"],
        "name": "python3",
    }
    expected = {k: v for k, v in IPythonKernel.language_info.items() if k != "version"}
    saved = dict(notebook.metadata.language_info)
    assert saved.pop("version", None) and saved == expected


# Where students and users read: the course, its solutions, the README, the package
# (messages, docstrings, the widget's scripts).
_READ_BY_USERS = [
    *NOTEBOOKS,
    *sorted((ROOT / "notebooks" / "solutions").glob("*.py")),
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "pallaslab").rglob("*") if p.suffix in {".py", ".js", ".json"}),
]
# Internal names of the documents pallaslab grew from, meaningless to a reader.
_SEED_NAMES = re.compile(r"\bseeds? ?(?:0\d\d|document|tutorial|essay|note)\b|\bthe seed's\b", re.I)


def test_sources_are_cited_by_name_not_by_seed_number():
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)!r}"
        for path in _READ_BY_USERS
        if path.is_file()
        for match in _SEED_NAMES.finditer(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert found == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for title in (
        "Pallas Design",
        "How to Write a Matrix Multiplication Kernel using Pallas",
        "A Case for Tracing Based DSL Kernel Languages",
    ):
        assert title in readme


# ---------------------------------------------------------------------------
# MXU / tensor-core / bf16 advice only where a matrix product is.

# A GPU's "tensor cores" (a TPU's "TensorCores" are its cores, for any work).
_MATRIX_WORDS = re.compile(r"MXU|[Tt]ensor[ -]cores?|bf16|BF16|bfloat16|matrix products run")


def _elementwise_add(dtype):

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    shape = jax.ShapeDtypeStruct((256, 512), dtype)
    call = pl.pallas_call(
        add_kernel,
        out_shape=shape,
        grid=(2, 4),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, j))] * 2,
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
    )
    return call, (shape, shape)


def _matmul(dtype, block=128):

    def matmul_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...]).astype(o_ref.dtype)

    x = jax.ShapeDtypeStruct((256, 256), dtype)
    call = pl.pallas_call(
        matmul_kernel,
        out_shape=x,
        grid=(256 // block, 256 // block),
        in_specs=[
            pl.BlockSpec((block, 256), lambda i, j: (i, 0)),
            pl.BlockSpec((256, block), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((block, block), lambda i, j: (i, j)),
    )
    return call, (x, x)


def _advice(inspection):
    """Every chip's roofline notes and peak names, and every chip's hints, in words."""

    kernel = inspection.kernels[0]
    words = []
    for schedule in ("tpu", "gpu"):
        figures = merit.kernel_merit(TileMap(kernel), schedule)
        for chip in merit.chips(schedule):
            fit = merit.on_chip(figures, chip)
            words += [fit.peak_name, *fit.notes]
    for chip in ("v5e", "v6e", "H100", "A100"):
        words += [h.message for h in pallaslab.hints(inspection, chip=chip)]
    return words


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_elementwise_kernel_gets_no_matrix_unit_advice(dtype):

    call, args = _elementwise_add(dtype)
    inspection = pallaslab.inspect(call, *args)
    work = inspection.kernels[0].work
    assert work.matmul_flops == 0 and work.matmul_dtypes == ()
    assert work.flops == 256 * 512  # one add per element
    advice = _advice(inspection)
    assert advice and [w for w in advice if _MATRIX_WORDS.search(w)] == []


def test_a_bf16_matmul_gets_matrix_unit_advice():

    call, args = _matmul("bfloat16", block=64)
    inspection = pallaslab.inspect(call, *args)
    work = inspection.kernels[0].work
    assert work.matmul_flops == 2 * 256 * 256 * 256 and work.matmul_dtypes == ("bfloat16",)
    tiles = TileMap(inspection.kernels[0])
    tpu = merit.on_chip(merit.kernel_merit(tiles, "tpu"), "v5e")
    gpu = merit.on_chip(merit.kernel_merit(tiles, "gpu"), "H100")
    assert tpu.peak_name == "dense bf16 (MXU)" and not any("passes" in n for n in tpu.notes)
    assert gpu.peak_name == "dense bf16 tensor cores"
    # 64-wide blocks use half of v6e's 256x256 MXU: the hint says so.
    assert any("MXU" in h.message for h in pallaslab.hints(inspection, chip="v6e"))


def test_an_f32_matmul_is_told_about_the_mxu_passes():

    call, args = _matmul("float32")
    tiles = TileMap(pallaslab.inspect(call, *args).kernels[0])
    tpu = merit.on_chip(merit.kernel_merit(tiles, "tpu"), "v5e")
    assert any("several bf16 passes" in n for n in tpu.notes)
    gpu = merit.on_chip(merit.kernel_merit(tiles, "gpu"), "H100")
    assert gpu.peak_name == "fp32"


# ---------------------------------------------------------------------------
# Names: the user's, never JAX's "args[0]"; a shared BlockSpec names each operand.

SHARED_SPEC_CELL = """\
def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

spec = pl.BlockSpec((128,), lambda i: (i,))
add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
                     grid=(8,), in_specs=[spec, spec], out_specs=spec)
x = jnp.arange(1024.0); y = 2 * x
"""


def _bare_add():
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((128,), lambda i: (i,))
    return pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
        grid=(8,),
        in_specs=[spec, spec],
        out_specs=spec,
    )


def _names(inspection):
    return (
        [a.path for a in inspection.args],
        [[(o.name, o.origin) for o in k.operands if o.role == "in"] for k in inspection.kernels],
    )


def test_the_kernels_tab_names_a_bare_pallas_call_s_operands_as_the_cell_does(ip):
    from pallaslab._src.views.tabs import overview, source

    ip.run_cell("import jax, jax.numpy as jnp\nfrom jax.experimental import pallas as pl")
    result = ip.run_cell_magic("kernel", "add(x, y) --no-run", SHARED_SPEC_CELL)
    assert result is None
    inspection = ip.user_ns["_kernel"]
    assert _names(inspection) == (["x", "y"], [[("x_ref", "x"), ("y_ref", "y")]])
    program = overview.payload(inspection)["program"]
    assert [a["path"] for a in program["args"]] == ["x", "y"]
    assert "args[" not in static_tab(inspection, "overview")
    # One spec object, one index map, one line: each operand named on it.
    (cell,) = source.payload(inspection)["files"]
    marks = {m["line"]: m["text"] for m in cell["marks"]}
    spec_line = (
        1 + SHARED_SPEC_CELL.splitlines().index("spec = pl.BlockSpec((128,), lambda i: (i,))") + 1
    )
    assert marks[spec_line] == "BlockSpec of x_ref, y_ref and o_ref"


def test_unnamed_arguments_take_the_kernel_s_parameter_names():
    add = _bare_add()
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    # A bare pallas_call, and a function of *args, name nothing: the kernel does.
    assert _names(pallaslab.inspect(add, x, x)) == (
        ["x_ref", "y_ref"],
        [[("x_ref", "x_ref"), ("y_ref", "y_ref")]],
    )

    def forward(*args):
        return add(*args)

    assert _names(pallaslab.inspect(forward, x, x))[0] == ["x_ref", "y_ref"]
    assert _names(pallaslab.inspect(jax.jit(add), x, x))[0] == ["x_ref", "y_ref"]

    # The function's own names win, through jit; values computed on the way keep
    # JAX's name (they are no argument of the program).
    @jax.jit
    def swapped(a, b):
        return add(b, a) + add(2 * a, b)

    assert _names(pallaslab.inspect(swapped, x, x)) == (
        ["a", "b"],
        [[("x_ref", "b"), ("y_ref", "a")], [("x_ref", "args[0]"), ("y_ref", "b")]],
    )

    # Two kernels with the same parameter names: names stay unique.
    def twice(*args):
        return add(args[0], args[1]) + add(args[2], args[3])

    paths = _names(pallaslab.inspect(twice, x, x, x, x))[0]
    assert paths == ["x_ref", "y_ref", "args[2]", "args[3]"]


def test_call_argument_names():
    from pallaslab._src.core.session import call_argument_names

    assert call_argument_names("add(x, y)") == ("x", "y")
    assert call_argument_names("f(p.w, xs[0], 2 * y, k=z)") == ("p.w", "xs[0]", None)
    assert call_argument_names("f(x, *rest, y)") == ("x",)
    assert call_argument_names("not a call") == ()


# ---------------------------------------------------------------------------
# Library internals are never anyone's source.


def _recorded_files(inspection, *, lower=()):
    """Every (what, file) an inspection's records point at as source."""
    found = [("program jaxpr", f) for _, f, _ in inspection.jaxpr_source_map]
    for kernel in inspection.kernels:
        for what, location in (("source", kernel.source), ("call site", kernel.call_site)):
            if location is not None:
                found.append((f"{kernel.name} {what}", location.file))
        found += [(f"{kernel.name} jaxpr", f) for _, f, _ in kernel.jaxpr_source_map]
        for operand in kernel.operands:
            if operand.index_map is not None and operand.index_map.source_file:
                found.append((f"{operand.label} index map", operand.index_map.source_file))
        for target in lower:
            lowered = inspection.lower(target, kernel.index)
            found += [(f"{kernel.name} {target}", f) for _, f, _ in lowered.source_map]
            if lowered.error is not None and lowered.error.location is not None:
                found.append((f"{kernel.name} {target} error", lowered.error.location.file))
    for hint in pallaslab.hints(inspection, masks=False):
        if hint.location is not None:
            found.append((f"hint {hint.id}", hint.location.file))
    return found


def _internal(found):
    from pallaslab._src.base import sources

    return [(what, file) for what, file in found if sources.is_internal_file(file)]


def test_a_default_blockspec_points_at_no_source_and_says_what_it_is(tmp_path):
    from pallaslab._src.views.tabs import overview, source

    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    x = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    # No BlockSpecs at all, and a BlockSpec with a block shape but no index map.
    whole = pl.pallas_call(copy_kernel, out_shape=x)
    no_map = pl.pallas_call(
        copy_kernel,
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 128))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
    )
    inspection = pallaslab.inspect(whole, x)
    assert _internal(_recorded_files(inspection, lower=("mosaic-tpu:v5e",))) == []
    maps = [o.index_map for o in inspection.kernels[0].operands]
    assert all(m.default and m.source_file == "" and m.source_line == 0 for m in maps)
    table = overview.payload(inspection)["kernels"][0]["operands"]
    assert [o["indexMap"] for o in table] == ["default BlockSpec: the whole array"] * 2
    assert "core.py" not in static_tab(inspection, "overview")
    assert all("jax" not in f["label"] for f in source.payload(inspection)["files"])

    inspection = pallaslab.inspect(no_map, jax.ShapeDtypeStruct((16, 128), jnp.float32))
    x_map, o_map = (o.index_map for o in inspection.kernels[0].operands)
    assert x_map.default and not o_map.default and o_map.source_file == __file__
    table = overview.payload(inspection)["kernels"][0]["operands"]
    assert [o["indexMap"] for o in table] == ["no index map: block 0", "lambda i: (i, 0)"]


def _plgpu_body(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def test_a_plgpu_kernel_is_defined_and_called_in_user_code():
    import inspect as pyinspect
    import warnings

    from jax.experimental.pallas import mosaic_gpu as plgpu

    def add_one(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # out_shape -> out_type
            made = plgpu.kernel(_plgpu_body, out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
        return made(x)

    inspection = pallaslab.inspect(add_one, jax.ShapeDtypeStruct((128,), jnp.float32))
    (kernel,) = inspection.kernels
    assert _internal(_recorded_files(inspection)) == []
    # Defined at its def line, run from the line that calls it: not JAX's wrapper.
    assert (kernel.source.file, kernel.source.line) == (
        __file__,
        pyinspect.getsourcelines(_plgpu_body)[1],
    )
    assert kernel.call_site is not None and kernel.call_site.file == __file__
    # Its refs take the kernel function's names, not the wrapper's ("refs[0]").
    assert [(o.name, o.origin) for o in kernel.operands] == [
        ("x_ref", "x"),
        ("o_ref", "outputs[0]"),
    ]


@pytest.mark.parametrize("make", corpus.ALL, ids=lambda m: m.__name__)
def test_no_record_of_the_corpus_points_into_internals(make):
    case = make()
    inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
    assert _internal(_recorded_files(inspection, lower=("stablehlo",))) == []
