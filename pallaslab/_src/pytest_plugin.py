"""`pytest --pallaslab`: every Pallas kernel a test suite runs, checked by pallaslab.

Registered with pytest as an entry point (`pytest11`), off unless asked for:

    pytest --pallaslab                        # every check
    pytest --pallaslab=races,bounds tests/    # some: races, bounds, uninit, emulate
    pytest --pallaslab --pallaslab-strict     # findings fail the tests that ran the kernels
    pytest --pallaslab --pallaslab-report=pallaslab-report   # .json and .xml (JUnit)
    pytest --pallaslab --pallaslab-hardware=tpu   # a TPU library: TPU race rules only

Without `--pallaslab` this module only adds the options: it imports nothing of JAX's
or of pallaslab's core, and observes nothing. With it, the core's `Sanitizer` sees
every `pallas_call`, `pl.kernel` and `plgpu.kernel` lowered on the CPU (eager, `jit`,
`vmap`, `grad`), copies each distinct program's operands and results the first time
it runs, and checks it after the test (beside the next tests, unless strict): the
emulator against the test's result, races under GPU and TPU rules, loads and stores
past their blocks, reads of uninitialised memory, padding that reaches an output.
Kernels the emulator does not model (Mosaic GPU, TPU meshes and DMAs) are run again in
JAX's own interpreters with their race detectors on. Findings name the kernel's source
line and the test; the session ends with a summary. Outcomes change only with
`--pallaslab-strict`.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

CHECKS = ("races", "bounds", "uninit", "emulate")
HARDWARE = ("gpu", "tpu")
_PLUGIN_NAME = "pallaslab-sanitizer"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The options (the plugin does nothing without `--pallaslab`)."""
    group = parser.getgroup("pallaslab", "check every Pallas kernel the tests run")
    group.addoption(
        "--pallaslab",
        nargs="?",
        const="all",
        default=None,
        metavar="CHECKS",
        help="check every Pallas kernel the tests run (all checks), or --pallaslab=CHECKS: "
        f"a comma-separated subset of {', '.join(CHECKS)}",
    )
    group.addoption(
        "--pallaslab-strict",
        action="store_true",
        help="with --pallaslab: a finding fails the test that ran the kernel",
    )
    group.addoption(
        "--pallaslab-report",
        metavar="PATH",
        help="with --pallaslab: write the findings as PATH.json and JUnit XML as PATH.xml",
    )
    group.addoption(
        "--pallaslab-max-mib",
        type=int,
        default=256,
        metavar="MIB",
        help="with --pallaslab: programs whose operands and results exceed this are not "
        "checked (default 256)",
    )
    group.addoption(
        "--pallaslab-hardware",
        default="gpu,tpu",
        metavar="HARDWARE",
        help="with --pallaslab: the hardware the suite's kernels are for (gpu, tpu or "
        "gpu,tpu, the default): whose race rules apply to a kernel that says neither "
        "(TPU params, VMEM, scalar prefetch say TPU; Triton or Mosaic GPU params say GPU)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Starts the sanitizer when `--pallaslab` was given."""
    value = config.getoption("pallaslab", None)
    if value is None:
        return
    checks = parse_checks(value)
    if checks is None:  # `--pallaslab tests/`: the word was a test path, not checks
        _give_back_path(config, value)
        checks = CHECKS
    config.pluginmanager.register(
        SanitizerPlugin(
            checks,
            strict=bool(config.getoption("pallaslab_strict")),
            report=config.getoption("pallaslab_report"),
            max_mib=int(config.getoption("pallaslab_max_mib")),
            hardware=parse_hardware(str(config.getoption("pallaslab_hardware"))),
        ),
        _PLUGIN_NAME,
    )


def parse_checks(value: str) -> tuple[str, ...] | None:
    """`races,bounds` -> the checks; "all" -> every check; None if it names no check.

    Raises:
        pytest.UsageError: For a list that mixes checks with unknown words.
    """
    if value == "all":
        return CHECKS
    words = [w.strip() for w in value.split(",") if w.strip()]
    known = [w for w in words if w in CHECKS]
    if not known:
        return None
    unknown = [w for w in words if w not in CHECKS]
    if unknown:
        raise pytest.UsageError(
            f"--pallaslab: unknown check {', '.join(unknown)}; choose from {', '.join(CHECKS)}"
        )
    return tuple(c for c in CHECKS if c in known)


def parse_hardware(value: str) -> tuple[str, ...]:
    """`tpu` -> ("tpu",); `gpu,tpu` -> both.

    Raises:
        pytest.UsageError: For an empty list or a word that is neither gpu nor tpu.
    """
    words = [w.strip().lower() for w in value.split(",") if w.strip()]
    unknown = [w for w in words if w not in HARDWARE]
    if unknown or not words:
        raise pytest.UsageError(
            f"--pallaslab-hardware: {', '.join(unknown) or 'nothing given'}; "
            f"choose gpu, tpu or gpu,tpu"
        )
    return tuple(h for h in HARDWARE if h in words)


def _give_back_path(config: pytest.Config, value: str) -> None:
    """Puts back a test path `--pallaslab PATH` took as its value."""
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.insert(0, value)
    else:
        config.args[:] = [value]
        config.args_source = pytest.Config.ArgsSource.ARGS


class SanitizerPlugin:
    """The plugin's hooks while `--pallaslab` is on (pallaslab's core imported here)."""

    def __init__(
        self,
        checks: tuple[str, ...],
        *,
        strict: bool,
        report: str | None,
        max_mib: int,
        hardware: tuple[str, ...] = HARDWARE,
    ) -> None:
        from pallaslab._src.core import sanitizer  # noqa: PLC0415 - only when asked for

        self.strict = strict
        self.report_path = report
        self.failed: list[str] = []
        self.failures: list[str] = []
        self.sanitizer = sanitizer.Sanitizer(
            sanitizer.SanitizerOptions(
                checks=frozenset(checks),
                max_bytes=max_mib * 2**20,
                hardware=frozenset(hardware),
                # Strict: findings fail the test that ran the kernel, so it waits for
                # them; else the checks run beside the next tests.
                background=not strict,
            )
        )
        self.notice = self.sanitizer.install()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Kernels run while a test's setup, call and teardown run are the test's."""
        self.sanitizer.begin(item.nodeid)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """After the test, checks the programs it ran first; strict: findings fail it."""
        try:
            result = yield
        finally:
            calls = self._finish(item.nodeid)
        errors = [f for call in calls for f in call.findings if f.severity == "error"]
        if self.strict and errors:
            self.failed.append(item.nodeid)
            lines = [f"{f.where()}: {f.kind}: {f.message}" for f in errors[:10]]
            more = f"\n... and {len(errors) - 10} more" if len(errors) > 10 else ""
            pytest.fail(
                "pallaslab found problems in the kernels this test ran:\n"
                + "\n".join(lines)
                + more,
                pytrace=False,
            )
        return result

    def _finish(self, nodeid: str, *, last: bool = False) -> list[Any]:
        calls: list[Any] = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the checks' warnings are not the test's
                calls = self.sanitizer.finish()
                if last:
                    self.sanitizer.drain()  # the checks still under way
        except Exception as error:  # pallaslab's own failure must not change an outcome
            self.failures.append(f"{nodeid or 'the session'}: {type(error).__name__}: {error}")
        self.sanitizer.begin(nodeid)  # its teardown's kernels are still its own
        return calls

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The session's summary: totals, per file, findings, refusals, failures."""
        self._finish("", last=True)
        report = self.sanitizer.report(strict=self.strict, failed=tuple(self.failed))
        terminalreporter.write_sep("=", "pallaslab")
        if self.notice:
            terminalreporter.write_line(f"pallaslab could not observe kernels: {self.notice}")
        for line in report.summary_lines():
            terminalreporter.write_line(line)
        for failure in self.failures:
            terminalreporter.write_line(f"pallaslab failed after {failure} (please report)")
        if self.report_path:
            written = write_report(report, self.report_path)
            terminalreporter.write_line("pallaslab report: " + ", ".join(written))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Stops observing."""
        del config
        self.sanitizer.uninstall()


def write_report(report: Any, path: str) -> list[str]:
    """Writes PATH.json and PATH.xml (a `.json` or `.xml` suffix given is dropped)."""
    base = Path(path)
    if base.suffix in (".json", ".xml"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in ((".json", report.to_json()), (".xml", report.to_junit_xml())):
        target = base.with_name(base.name + suffix)
        target.write_text(text, encoding="utf-8")
        written.append(str(target))
    return written
