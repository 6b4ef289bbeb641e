"""What `pytest --pallaslab` costs: a test suite's run time with and without it.

Runs the same pytest command twice per round, side by side in one run (without the
plugin, then with it, alternating), each in a fresh process, and prints wall and CPU
seconds, their ratio, and how the plugin's time splits (checks per program, from its
report). The default suite is JAX's own `tests/pallas/pallas_test.py`, its interpret
tests (goal: under 2x); JAX's source is needed:

    python benchmarks/sanitize_overhead.py ~/src/jax                 # a clone: tag of
                                                                     # the installed jax
    python benchmarks/sanitize_overhead.py ~/src/jax --rev jax-v0.10.2 -k "Interpret and vmap"
    python benchmarks/sanitize_overhead.py ~/src/jax --tests tests/pallas/pallas_vmap_test.py
    python benchmarks/sanitize_overhead.py --suite DIR -- -k add     # any suite of yours

The clone is read with `git archive` (as scripts/jax-suite does); `--suite DIR` times
pytest in DIR instead (arguments after -- go to pytest).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _jax_suite() -> object:
    """scripts/jax-suite as a module (its export of JAX's tests)."""
    loader = importlib.machinery.SourceFileLoader("jax_suite", str(ROOT / "scripts" / "jax-suite"))
    spec = importlib.util.spec_from_loader("jax_suite", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and exit status of one pytest run."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1, 5):
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    return wall, _children_cpu() - cpu, done.returncode


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jax", nargs="?", help="a clone of JAX's repository (git dir)")
    parser.add_argument("--rev", help="its revision (default: the installed jax's tag)")
    parser.add_argument(
        "--tests",
        default="tests/pallas/pallas_test.py",
        help="the test file(s) of JAX's repository to time",
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        default="Interpret",
        help="pytest -k (default: JAX's interpret-mode test classes)",
    )
    parser.add_argument("--suite", type=Path, help="time pytest in this folder instead")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds (default 1)")
    parser.add_argument("--timeout", type=int, default=900, help="per test, seconds")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    out = Path(tempfile.mkdtemp(prefix="pallaslab-overhead-"))
    if args.suite is not None:
        cwd, targets = args.suite, []
    elif args.jax:
        import jax

        suite = _jax_suite()
        rev = args.rev or f"jax-v{jax.__version__}"
        cwd = out / "source"
        suite.export_tests(args.jax, rev, cwd)  # type: ignore[attr-defined]
        targets = args.tests.split()
    else:
        parser.error("give JAX's clone (or --suite DIR)")
    keyword = ["-k", args.keyword] if args.keyword and targets else []
    base = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider",
            f"--timeout={args.timeout}", *keyword, *extra]  # fmt: skip
    rows: list[tuple[str, float, float, int]] = []
    report = out / "report"
    for round_ in range(args.rounds):
        for label, flags in (
            ("without", ["-p", "no:pallaslab"]),
            ("with --pallaslab", ["--pallaslab", f"--pallaslab-report={report}"]),
        ):
            wall, cpu, status = run([*base, *flags], cwd, env)
            rows.append((label, wall, cpu, status))
            print(
                f"round {round_ + 1}: {label:<18} {wall:8.1f} s wall {cpu:8.1f} s CPU "
                f"(pytest exit {status})",
                flush=True,
            )
    without = [r for r in rows if r[0] == "without"]
    with_ = [r for r in rows if r[0] != "without"]
    wall_ratio = sum(r[1] for r in with_) / max(sum(r[1] for r in without), 1e-9)
    cpu_ratio = sum(r[2] for r in with_) / max(sum(r[2] for r in without), 1e-9)
    print()
    print(f"with / without: {wall_ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (goal: under 2x)")
    data = (
        json.loads(report.with_suffix(".json").read_text())
        if report.with_suffix(".json").exists()
        else None
    )
    if data:
        calls = data["calls"]
        seconds = sorted((c["seconds"] for c in calls), reverse=True)
        print(
            f"the plugin checked {data['totals']['checked']} of {data['totals']['reached']} "
            f"programs in {sum(seconds):.1f} s (median {seconds[len(seconds) // 2]:.2f} s, "
            f"slowest {seconds[0]:.2f} s)"
            if seconds
            else "the plugin saw no kernels"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
