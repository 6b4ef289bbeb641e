"""The `pallaslab` command: lowered kernels as text, for scripts, diffs and CI.

    pallaslab lower kernels.py:matmul --target ptx:sm_90 --args "bf16[1024,1024],bf16[1024,1024]"
    pallaslab hints kernels.py:matmul --args "bf16[1024,1024],bf16[1024,1024]" --chip H100
    pallaslab lower kernels.py:matmul --target xla-gpu:H100 --stage sass --args "..."
    pallaslab reproduce kernels.py:matmul --args "f32[256,128],f32[128,256]" -o bug.py
    pallaslab targets
    pallaslab sanitize --strict --report pallaslab-report -- tests/ -k attention

`lower` runs FILE.py as a module, traces FUNC on the arguments `--args` describes
(shapes only: nothing is allocated or run), lowers a kernel for the target and prints
the text. A target that cannot take the kernel prints `FILE:LINE: error: ...` on
stderr and exits with 1. `hints` prints performance hints the same way, one
`FILE:LINE: severity: message` each, with the figures behind it. `sanitize` runs a
test suite under `pytest --pallaslab` (every Pallas kernel the tests run, checked)
and exits with pytest's status.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import inspect
import json
import os
import re
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pallaslab._src.base import messages, sources
from pallaslab._src.base.argparsing import SuggestingParser
from pallaslab._src.base.textscan import top_level

_COMMENT = {"llvm": ";"}
_SHAPE = re.compile(r"^(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,\s]*)\]$")
_DTYPES = {
    "bf16": "bfloat16",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "bool": "bool",
}


class CliError(Exception):
    """A mistake on the command line (exit status 2)."""


class SourceError(Exception):
    """A mistake in the user's file or function: `FILE:LINE: error: ...`, exit status 1."""


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """Splits at `separator` outside brackets and quotes: "f32[4,8],(1, 2)" -> 2 items."""
    items: list[str] = []
    start = 0
    for pos, char in top_level(text):
        if char == separator:
            items.append(text[start:pos].strip())
            start = pos + 1
    last = text[start:].strip()
    if last or items:
        items.append(last)
    return [item for item in items if item]


def parse_value(text: str) -> Any:
    """`f32[1024,128]` -> a ShapeDtypeStruct; anything else as a Python literal."""
    import jax  # noqa: PLC0415

    shape = _SHAPE.match(text.strip())
    if shape:
        dtype = _DTYPES.get(shape["dtype"])
        if dtype is None:
            known = ", ".join(_DTYPES)
            raise CliError(f"unknown dtype {shape['dtype']!r} in {text!r}; known: {known}")
        dims = tuple(int(d) for d in shape["dims"].replace(" ", "").split(",") if d)
        return jax.ShapeDtypeStruct(dims, dtype)
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError) as error:
        raise CliError(
            f"cannot read argument {text!r}: write an array as dtype[dims] (f32[1024]) or a "
            "Python literal (128, (8, 128), 'name', None)"
        ) from error


