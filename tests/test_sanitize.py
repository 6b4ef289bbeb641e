"""`pytest --pallaslab` on a tiny kernel library of our own (tests/sanitize_lib/).

The library's tests run in a subprocess pytest, as a kernel library's CI would run
them: without the plugin (nothing loaded, all pass), with it (findings at the lines
the library marks, clean kernels clean, outcomes unchanged, reports written) and with
`--pallaslab-strict` (the tests that ran a faulty kernel fail, the others pass).
Oracles: the marks in the library's source (`# marks: NAME` on the line each problem
is on), and the kernels' own design (each written to have one problem, or none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pallaslab._src.records.sanitize import SanitizerReport

LIB = Path(__file__).parent / "sanitize_lib"
KERNELS = LIB / "kernels.py"

# Each faulty kernel, the finding it must give, and the mark of its line.
EXPECTED = {
    "_last_block_kernel": ("race", "race"),
    "_shifted_read_kernel": ("out-of-bounds", "out-of-bounds"),
    "_accumulate_kernel": ("uninitialized", "uninitialized"),
    "_block_sum_kernel": ("padding", "padding"),
    "_scale_kernel": ("same-value-writes", "same-value"),
    # Kernels the emulator does not model, checked in JAX's interpreters.
    "_threads_race_kernel": ("race", "thread-race"),
    "_dma_read_before_wait_kernel": ("race", "dma-race"),
}
CLEAN = "_add_kernel"
CLEAN_THREADS = "_threads_add_kernel"
CLEAN_DYNAMIC = "_double_kernel"
FAULTY_TESTS = {
    "test_last_block_wins",
    "test_shifted_read",
    "test_accumulate_unzeroed",
    "test_block_sums",
    "test_vmapped_race",
    "test_threads_race",
    "test_dma_read_before_wait",
}


def _mark_line(name: str) -> int:
    for number, line in enumerate(KERNELS.read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# marks: {name}"):
            return number
    raise AssertionError(f"no line marked {name}")


def _run(*args: str, expect: str, cli: bool = False) -> subprocess.CompletedProcess[str]:
    """The library's tests in a subprocess: pytest, or `pallaslab sanitize` (cli)."""
    env = dict(os.environ, SANITIZE_EXPECT=expect, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")) if p
    )
    command = (
        [sys.executable, "-m", "pallaslab._src.cli", "sanitize", *args, "--", "-q", "-rA"]
        if cli
        else [sys.executable, "-m", "pytest", "-q", "-rA", *args]
    )
    return subprocess.run(
        command,
        cwd=LIB,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, Path]:
    """The library's tests under `--pallaslab` (given a path after it), with reports."""
    out = tmp_path_factory.mktemp("report") / "pallaslab-report"
    done = _run("--pallaslab", ".", f"--pallaslab-report={out}", expect="on")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(out.with_suffix(".json").read_text()), out


def test_without_the_flag_the_plugin_loads_nothing_and_outcomes_stand():
    done = _run(expect="off")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "== pallaslab ==" not in done.stdout
    assert "13 passed" in done.stdout


