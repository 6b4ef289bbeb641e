"""Notebook cells are named as the notebook names them ("Cell [3] line 10"), everywhere.

IPython compiles each cell under a temporary file name: `<ipython-input-6-a1b2c3>` in
a terminal or the testing shell, `/tmp/ipykernel_<pid>/<hash>.py` in a Jupyter
kernel (ipykernel's compiler). A kernel defined in a plain cell (not a `%%kernel`
one) and inspected from another is shown in hints, diffs, the Kernels, Source, Jaxpr
and IR tabs, lowering errors and records' text: none may show those names. The
oracle is the shell's own record of which cell ran as which number.
"""

from __future__ import annotations

import html
import re

import pytest

from pallaslab._src.base import sources

DEFINE = """\
import jax, jax.numpy as jnp, pallaslab
from jax.experimental import pallas as pl

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

def make(block):
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((8, 1000), jnp.float32),
                          grid=(1000 // block,),
                          in_specs=[pl.BlockSpec((8, block), lambda i: (0, i))] * 2,
                          out_specs=pl.BlockSpec((8, block), lambda i: (0, i)))
x = jnp.ones((8, 1000)); y = x
"""
# Line numbers in DEFINE: the kernel's def, its body, the in_specs' index map.
KERNEL_LINE, BODY_LINE, IN_SPECS_LINE = 4, 5, 10

INSPECT = """\
a = pallaslab.inspect(make(100), x, y)
b = pallaslab.inspect(make(200), x, y)
hs = a.hints(chip="v5e")
d = pallaslab.diff(a, b)
tpu = a.lower("mosaic-tpu:v5e")
"""

TEMPORARY = re.compile(r"ipython-input|ipykernel_|\d{6,}\.py")


@pytest.fixture(params=["ipython", "ipykernel"])
def cells(request, ip):
    """Runs DEFINE and INSPECT as two plain cells; returns (namespace, DEFINE's number)."""
    compiler = ip.compile
    if request.param == "ipykernel":
        ipykernel_compiler = pytest.importorskip("ipykernel.compiler")
        ip.compile = ipykernel_compiler.XCachingCompiler()
    try:
        number = ip.execution_count
        first = ip.run_cell(DEFINE, store_history=True)
        assert first.success, first.error_in_exec
        second = ip.run_cell(INSPECT, store_history=True)
        assert second.success, second.error_in_exec
        files = {n: f for f, n in ip.compile._filename_map.items()}
        # The oracle: the file the shell compiled the first cell under, and its number.
        assert files[number] in {k.source.file for k in ip.user_ns["a"].kernels}
        if request.param == "ipykernel":
            assert "ipykernel_" in files[number]
        yield ip.user_ns, number
    finally:
        ip.compile = compiler


def visible_text(markup: str) -> str:
    """What a page shows: tags (and their attributes) dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def test_records_and_messages_name_the_cell(cells):
    ns, number = cells
    kernel = ns["a"].kernels[0]
    assert str(kernel.source) == f"Cell [{number}] line {KERNEL_LINE}"
    hints = [str(h) for h in ns["hs"] if h.location is not None]
    assert hints, "the (8, 100) blocks break the TPU tiling rule"
    assert all(h.startswith(f"Cell [{number}] line ") for h in hints), hints
    assert any(f"Cell [{number}] line {IN_SPECS_LINE}: error:" in h for h in hints), hints
    error = ns["tpu"].error
    assert error is not None and str(error).startswith(f"Cell [{number}] line "), error
    for text in [*hints, str(ns["d"]), str(error), repr(ns["a"])]:
        assert not TEMPORARY.search(text), text


def test_the_inspectors_tabs_name_the_cell(cells):
    from pallaslab._src.views.static_page import static_tab

    ns, number = cells
    shown = {tab: visible_text(static_tab(ns["a"], tab)) for tab in ("overview", "source", "ir")}
    assert f"defined at Cell [{number}] line {KERNEL_LINE}" in shown["overview"]
    assert f"Cell [{number}] line {IN_SPECS_LINE}" in shown["overview"]  # the hints
    assert f"Cell [{number}]" in shown["source"]
    assert f"Cell [{number}] line" in shown["ir"]  # the TPU lowering's error
    for tab, text in shown.items():
        assert not TEMPORARY.search(text), (tab, TEMPORARY.search(text))


def test_the_tiles_tabs_accesses_name_the_cell(cells):
    from pallaslab._src.views.inspector import Inspector

    ns, number = cells
    reply = Inspector(ns["a"]).request(
        {"tab": "tiles", "body": {"kind": "accesses", "kernel": 0, "program": [1]}}
    )
    assert {(a["file"], a["line"]) for a in reply["accesses"]} == {(f"Cell [{number}]", BODY_LINE)}


def test_the_diff_view_names_the_cell(cells):
    from pallaslab._src.views.diffview import static_html

    ns, number = cells
    text = visible_text(static_html(ns["d"]))
    assert f"Cell [{number}]:{BODY_LINE}" in text  # a jaxpr line's source link
    assert not TEMPORARY.search(text), TEMPORARY.search(text)


def test_cell_files_the_shell_no_longer_numbers():
    # IPython's own numbered names read as the cell; another kernel's file as a cell.
    assert sources.location("<ipython-input-6-a1b2c3d4e5f6>", 10) == "Cell [6] line 10"
    assert sources.location("/tmp/ipykernel_4242/2371327097.py", 10) == ("a notebook cell line 10")
    assert sources.label("/tmp/ipykernel_4242/2371327097.py") == "a notebook cell"
    # The user's own files keep the path compilers print, for editors to follow.
    assert sources.location("/home/me/kernels.py", 31) == "/home/me/kernels.py:31"
    assert sources.label("/home/me/kernels.py") == "kernels.py"
    assert sources.location("/home/me/kernels.py", None) == "/home/me/kernels.py"


def test_the_running_shells_numbers_come_first():
    sources.register_cell_numbers(lambda: {"/tmp/ipykernel_1/99.py": 7})
    try:
        assert sources.location("/tmp/ipykernel_1/99.py", 3) == "Cell [7] line 3"
        assert sources.message_name("/tmp/ipykernel_1/99.py") == "Cell [7] line"
    finally:
        import pallaslab  # its registration, put back

        sources.register_cell_numbers(pallaslab._cell_numbers)