def parse_args_spec(spec: str) -> tuple[list[Any], dict[str, Any]]:
    """`"f32[8],f32[8],block=128"` -> ([two ShapeDtypeStructs], {"block": 128})."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for item in split_top_level(spec):
        name, sep, value = item.partition("=")
        if sep and name.strip().isidentifier() and not value.startswith("="):
            kwargs[name.strip()] = parse_value(value)
        else:
            if kwargs:
                raise CliError(f"positional argument {item!r} after a keyword argument")
            args.append(parse_value(item))
    return args, kwargs


def load_function(reference: str) -> Any:
    """`path/to/file.py:name` (or `file.py:obj.attr`) -> the object it names."""
    file, sep, name = reference.rpartition(":")
    if not sep or not file or not name:
        raise CliError(f"expected FILE.py:FUNC, not {reference!r}")
    path = Path(file).resolve()
    if not path.exists():
        raise CliError(f"no such file: {file}")
    if not path.is_file():
        raise CliError(f"{file} is a directory; name a Python file in it, as in {file}/kernels.py")
    try:
        line, problem = sources.source_problem(path)
    except OSError as error:
        raise CliError(f"cannot read {file}: {error.strerror or error}") from None
    if problem:
        raise SourceError(f"{path}:{line}: error: {problem}")
    sys.path.insert(0, str(path.parent))  # its own imports, as `python file.py` would
    try:
        namespace = runpy.run_path(str(path), run_name="__pallaslab_cli__")
    except SystemExit as exiting:
        raise SourceError(
            f"{path}:1: error: {file} called sys.exit({exiting.code!r}) while pallaslab ran "
            f"it to find {name}; put what it does as a script under "
            '`if __name__ == "__main__":`'
        ) from None
    except Exception as error:
        raise SourceError(_explain(error, f"{file} could not be run")) from None
    found: Any = namespace
    for part in name.split("."):
        try:
            found = found[part] if isinstance(found, dict) else getattr(found, part)
        except (KeyError, AttributeError):
            names = list(found) if isinstance(found, dict) else dir(found)
            close = difflib.get_close_matches(part, [n for n in names if not n.startswith("__")])
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CliError(f"{file} defines no {name!r}{hint}") from None
    if not callable(found):
        raise CliError(f"{name} in {file} is a {type(found).__name__}, not a function")
    return found


def _missing_arguments(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[str]:
    """Parameters `fn` requires that `args` and `kwargs` leave unset."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        bound = set(signature.bind_partial(*args[: len(signature.parameters)]).arguments)
        return [
            name
            for name, p in signature.parameters.items()
            if p.default is p.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and name not in bound
            and name not in kwargs
        ]
    return []


def _explain(error: BaseException, what: str) -> str:
    """`FILE:LINE: error: <one clear message>` for an error in the user's code."""
    from pallaslab._src.core.diagnose import diagnose  # noqa: PLC0415

    def name_source(file: str) -> str | None:
        return file if sources.is_user_source(file) else None

    diagnosis = diagnose(error, name_source)
    where = f"{diagnosis.location}: " if diagnosis.location else ""
    text = diagnosis.summary + (f"\n{diagnosis.hint}" if diagnosis.hint else "")
    return messages.clip(f"{where}error: {what}: {text}")


def _commented(text: str, language: str) -> str:
    prefix = _COMMENT.get(language, "//")
    return "\n".join(f"{prefix} {line}" if line else prefix for line in text.splitlines())


def _with_map(text: str, source_map: Sequence[tuple[int, str, int]]) -> str:
    """Each line prefixed with the source line(s) it comes from."""
    by_line: dict[int, list[str]] = {}
    for line, file, source_line in source_map:
        by_line.setdefault(line, []).append(f"{Path(file).name}:{source_line}")
    width = max((len(",".join(v)) for v in by_line.values()), default=0)
    return "\n".join(
        f"{','.join(by_line.get(n, [])):>{width}} | {line}"
        for n, line in enumerate(text.splitlines(), 1)
    )


def _resources_text(resources: Any) -> str:
    from pallaslab._src.views.resources import resource_facts  # noqa: PLC0415

    facts = resource_facts(resources)
    if facts is None:
        return "no resource figures for this target"
    return "\n".join(facts.lines())


def _check_target(name: str | None) -> None:
    from pallaslab._src.records.targets import parse_target, reading_note  # noqa: PLC0415

    if name is None:
        return
    try:
        parse_target(name)
    except ValueError as error:
        raise CliError(str(error)) from None
    if note := reading_note(name):
        print(f"pallaslab: {note}", file=sys.stderr)


