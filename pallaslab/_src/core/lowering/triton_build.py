"""Compiling the Triton IR Pallas emits down to PTX and SASS with the `triton` package.

No GPU is needed: `triton.compile` runs Triton's passes, LLVM's NVPTX backend and the
`ptxas` shipped in the triton wheel; `nvdisasm` (also shipped) prints the SASS with
source line markers and `cuobjdump` the resource usage. XLA compiles the same TTIR
with its own pinned Triton, so details can differ from what runs under XLA.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

from pallaslab._src.core.lowering import sourcemap
from pallaslab._src.core.lowering.failures import exit_words


@dataclasses.dataclass(frozen=True)
class TritonBuild:
    """Everything one `triton.compile` of a kernel for one architecture produced.

    Attributes:
        arch: "sm_90".
        texts: Raw texts by stage: "ttgir", "llir", "ptx", "sass".
        shared_bytes: Dynamic shared memory the launch requests.
        num_warps: Warps per block.
        num_stages: Pipeline stages.
        ptxas_log: What `ptxas -v` said (registers, spills, shared memory).
        resource_usage: `cuobjdump -res-usage` figures: REG, STACK, SHARED, LOCAL.
        triton_version: The compiler's version.
    """

    arch: str
    texts: dict[str, str]
    shared_bytes: int
    num_warps: int
    num_stages: int
    ptxas_log: str
    resource_usage: dict[str, int]
    triton_version: str


class TritonUnavailableError(RuntimeError):
    """The triton package (or its NVIDIA backend) is not installed."""


def triton_version() -> str:
    """The installed triton's version ("" when it is not installed)."""
    try:
        import triton  # noqa: PLC0415
    except ImportError:
        return ""
    return str(triton.__version__)


def with_function_location(ttir: str, file: str) -> str:
    """TTIR whose `tt.func` carries the kernel's file as its location, at line 0.

    Triton names the file of its debug info (PTX `.file`, SASS `//## File`) after the
    function's own location, which Pallas leaves unknown. The line is 0 ("no line",
    in DWARF): Triton gives every op without a location of its own (program ids,
    the prologue) the function's, and LLVM opens the function with its line, so any
    real line (the `def`) would be named for code no line of the kernel wrote.
    Reads the custom and the generic op form: the function's location is on its
    closing line.
    """
    if not file:
        return ttir
    lines = ttir.splitlines()
    func_indent = None
    escaped = file.replace("\\", "\\\\").replace('"', '\\"')
    location = f'loc("{escaped}":0:0)'
    for index, text in enumerate(lines):
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        if func_indent is None:
            if stripped.startswith(("tt.func ", '"tt.func"(')):
                func_indent = indent
            continue
        if indent == func_indent and stripped.startswith("}"):
            if "loc(" in text:
                lines[index] = text[: text.rindex("loc(")] + location
            else:
                lines[index] = f"{text} {location}"
            break
    return "\n".join(lines) + "\n"


