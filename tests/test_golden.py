"""Golden text: the static pages and text summaries, compared exactly with tests/golden/.

A saved notebook shows the static page; a terminal and nbval the text summary. Both
are pinned here on kernels of `tests/golden_kernels.py`, after normalising what
varies from run to run (the run's time) or from one JAX to the next (jaxpr text).
Pictures embedded as data: URIs are written out decoded, so a diff reads as SVG.
A change to the renderer changes a golden file: look at the diff, and if it is
right, rewrite them with `python -m pytest tests/test_golden.py --update-golden`
(or `PALLASLAB_UPDATE_GOLDEN=1`).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

import pallaslab
from pallaslab._src.bench import live, sweep
from pallaslab._src.views import benchview
from pallaslab._src.views.contracts import IrStatic
from pallaslab._src.views.header import Problem, summary_text
from pallaslab._src.views.static_page import static_page
from pallaslab._src.views.statichtml import nodes
from pallaslab._src.views.statichtml.panes import ir
from tests import golden_kernels as kernels

GOLDEN = Path(__file__).parent / "golden"
_DATA_URI = re.compile(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"')
_BLOCK = re.compile(r"<(div|p|details|summary|table|tr|h4|h5|ul|li|pre|figure|figcaption|img)\b")


def normalise(text: str) -> str:
    """What may vary between two runs of the same code, replaced; one block per line."""
    text = _DATA_URI.sub(
        lambda m: (
            'src="data:image/svg+xml;base64,\n' + base64.b64decode(m.group(1)).decode() + '\n"'
        ),
        text,
    )
    text = re.sub(r"\bin \d+(\.\d+)? (ms|us|s)\.", "in <time>.", text)
    # The Jaxpr section's text is JAX's (it moves between versions): its lines go.
    text = re.sub(
        r"(<b>Jaxpr</b>).*?(</details>)", r"\1 <jaxpr text: JAX's own>\2", text, flags=re.DOTALL
    )
    return _BLOCK.sub(lambda m: "\n" + m.group(0), text).strip() + "\n"


def updating(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden", default=False)) or (
        os.environ.get("PALLASLAB_UPDATE_GOLDEN") == "1"
    )


def check_golden(request: pytest.FixtureRequest, name: str, text: str) -> None:
    """Compares `text` (normalised) with tests/golden/NAME, or rewrites it when updating."""
    path = GOLDEN / name
    found = normalise(text)
    if updating(request):
        path.write_text(found, encoding="utf-8")
        return
    assert path.exists(), f"no golden {name}: run with --update-golden to write it"
    expected = path.read_text(encoding="utf-8")
    if found != expected:
        # The first differing line, for the failure message.
        for number, (a, b) in enumerate(  # noqa: B007 - the line found is reported
            zip(expected.splitlines(), found.splitlines(), strict=False), 1
        ):
            if a != b:
                break
        else:
            number, a, b = 0, f"{len(expected)} chars", f"{len(found)} chars"
        pytest.fail(
            f"{name} differs from its golden text at line {number}:\n"
            f"  golden: {a[:200]}\n  now:    {b[:200]}\n"
            "If the change is right: python -m pytest tests/test_golden.py --update-golden"
        )


@pytest.fixture(scope="module")
def added():
    inspection = pallaslab.inspect(kernels.add(), kernels.f32(1024), kernels.f32(1024))
    return inspection.with_result(inspection.run(ref=lambda x, y: x + y))


@pytest.fixture(scope="module")
def raced():
    return pallaslab.inspect(kernels.kacc(), kernels.f32(128, 256), kernels.f32(256, 128))


@pytest.fixture(scope="module")
def wrong():
    inspection = pallaslab.inspect(kernels.last_row_wrong(), kernels.f32(64, 96))
    return inspection.with_result(inspection.run(ref=lambda x: x))


def test_a_checked_add(request, added):
    check_golden(request, "add.html", static_page(added))
    check_golden(request, "add.txt", summary_text(added))


def test_a_kernel_that_races_on_gpu(request, raced):
    check_golden(request, "kacc.html", static_page(raced))
    check_golden(request, "kacc.txt", summary_text(raced))


def test_a_run_that_differs_with_a_problem(request, wrong):
    problem = Problem("Cell line 7", "the last row is off by one", "compare with x", "check")
    check_golden(request, "wrong.html", static_page(wrong, problem))
    check_golden(request, "wrong.txt", summary_text(wrong, problem))


def test_the_ir_tab(request):
    # From a fixed model (a lowering's text is the compiler's, which moves).
    model: IrStatic = {
        "pane": {
            "kernels": [],
            "targets": [],
            "initial": {"kernel": 0, "target": "ptx"},
            "files": [],
        },
        "lowered": [
            {
                "summary": {
                    "type": "lowered",
                    "key": {"kernel": 0, "target": "ptx:sm_90", "stage": ""},
                    "kernel": "add_kernel",
                    "language": "ptx",
                    "header": "PTX for sm_90 (Triton 3.4.0)",
                    "notes": ["Lowered for an abstract H100."],
                    "seconds": 0.2,
                    "error": None,
                    "resources": {
                        "kind": "gpu",
                        "summary": "sm_90 · 24 registers/thread · spills: 0 B stores, 0 B loads",
                        "facts": [["architecture", "sm_90"]],
                        "occupancy": [],
                    },
                    "stages": [],
                    "lines": 4,
                    "chunks": 1,
                    "mapped": 1,
                    "finalTitle": "",
                    "stageTitles": [],
                    "costs": [],
                    "costNote": "",
                    "unlinked": "",
                },
                "first": {
                    "type": "chunk",
                    "index": 0,
                    "first": 1,
                    "lines": [".visible .entry add_kernel(", "\tmov.u32 %r1, %ctaid.x;", "\tret;"],
                    "map": [[2, 0, 3]],
                    "last": True,
                },
            },
            {
                "summary": {
                    "type": "lowered",
                    "key": {"kernel": 0, "target": "mosaic-tpu:v5e", "stage": ""},
                    "kernel": "add_kernel",
                    "language": "mlir",
                    "header": "Mosaic TPU for v5e",
                    "notes": [],
                    "seconds": 0.1,
                    "error": {
                        "message": "block (8, 100) breaks the (8, 128) rule",
                        "kind": "tiling",
                        "detail": "",
                        "where": {"file": "k.py", "label": "k.py", "line": 12},
                    },
                    "resources": None,
                    "stages": [],
                    "lines": 0,
                    "chunks": 0,
                    "mapped": 0,
                    "finalTitle": "",
                    "stageTitles": [],
                    "costs": [],
                    "costNote": "",
                    "unlinked": "",
                },
                "first": None,
            },
        ],
    }
    page = "".join(nodes.to_html(part) for part in ir(model))
    check_golden(request, "ir.html", page)


def test_a_benchmark_summary(request):
    plan = live.Plan(
        "matmul vs XLA",
        "sweep",
        4,
        "size",
        "",
        "gpu",
        "NVIDIA H100",
        "H100",
        9.9e14,
        3.35e12,
        "H100 SXM",
    )
    rows = [
        sweep.Row("pallas", "1024", size=1024, x=1024.0, median_ms=0.5, tflops=4.3).to_json(),
        sweep.Row("xla", "1024", size=1024, x=1024.0, median_ms=0.6, tflops=3.6).to_json(),
        sweep.Row(
            "pallas",
            "2048",
            size=2048,
            status="failed to compile",
            error="out of shared memory\nat line 3",
        ).to_json(),
    ]
    progress = {"state": "finished", "done": 3, "total": 4, "message": ""}
    check_golden(request, "bench.txt", benchview.summary_text(plan.to_json(), rows, progress))


def test_a_change_to_the_page_is_a_difference(request, added, monkeypatch):
    if updating(request):
        pytest.skip("the goldens are being rewritten")
    golden = (GOLDEN / "add.html").read_text(encoding="utf-8")
    assert normalise(static_page(added)) == golden
    monkeypatch.setitem(nodes.STYLES, "pl-badge", "color:red")
    assert normalise(static_page(added)) != golden
    # Times are normalised: another run's time is no difference.
    assert normalise("Ran on cpu in 1.5 ms.") == normalise("Ran on cpu in 22 us.")


def test_the_diff_tab(request):
    # From a fixed record (the IR text is the compiler's, which moves); the source
    # links point into golden_kernels.py, whose lines are pinned with the goldens.
    from pallaslab._src.records.diffs import Delta, Diff, IrDiff, LinePair
    from pallaslab._src.views.diffview import static_html

    file = kernels.__file__
    line = kernels.add_kernel.__code__.co_firstlineno + 1
    found = Diff(
        a_name="_kernel",
        b_name="this cell",
        a_kernel="add_kernel",
        b_kernel="add_kernel",
        chip="v5e",
        deltas=(
            Delta("config", "BLOCK", 128, 256),
            Delta("kernel", "grid", "(8,)", "(4,)"),
            Delta("kernel", "target", "mosaic-tpu:v5e", "mosaic-tpu:v5e"),
            Delta("resources", "VMEM", 3072, 6144, unit="B", better="lower", headline=True),
            Delta("tiles", "HBM traffic", 12288, 12288, unit="B", better="lower", headline=True),
            Delta("check", "check", "matches", "matches", headline=True),
            Delta("timing", "time", 1.0, 0.5, unit="ms", better="lower", headline=True),
        ),
        irs=(
            IrDiff(
                title="Mosaic TPU",
                a_target="mosaic-tpu:v5e",
                b_target="mosaic-tpu:v5e",
                language="mlir",
                pairs=(
                    *(LinePair("equal", k, k, f"%{k} = x", f"%{k} = x") for k in range(1, 9)),
                    LinePair(
                        "replace",
                        9,
                        9,
                        "%9 = vector.load %a : vector<128xf32>",
                        "%9 = vector.load %a : vector<256xf32>",
                        ((file, line),),
                        ((file, line),),
                    ),
                    LinePair("insert", None, 10, "", "scf.yield"),
                    LinePair("equal", 10, 11, "return", "return"),
                ),
            ),
        ),
        notes=("registers need a PTX compile",),
    )
    check_golden(request, "diff.html", static_html(found))