def _inspect(options: argparse.Namespace) -> tuple[Any, str | int | None]:
    """The program FILE.py:FUNC traced on --args, and the --kernel asked for."""
    from pallaslab._src.core.inspection import inspect  # noqa: PLC0415 - JAX on use

    fn = load_function(options.function)
    args, kwargs = parse_args_spec(options.args or "")
    missing = _missing_arguments(fn, args, kwargs)
    if missing:
        raise CliError(
            f"{options.function} takes {', '.join(missing)}: describe "
            f"{'it' if len(missing) == 1 else 'them'} with --args, e.g. --args "
            f'"{",".join("f32[1024]" for _ in missing)}" (arrays as dtype[dims], others as '
            "Python literals)"
        )
    try:
        inspection = inspect(fn, *args, **kwargs)
    except Exception as error:
        raise SourceError(_explain(error, f"tracing {options.function} failed")) from None
    kernel: str | int | None = options.kernel
    if isinstance(kernel, str) and kernel.isdigit():
        kernel = int(kernel)
    return inspection, kernel


def _lower(options: argparse.Namespace) -> int:
    _check_target(options.target)
    inspection, kernel = _inspect(options)
    try:
        lowered = inspection.lower(options.target, 0 if kernel is None else kernel)
    except KeyError as error:
        raise CliError(error.args[0] if error.args else str(error)) from None
    if options.json:
        record = dataclasses.asdict(lowered)
        record.pop("raw_text")
        print(json.dumps(record, indent=1, default=str))
        return 0 if lowered.ok else 1
    if lowered.error is not None:
        location = lowered.error.location
        where = f"{location}: " if location else ""
        print(messages.clip(f"{where}error: {lowered.error.message}"), file=sys.stderr)
        return 1
    text, source_map, language = lowered.text, lowered.source_map, lowered.language
    if options.stage == "list":
        print("\n".join(s.name for s in lowered.stages) or "(no stages for this target)")
        return 0
    if options.stage:
        try:
            stage = lowered.stage(options.stage)
        except KeyError as error:
            raise CliError(error.args[0]) from None
        text, source_map, language = stage.text, stage.source_map, stage.language
    if options.raw:
        text, source_map = lowered.raw_text, ()
    if options.resources_only:
        print(_resources_text(lowered.resources))
        return 0
    if not options.no_header:
        print(_commented(lowered.header + "".join(f"\n{n}" for n in lowered.notes), language))
    print(_with_map(text, source_map) if options.map else text)
    if options.resources:
        # After the text, as comments: the output stays a valid file of its language.
        print(_commented("resources:\n" + _resources_text(lowered.resources), language))
    return 0


def _hints(options: argparse.Namespace) -> int:
    from pallaslab._src.records import hardware  # noqa: PLC0415

    if options.chip:
        try:
            hardware.tpu(options.chip)
        except KeyError:
            try:
                hardware.gpu(options.chip)
            except KeyError:
                known = ", ".join([*hardware.GPUS, *hardware.TPUS])
                raise CliError(f"unknown chip {options.chip!r}; known: {known}") from None
    _check_target(options.target)
    inspection, kernel = _inspect(options)
    try:
        found = inspection.hints(
            kernel, chip=options.chip, target=options.target, masks=not options.no_masks
        )
    except KeyError as error:
        raise CliError(error.args[0] if error.args else str(error)) from None
    if options.json:
        print(json.dumps([dataclasses.asdict(h) for h in found], indent=1, default=str))
        return 0
    if not found:
        names = ", ".join(k.name for k in inspection.kernels) or "no kernels"
        print(f"no hints ({names})")
        return 0
    for hint in found:
        print(hint.describe())
        figures = ", ".join(f"{name} {value}" for name, value in hint.figures)
        print(f"    {hint.kernel}, assumes {hint.chip}: {figures}")
    return 0


def _reproduce(options: argparse.Namespace) -> int:
    _check_target(options.target)
    inspection, kernel = _inspect(options)
    try:
        written = inspection.reproducer(
            options.output,
            options.save_inputs,
            kernel=kernel or 0,
            target=options.target,
            overwrite=options.force,
        )
    except KeyError as error:
        raise CliError(error.args[0] if error.args else str(error)) from None
    except (ValueError, RuntimeError, OSError) as error:
        raise CliError(f"no reproducer written: {messages.error_text(error)}") from None
    print(written)
    return 0