def compile_ttir(
    ttir: str, arch: str, *, num_warps: int, num_stages: int, kernel_file: str
) -> TritonBuild:
    """Compiles TTIR text for `arch` ("sm_90") and disassembles the result.

    Raises:
        TritonUnavailableError: Without the triton package.
        Exception: The compiler's own error when it rejects the kernel.
    """
    try:
        import triton  # noqa: PLC0415
        from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    except ImportError as err:
        raise TritonUnavailableError(
            "the triton compiler is not installed: pip install 'pallaslab[triton]'"
        ) from err
    capability = int(arch.removeprefix("sm_"))
    source = with_function_location(ttir, kernel_file)
    with tempfile.TemporaryDirectory(prefix="pallaslab-triton-") as tmp:
        path = Path(tmp) / "kernel.ttir"
        path.write_text(source, encoding="utf-8")
        log = io.StringIO()
        with (
            _compile_knobs(triton),
            _ptx_stage_fixed(triton),
            contextlib.redirect_stdout(log),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", UserWarning)
            compiled = triton.compile(
                str(path),
                target=GPUTarget("cuda", capability, 32),
                options={
                    "num_warps": num_warps,
                    "num_stages": num_stages,
                    "enable_fp_fusion": True,
                },
            )
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        sass = _run_tool("nvdisasm", ["-c", "-g", "-hex", str(cubin)])
        usage = _parse_resource_usage(_run_tool("cuobjdump", ["-res-usage", str(cubin)]))
    metadata = compiled.metadata
    return TritonBuild(
        arch=arch,
        texts={
            "ttgir": str(compiled.asm.get("ttgir", "")),
            "llir": str(compiled.asm.get("llir", "")),
            "ptx": str(compiled.asm.get("ptx", "")),
            "sass": sass,
        },
        shared_bytes=int(getattr(metadata, "shared", 0) or 0),
        num_warps=int(getattr(metadata, "num_warps", num_warps)),
        num_stages=int(getattr(metadata, "num_stages", num_stages)),
        ptxas_log=log.getvalue(),
        resource_usage=usage,
        triton_version=str(triton.__version__),
    )


@contextlib.contextmanager
def _compile_knobs(triton: Any) -> Any:
    """Compile afresh (so ptxas runs and logs) and print ptxas' `-v` report."""
    knobs = getattr(triton, "knobs", None)
    settings = [
        (getattr(knobs, "compilation", None), "always_compile", True),
        (getattr(knobs, "nvidia", None), "dump_ptxas_log", True),
    ]
    saved = []
    for group, name, value in settings:
        if group is not None and hasattr(group, name):
            saved.append((group, name, getattr(group, name)))
            setattr(group, name, value)
    try:
        yield
    finally:
        for group, name, value in saved:
            setattr(group, name, value)


@contextlib.contextmanager
def _ptx_stage_fixed(triton: Any) -> Any:
    """Within the block, Triton's PTX stage names one source line per inline-asm block.

    Triton's loads, stores and `wgmma` are inline assembly, which LLVM's NVPTX printer
    attributes line by line to successive source lines
    (`sourcemap.collapse_inline_asm_locs`). The PTX is corrected as the stage makes
    it, before ptxas, so the PTX shown and the SASS' line table agree. A Triton
    without the stages hook keeps its PTX: the PTX view still reads it right (its
    reader collapses the blocks); its SASS may then name those lines.
    """
    knobs = getattr(getattr(triton, "knobs", None), "runtime", None)
    if knobs is None or not hasattr(knobs, "add_stages_inspection_hook"):
        yield
        return
    previous = knobs.add_stages_inspection_hook

    def hook(*args: Any, **kwargs: Any) -> Any:
        found = previous(*args, **kwargs) if previous is not None else None
        stages = kwargs.get("stages", args[1] if len(args) > 1 else None)
        if stages is None:  # asked for its part of the compile cache's key
            key, digest = found if found else ("", "")
            return f"{key}pallaslab-inline-asm-locs", f"{digest}1"
        make_ptx = stages.get("ptx")
        if make_ptx is not None:
            stages["ptx"] = lambda src, metadata: sourcemap.collapse_inline_asm_locs(
                make_ptx(src, metadata)
            )
        return found

    knobs.add_stages_inspection_hook = hook
    try:
        yield
    finally:
        knobs.add_stages_inspection_hook = previous


def _tool_path(name: str) -> str | None:
    """A CUDA tool shipped in the triton wheel (or on PATH)."""
    try:
        from triton.backends import nvidia  # noqa: PLC0415

        candidate = Path(nvidia.__file__).parent / "bin" / name
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    return shutil.which(name)


def _run_tool(name: str, args: list[str]) -> str:
    path = _tool_path(name)
    if path is None:
        return f"// {name} not found: it ships with the triton wheel (Linux)\n"
    done = subprocess.run([path, *args], capture_output=True, text=True, timeout=120, check=False)
    if done.returncode < 0:  # the tool died: not the kernel's fault, asked again later
        raise RuntimeError(f"{name} crashed ({exit_words(done.returncode)}) on {args[-1]}")
    if done.returncode != 0:
        return f"// {name} failed ({done.returncode}): {done.stderr.strip()}\n"
    return done.stdout


_USAGE = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")


def _parse_resource_usage(text: str) -> dict[str, int]:
    """`REG:80 STACK:0 SHARED:1024 LOCAL:0 ...` of the first function."""
    for line in text.splitlines():
        found = dict(_USAGE.findall(line))
        if "REG" in found:
            return {k: int(v) for k, v in found.items()}
    return {}


_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame")
_PTXAS_SHARED = re.compile(r"(\d+) bytes smem")


def ptxas_figures(log: str) -> dict[str, int]:
    """Registers, spill stores/loads, stack frame and static shared memory from `ptxas -v`.

    Static shared memory is 0 when ptxas reports registers but no `smem` (the figure
    `cuobjdump` gives instead includes the 1 KiB sm_90+ reserves for the system).
    """
    figures: dict[str, int] = {}
    if match := _PTXAS_REGISTERS.search(log):
        figures["registers"] = int(match.group(1))
        shared = _PTXAS_SHARED.search(log)
        figures["static_shared"] = int(shared.group(1)) if shared else 0
    if match := _PTXAS_SPILLS.search(log):
        figures["spill_stores"] = int(match.group(1))
        figures["spill_loads"] = int(match.group(2))
    if match := _PTXAS_STACK.search(log):
        figures["stack"] = int(match.group(1))
    return figures