def test_the_plugin_module_imports_nothing_heavy():
    code = (
        "import sys, pallaslab._src.pytest_plugin; "
        "heavy = [m for m in ('jax', 'numpy', 'pallaslab._src.core') if m in sys.modules]; "
        "print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_findings_name_the_kernel_line_and_the_test(sanitized):
    _, report, _ = sanitized
    by_kernel: dict[str, list[dict]] = {}
    for call in report["calls"]:
        by_kernel.setdefault(call["kernel"], []).extend(call["findings"])
    for kernel, (kind, mark) in EXPECTED.items():
        kinds = {f["kind"] for f in by_kernel[kernel]}
        assert kind in kinds, (kernel, by_kernel[kernel])
        finding = next(f for f in by_kernel[kernel] if f["kind"] == kind)
        assert finding["file"] == str(KERNELS)
        assert finding["line"] == _mark_line(mark), (kernel, finding)
        assert finding["test"].startswith("lib_test_kernels.py::test_")


def test_clean_kernels_are_clean_and_runs_under_jit_and_vmap_are_reached(sanitized):
    _, report, _ = sanitized
    dynamic = [c for c in report["calls"] if c["kernel"] == CLEAN_DYNAMIC]
    # A grid sized at run time (jit, n traced) is emulated with the size it ran with.
    assert [(c["grid"], c["findings"], c["agrees"]) for c in dynamic] == [([4], [], True)]
    adds = [c for c in report["calls"] if c["kernel"] == CLEAN]
    # Eager (grid 4) and under jit(vmap) (a vmapped grid: another program).
    assert sorted(len(c["grid"]) for c in adds) == [1, 2]
    vmapped = next(c for c in adds if len(c["grid"]) == 2)
    assert vmapped["test"].endswith("test_jitted_vmapped_add")
    for call in adds:
        assert call["status"] == "checked"
        assert call["findings"] == []
        assert call["agrees"] is True
    # A Mosaic GPU kernel, checked in JAX's Mosaic GPU interpreter: clean there too.
    (threads,) = [c for c in report["calls"] if c["kernel"] == CLEAN_THREADS]
    assert (threads["status"], threads["findings"], threads["agrees"]) == ("checked", [], True)


def test_writes_of_the_same_values_are_a_warning_and_different_values_a_race(sanitized):
    _, report, _ = sanitized
    scale = [f for c in report["calls"] if c["kernel"] == "_scale_kernel" for f in c["findings"]]
    assert scale
    assert all(f["kind"] == "same-value-writes" and f["severity"] == "warning" for f in scale)
    races = [
        f
        for c in report["calls"]
        if c["kernel"] == "_last_block_kernel"
        for f in c["findings"]
        if f["kind"] == "race"
    ]
    assert {f["test"].rsplit("::", 1)[1] for f in races} == {
        "test_last_block_wins",
        "test_vmapped_race",
    }
    assert all(f["severity"] == "error" and f["backend"] == "gpu" for f in races)


def test_every_program_agrees_with_interpret_mode_and_nothing_crashed(sanitized):
    _, report, _ = sanitized
    totals = report["totals"]
    assert totals["crashes"] == 0
    assert totals["refused"] == 0
    # Only a racing kernel may compute otherwise when run again (its threads' order).
    assert totals["unexplained"] == 0
    disagreeing = {c["kernel"] for c in report["calls"] if c["agrees"] is False}
    assert disagreeing <= {"_threads_race_kernel"}
    assert totals["reached"] == totals["checked"] == len(report["calls"]) == 12


def test_the_summary_and_the_junit_report(sanitized):
    stdout, report, out = sanitized
    assert "== pallaslab ==" in stdout
    assert "pallaslab checked 12 of 12 distinct kernel program(s)" in stdout
    line = _mark_line("out-of-bounds")
    assert f"kernels.py:{line}: out-of-bounds: _shifted_read_kernel" in stdout
    suite = ElementTree.parse(out.with_suffix(".xml")).getroot()
    assert suite.get("tests") == "12"
    failures = [f for case in suite.iter("testcase") for f in case.iter("failure")]
    errors = [f for c in report["calls"] for f in c["findings"] if f["severity"] == "error"]
    assert len(failures) == len(errors) >= 5
    assert {f.get("type") for f in failures} >= {"race", "out-of-bounds", "uninitialized"}


def test_strict_fails_exactly_the_tests_that_ran_a_faulty_kernel():
    # Through the command line: `pallaslab sanitize --strict -- ARGS`.
    done = _run("--checks", "races,bounds,uninit,emulate", "--strict", expect="on", cli=True)
    assert done.returncode == 1
    failed = {
        line.split("::")[1].split()[0]
        for line in done.stdout.splitlines()
        if line.startswith("FAILED lib_test_kernels.py::")
    }
    assert failed == FAULTY_TESTS
    assert "pallaslab found problems in the kernels this test ran" in done.stdout


def test_a_report_reads_back_its_own_totals():
    report = SanitizerReport(checks=("races",), calls=())
    assert json.loads(report.to_json())["totals"]["reached"] == 0
    assert ElementTree.fromstring(report.to_junit_xml().split("?>", 1)[1]).get("tests") == "0"


def test_the_command_line_refuses_an_unknown_check_without_running_pytest():
    done = _run("--checks", "races,speed", expect="on", cli=True)
    assert done.returncode == 2
    assert "unknown check speed" in done.stderr
    assert "passed" not in done.stdout


def test_checks_are_parsed_from_the_option():
    from pallaslab._src import pytest_plugin

    assert pytest_plugin.parse_checks("all") == pytest_plugin.CHECKS
    assert pytest_plugin.parse_checks("uninit,races") == ("races", "uninit")
    assert pytest_plugin.parse_checks("tests/") is None  # a path: given back to pytest
    with pytest.raises(pytest.UsageError, match="unknown check speed"):
        pytest_plugin.parse_checks("races,speed")


def test_the_readme_lists_the_plugin_s_options_and_checks():
    from pallaslab._src import pytest_plugin

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Checking a test suite's kernels", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `--pallaslab")]
    listed = {line.split("`")[1].split("[")[0].split("=")[0] for line in table}

    class Group:
        def __init__(self):
            self.names: list[str] = []

        def addoption(self, name, **_):
            self.names.append(name)

    class Parser:
        def __init__(self):
            self.group = Group()

        def getgroup(self, *_):
            return self.group

    parser = Parser()
    pytest_plugin.pytest_addoption(parser)  # type: ignore[arg-type]
    assert listed == set(parser.group.names)
    for check in pytest_plugin.CHECKS:
        assert f"`{check}`" in table[0]
