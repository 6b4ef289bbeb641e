"""scripts/device-check: the wheels check, the plan, and sections that fail alone.

The GPU run itself needs a GPU machine; everything around it is checked here.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device-check"


def _load():
    loader = importlib.machinery.SourceFileLoader("device_check", str(SCRIPT))
    spec = importlib.util.spec_from_loader("device_check", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_check"] = module  # dataclasses look their module up
    loader.exec_module(module)
    return module


device_check = _load()


def make_wheel(folder: Path, project: str, version: str = "1.0", tags="py3-none-any", requires=()):
    """A minimal wheel: a dist-info with METADATA (what the check reads)."""
    dist = project.replace("-", "_")
    path = folder / f"{dist}-{version}-{tags}.whl"
    lines = ["Metadata-Version: 2.1", f"Name: {project}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")
    return path


def ready_wheels(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for project in device_check.REQUIRED:
        make_wheel(folder, project, requires=["traitlets>=5"] if project == "ipython" else ())
    make_wheel(
        folder,
        "pyzmq",
        "27.0",
        "cp312-abi3-manylinux_2_28_x86_64",
        requires=['cffi; implementation_name == "pypy"', "tornado>=6"],
    )
    return folder


def dry_run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_dry_run_prints_the_plan_and_passes_ready_wheels(tmp_path):
    wheels = ready_wheels(tmp_path / "wheels")
    done = dry_run("--wheels", str(wheels))
    assert done.returncode == 0, done.stdout + done.stderr
    for name in (
        "env",
        "cpu-suite",
        "gpu-tests",
        "notebooks",
        "harness",
        "table",
        "resources",
        "races",
        "mosaic-gpu",
        "cluster",
    ):
        assert f"  {name} " in done.stdout, name
    assert "gpu_mosaic.py" in done.stdout
    assert "tune_cluster.py --gpu" in done.stdout
    assert "JAX_PLATFORMS=cpu" in done.stdout and "JAX_PLATFORMS=cuda" in done.stdout
    assert "nbval" in done.stdout and "gpu_table.py" in done.stdout
    assert "wheels: ready" in done.stdout
    # pyzmq needs tornado (not carried: expected on the machine); cffi only on PyPy.
    assert "tornado" in done.stdout and "cffi" not in done.stdout


def test_dry_run_names_each_problem_with_the_wheels(tmp_path):
    wheels = ready_wheels(tmp_path / "wheels")
    (wheels / "nbval-1.0-py3-none-any.whl").unlink()  # a required project missing
    make_wheel(wheels, "anywidget", "2.0")  # two versions of one project
    make_wheel(wheels, "psutil", "7.0", "cp312-cp312-win_amd64")  # another platform
    make_wheel(wheels, "jax", "0.11.2")  # the machine's own stack
    done = dry_run("--wheels", str(wheels))
    assert done.returncode == 1
    problems = [line for line in done.stdout.splitlines() if line.startswith("problem:")]
    text = "\n".join(problems)
    assert "nbval: no wheel" in text
    assert "anywidget: 2 versions" in text
    assert "win_amd64.whl: not for CPython 3.12" in text
    assert "jax-0.11.2-py3-none-any.whl: the machine's own jax is never replaced" in text
    assert "4 problem(s)" in done.stdout


def test_dry_run_without_wheels_says_how_to_get_them(tmp_path):
    done = dry_run("--wheels", str(tmp_path / "none"), "--only", "table")
    assert done.returncode == 1
    assert "run scripts/device-wheels" in done.stdout
    assert "  table " in done.stdout and "  races " not in done.stdout


def test_only_and_skip_choose_sections_in_order():
    options = device_check.parse([])
    every = device_check.sections(options)
    chosen = device_check.choose(every, "races,table", None)
    assert [s.name for s in chosen] == ["table", "races"]
    rest = device_check.choose(every, None, "cpu-suite,notebooks")
    assert "cpu-suite" not in [s.name for s in rest] and len(rest) == len(every) - 2
    with pytest.raises(SystemExit, match="unknown section"):
        device_check.choose(every, "tabel", None)


def test_wheel_tags_and_markers():
    Wheel = device_check.Wheel
    ok = [
        ("py3", "none", "any"),
        ("py2.py3", "none", "any"),
        ("cp312", "cp312", "manylinux_2_17_x86_64.manylinux2014_x86_64"),
        ("cp38", "abi3", "manylinux_2_28_x86_64"),
    ]
    bad = [
        ("cp311", "cp311", "manylinux_2_17_x86_64"),
        ("cp312", "cp312", "macosx_11_0_arm64"),
        ("cp312", "cp312", "manylinux_2_17_aarch64"),
        ("cp313", "abi3", "manylinux_2_28_x86_64"),
    ]
    for tags in ok:
        assert Wheel(Path("x.whl"), "x", "1", tags).compatible, tags
    for tags in bad:
        assert not Wheel(Path("x.whl"), "x", "1", tags).compatible, tags
    holds = device_check._marker_holds
    assert holds('python_version >= "3.10"') and holds('sys_platform == "linux"')
    assert not holds('sys_platform == "darwin"') and not holds('extra == "test"')
    assert not holds('implementation_name == "pypy"')


def _section(name, code, timeout_s=60, needs_gpu=False, show_stdout=True):
    return device_check.Section(
        name, name.title(), (sys.executable, "-c", code), timeout_s, needs_gpu, (), show_stdout
    )


def test_sections_run_alone_a_failure_or_a_hang_stops_no_other():
    sections = [
        _section("broken", "import sys; print('half'); sys.exit(3)"),
        _section("hangs", "import time; time.sleep(60)", timeout_s=2),
        _section("table", "print('| a | b |')"),
        _section("gpu-only", "print('never')", needs_gpu=True),
        _section("skips", "import sys; print('no GPU here'); sys.exit(2)"),
    ]
    heard = []
    outcomes = device_check.run_all(sections, {}, 300, False, on_outcome=heard.append)
    statuses = {o.section.name: o.status for o in outcomes}
    assert statuses == {
        "broken": "fail",
        "hangs": "timeout",
        "table": "pass",
        "gpu-only": "skipped",
        "skips": "skipped",
    }
    assert [o.section.name for o in heard] == [s.name for s in sections]
    by_name = {o.section.name: o for o in outcomes}
    assert "| a | b |" in by_name["table"].body and "half" in by_name["broken"].body
    assert "stopped after 2 s" in by_name["hangs"].body
    report = device_check.format_report(["- machine: test"], outcomes)
    assert report.startswith("# pallaslab device check")
    for name, status in statuses.items():
        assert f"| {name} | {status} |" in report
        assert f"## {name}: " in report


def test_sections_the_budget_cannot_fit_are_reported_not_run():
    ran = []

    def runner(section, env, timeout_s):
        ran.append((section.name, timeout_s))
        return device_check.Outcome(section, "pass", 1.0, "ok")

    sections = [_section("first", "", timeout_s=30), _section("second", "", timeout_s=300)]
    outcomes = device_check.run_all(sections, {}, 40, True, runner=runner)
    assert ran[0][0] == "first" and ran[0][1] <= 30
    assert [o.status for o in outcomes] == ["pass", "not run"]
    assert "--only second" in outcomes[1].body


def test_a_broken_runner_fails_its_section_only():
    def runner(section, env, timeout_s):
        if section.name == "first":
            raise RuntimeError("boom")
        return device_check.Outcome(section, "pass")

    sections = [_section("first", ""), _section("second", "")]
    outcomes = device_check.run_all(sections, {}, 300, True, runner=runner)
    assert [o.status for o in outcomes] == ["fail", "pass"]
    assert "boom" in outcomes[0].body