def _sanitize(options: argparse.Namespace, pytest_args: Sequence[str]) -> int:
    """`pytest --pallaslab[=CHECKS] [--pallaslab-strict] [--pallaslab-report=PATH] ARGS`."""
    import subprocess  # noqa: PLC0415 - only this command starts a process

    checks = options.checks or "all"
    command = [sys.executable, "-m", "pytest", f"--pallaslab={checks}"]
    if options.strict:
        command.append("--pallaslab-strict")
    if options.report:
        command.append(f"--pallaslab-report={options.report}")
    if options.max_mib is not None:
        command.append(f"--pallaslab-max-mib={options.max_mib}")
    if options.hardware:
        command.append(f"--pallaslab-hardware={options.hardware}")
    command.extend(pytest_args)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130


def _targets() -> int:
    from pallaslab._src.core.lowering.toolchains import unavailable_reasons  # noqa: PLC0415
    from pallaslab._src.records.targets import all_targets  # noqa: PLC0415

    targets = all_targets()
    unavailable = unavailable_reasons(targets)
    for target in targets:
        reason = unavailable[target.name]
        note = f"  [unavailable: {reason}]" if reason else ""
        print(f"{target.name:<20} {target.title}{note}")
    return 0


def _program_arguments(command: argparse.ArgumentParser, kernel_help: str) -> None:
    """FILE.py:FUNC, --args and --kernel: the program a command traces."""
    command.add_argument("function", metavar="FILE.py:FUNC", help="the callable to trace")
    command.add_argument(
        "--args",
        "-a",
        default="",
        metavar="SPEC",
        help="FUNC's arguments: arrays as dtype[dims], others as Python literals, keywords "
        'as name=value, e.g. "bf16[1024,1024],bf16[1024,1024],block=128"',
    )
    command.add_argument("--kernel", "-k", help=kernel_help)


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    root = SuggestingParser(
        prog="pallaslab",
        description="Lower JAX Pallas kernels for any GPU or TPU target, on any machine.",
    )
    commands = root.add_subparsers(dest="command", required=True)
    lower = commands.add_parser(
        "lower",
        help="print a kernel lowered for a target",
        description="Trace FUNC from FILE.py on the arguments --args describes and print "
        "a kernel lowered for --target.",
    )
    _program_arguments(lower, "the kernel's name or index (default: the first)")
    lower.add_argument(
        "--target", "-t", default="stablehlo", help="e.g. ptx:sm_90, mosaic-tpu:v5e (see targets)"
    )
    lower.add_argument(
        "--stage",
        help="a stage (tpu-compile, xla-gpu: ptx, sass, ptxas, hlo, Mosaic GPU passes), or 'list'",
    )
    lower.add_argument("--map", action="store_true", help="prefix lines with their source lines")
    lower.add_argument("--raw", action="store_true", help="the text as the compiler printed it")
    lower.add_argument(
        "--resources",
        action="store_true",
        help="add the resources (registers, shared memory, occupancy, VMEM) after the text",
    )
    lower.add_argument(
        "--resources-only", action="store_true", help="print only the resources, not the text"
    )
    lower.add_argument("--no-header", action="store_true", help="omit the provenance header")
    lower.add_argument("--json", action="store_true", help="the whole record as JSON")
    hints = commands.add_parser(
        "hints",
        help="print performance hints for a program's kernels",
        description="Trace FUNC from FILE.py on the arguments --args describes and print "
        "why its kernels may be slow, one FILE:LINE: severity: message per hint.",
    )
    _program_arguments(hints, "one kernel's name or index (default: every kernel)")
    hints.add_argument(
        "--chip",
        "-c",
        help="the chip to advise for: H100, A100, v5e, v6e ... (default: the kernel's backend's)",
    )
    hints.add_argument(
        "--target",
        "-t",
        help="a GPU target to compile for registers and occupancy, e.g. ptx:sm_90",
    )
    hints.add_argument(
        "--no-masks", action="store_true", help="skip interpreting programs for masked lanes"
    )
    hints.add_argument("--json", action="store_true", help="the hints as JSON")
    reproduce = commands.add_parser(
        "reproduce",
        help="write a standalone script reproducing a kernel call",
        description="Trace FUNC from FILE.py on the arguments --args describes and write "
        "a script, needing jax and numpy only, that rebuilds one kernel call and reproduces "
        "its result (or, with --target, its lowering).",
    )
    _program_arguments(reproduce, "the kernel's name or index (default: the first)")
    reproduce.add_argument("--output", "-o", default="reproducer.py", help="the script to write")
    reproduce.add_argument("--target", "-t", help="lower for this target instead of running")
    reproduce.add_argument(
        "--force", "-f", action="store_true", help="replace the script and .npz if they exist"
    )
    reproduce.add_argument(
        "--save-inputs",
        action="store_true",
        help="save the operands and pallaslab's outputs beside the script (.npz)",
    )
    commands.add_parser("targets", help="list the targets")
    sanitize = commands.add_parser(
        "sanitize",
        help="run a test suite, checking every Pallas kernel its tests run",
        description="Run pytest with pallaslab's plugin (pytest --pallaslab): every "
        "pallas_call, pl.kernel and plgpu.kernel the tests run is checked once per "
        "distinct program (emulated against the test's result; races under GPU and TPU "
        "rules, reads and writes past blocks, uninitialised reads, padding that reaches "
        "an output). Arguments after -- go to pytest; exits with pytest's status.",
        usage="pallaslab sanitize [--checks CHECKS] [--strict] [--report PATH] "
        "[--hardware gpu,tpu] -- [PYTEST ARGS]",
    )
    sanitize.add_argument(
        "--checks",
        help="a comma-separated subset of races, bounds, uninit, emulate (default: all)",
    )
    sanitize.add_argument(
        "--strict", action="store_true", help="findings fail the tests that ran the kernels"
    )
    sanitize.add_argument(
        "--report", metavar="PATH", help="write PATH.json and PATH.xml (JUnit) for CI"
    )
    sanitize.add_argument(
        "--max-mib", type=int, help="skip programs whose operands exceed this (default 256)"
    )
    sanitize.add_argument(
        "--hardware",
        help="the hardware the kernels are for, gpu, tpu or gpu,tpu (default): whose race "
        "rules apply to a kernel that says neither",
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pallaslab` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    passed: list[str] = []
    if argv[:1] == ["sanitize"]:
        # Everything after --, and whatever the command does not know, goes to pytest.
        if "--" in argv:
            at = argv.index("--")
            argv, passed = argv[:at], argv[at + 1 :]
        options, unknown_args = parser().parse_known_args(argv)
        passed = [*unknown_args, *passed]
    else:
        options = parser().parse_args(argv)
    if options.command == "sanitize":
        if options.checks:
            unknown = sorted(
                {c.strip() for c in options.checks.split(",")}
                - {"races", "bounds", "uninit", "emulate"}
            )
            if unknown:
                print(
                    f"pallaslab: unknown check {', '.join(unknown)}; choose from races, "
                    "bounds, uninit, emulate",
                    file=sys.stderr,
                )
                return 2
        return _sanitize(options, passed)
    if "JAX_PLATFORMS" not in os.environ:
        # Lowering needs no accelerator: keep JAX off any GPU or TPU the machine has
        # (JAX may be imported already, so set its config as well as the variable).
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax  # noqa: PLC0415

        jax.config.update("jax_platforms", "cpu")
    try:
        if options.command == "targets":
            return _targets()
        if options.command == "hints":
            return _hints(options)
        if options.command == "reproduce":
            return _reproduce(options)
        return _lower(options)
    except CliError as error:
        print(f"pallaslab: {messages.clip(messages.error_text(error))}", file=sys.stderr)
        return 2
    except SourceError as error:
        print(messages.error_text(error), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pallaslab: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # never a raw traceback from pallaslab's own code
        print(
            f"pallaslab: internal error: {messages.describe(error)}\n"
            "This is a bug in pallaslab; please report it with the command that showed it.",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
