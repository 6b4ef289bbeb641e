"""XLA's real compile for a GPU, on any machine: JAX's CUDA plugin, compile-only, in a worker.

The parent exports the kernel (and the program around it) for CUDA as lowered for
one chip (`jax_adapter.export_for_gpu`); a fresh Python process makes a compile-only
CUDA device from the chip's target description (`gpu_target_configs/`), compiles,
and returns what XLA and Mosaic GPU made: optimised HLO, launch sequence, PTX,
ptxas reports, SASS with source line markers, resource usage and Mosaic GPU's pass
pipeline (`xla_gpu_worker.py`). NVIDIA's tools come from `gpu_toolchain`.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from pallaslab._src.core import gpu_target_config, gpu_toolchain

WORKER = Path(__file__).with_name("xla_gpu_worker.py")
TIMEOUT_SECONDS = 300

# Mosaic GPU runs `$MOSAIC_GPU_CUDA_ROOT/bin/nvdisasm` on the cubin it built (for its
# own SASS dump); this one keeps that cubin instead, so the SASS shown is that of the
# binary Mosaic made (disassembled once, with line markers, by the worker).
_NVDISASM = """#!/bin/sh
# pallaslab: keep the cubin Mosaic GPU asks to disassemble (its own dump is not needed).
for arg in "$@"; do
  case "$arg" in *.bin) cp "$arg" "$PALLASLAB_CUBIN_DIR/mosaic-$$.cubin" ;; esac
done
"""
# XLA assembles its PTX (fusions, Triton kernels) with `$CUDA_ROOT/bin/ptxas` when told
# not to use the library build of ptxas (the same release): this one runs it with `-v`
# and keeps the cubin and the report, so XLA's code is not assembled a second time.
_PTXAS = """#!/bin/sh
# pallaslab: run ptxas for XLA, keeping its cubin and its -v report.
case " $* " in *" --version "*) exec {real} "$@" ;; esac
out=""
previous=""
for arg in "$@"; do
  [ "$previous" = "-o" ] && out="$arg"
  previous="$arg"
done
log="$PALLASLAB_CUBIN_DIR/xla-$$.ptxas"
{real} "$@" -v > "$log" 2>&1
code=$?
if [ $code -ne 0 ]; then cat "$log" >&2; exit $code; fi
[ -n "$out" ] && [ -f "$out" ] && cp "$out" "$PALLASLAB_CUBIN_DIR/xla-$$.cubin"
exit 0
"""


def _quoted(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def _script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@dataclasses.dataclass(frozen=True)
class MosaicKernel:
    """One Mosaic GPU kernel as the plugin compiled it.

    Attributes:
        name: Its dump name ("add_kernel_0").
        entry: Its PTX entry function.
        ptx: PTX (with `.loc` line info).
        ptxas: The ptxas report (registers, spills, barriers, shared memory).
        passes: (stage name, module) for each step of Mosaic GPU's pass pipeline.
        sass: SASS of its cubin, with `//## File` line markers.
        sass_from: "captured" (Mosaic's own cubin) or "ptxas" (its PTX assembled here).
    """

    name: str
    entry: str
    ptx: str
    ptxas: str
    passes: tuple[tuple[str, str], ...]
    sass: str
    sass_from: str


@dataclasses.dataclass(frozen=True)
class XlaModule:
    """One PTX module XLA wrote (its fusions and Triton kernels), assembled here.

    Attributes:
        file: The dump's file name.
        ptx: XLA's PTX.
        ptxas: ptxas' `-v` report.
        sass: The SASS of the assembled module.
        sass_from: "captured" (the cubin XLA's own ptxas run made) or "ptxas" (XLA's
            PTX assembled here).
    """

    file: str
    ptx: str
    ptxas: str
    sass: str
    sass_from: str = "ptxas"


@dataclasses.dataclass(frozen=True)
class CompiledJob:
    """What one XLA compile produced.

    Attributes:
        error: The compiler's error ("" when it compiled).
        hlo: The optimised HLO module.
        thunks: XLA's launch sequence (kernels with grid, threads, shared memory).
        mosaic: Mosaic GPU kernels compiled.
        modules: XLA's own PTX modules.
        seconds: The compile's time in the worker.
    """

    error: str = ""
    hlo: str = ""
    thunks: str = ""
    mosaic: tuple[MosaicKernel, ...] = ()
    modules: tuple[XlaModule, ...] = ()
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class XlaGpuCompile:
    """One worker run for a chip.

    Attributes:
        chip: The chip ("H100").
        error: Why the worker could not compile at all ("" when it ran).
        device_kind: The compile-only device's kind.
        jobs: By name ("kernel", "program"), what each compile produced.
        seconds: Worker time, process start excluded.
    """

    chip: str
    error: str = ""
    device_kind: str = ""
    jobs: dict[str, CompiledJob] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0


def _cuda_root(root: Path, chain: gpu_toolchain.Toolchain) -> Path:
    """A CUDA folder for the worker: libdevice, and ptxas and nvdisasm that keep cubins."""
    cuda = root / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "nvvm" / "libdevice").mkdir(parents=True)
    _script(cuda / "bin" / "ptxas", _PTXAS.format(real=_quoted(chain.ptxas)))
    _script(cuda / "bin" / "nvdisasm", _NVDISASM)
    (cuda / "nvvm" / "libdevice" / "libdevice.10.bc").symlink_to(chain.libdevice)
    return cuda


@dataclasses.dataclass
class _Worker:
    """A worker process that has imported JAX and waits for one request on stdin."""

    process: subprocess.Popen[str]
    folder: tempfile.TemporaryDirectory[str]
    on_device: bool
    cuda: Path

    @property
    def root(self) -> Path:
        return Path(self.folder.name)

    def alive(self) -> bool:
        return self.process.poll() is None

    def discard(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.communicate()
        self.folder.cleanup()


# One worker started ahead of need (JAX's import is most of a compile's start): it
# serves one request and exits, so every compile still runs in a fresh process. Keyed
# by whether it compiles for this machine's GPU.
_spares: dict[bool, _Worker] = {}
_spares_lock = threading.Lock()
SPARE_IDLE_SECONDS = 600


def _spawn(chain: gpu_toolchain.Toolchain, on_device: bool) -> _Worker:
    folder = tempfile.TemporaryDirectory(prefix="pallaslab-xla-gpu-")
    root = Path(folder.name)
    cuda = _cuda_root(root, chain)
    (root / "cubins").mkdir()
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cuda" if on_device else "cpu",
        # JAX (CUDA_ROOT) and Mosaic GPU (MOSAIC_GPU_CUDA_ROOT) find the tools here.
        "CUDA_ROOT": str(cuda),
        "MOSAIC_GPU_CUDA_ROOT": str(cuda),
        "PALLASLAB_CUBIN_DIR": str(root / "cubins"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    process = subprocess.Popen(
        [sys.executable, str(WORKER), "--wait", str(SPARE_IDLE_SECONDS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return _Worker(process, folder, on_device, cuda)


def prepare(*, on_device: bool = False) -> None:
    """Starts a worker now (if none is waiting), so that the next compile finds it ready."""
    chain = gpu_toolchain.toolchain()
    if chain.problem:
        return
    with _spares_lock:
        waiting = _spares.get(on_device)
        if waiting is not None and waiting.alive():
            return
        if waiting is not None:
            waiting.discard()
        _spares[on_device] = _spawn(chain, on_device)


def _take(chain: gpu_toolchain.Toolchain, on_device: bool) -> _Worker:
    with _spares_lock:
        worker = _spares.pop(on_device, None)
    if worker is not None and not worker.alive():
        worker.discard()
        worker = None
    return worker or _spawn(chain, on_device)


@atexit.register
def _discard_spares() -> None:
    with _spares_lock:
        for worker in _spares.values():
            worker.discard()
        _spares.clear()


def compile_exports(
    chip: str,
    exports: dict[str, bytes],
    artifacts: tuple[str, ...] = ("kernel",),
    *,
    on_device: bool = False,
) -> XlaGpuCompile:
    """Compiles pickled exports (by job name) for `chip` in a worker process.

    Jobs named in `artifacts` also return their PTX, SASS and resources; the others
    only their HLO and launch sequence. `on_device` compiles for this machine's GPU
    instead (to compare a compile-only build with the real one). A worker for the
    next compile is started before this one returns.
    """
    chain = gpu_toolchain.toolchain()
    if chain.problem:
        return XlaGpuCompile(chip, error=chain.problem)
    worker = _take(chain, on_device)
    try:
        return _compile(worker, chip, chain, exports, artifacts, on_device=on_device)
    finally:
        worker.discard()
        prepare(on_device=on_device)


def _compile(
    worker: _Worker,
    chip: str,
    chain: gpu_toolchain.Toolchain,
    exports: dict[str, bytes],
    artifacts: tuple[str, ...],
    *,
    on_device: bool,
) -> XlaGpuCompile:
    root = worker.root
    jobs = []
    for name, pickled in exports.items():
        (root / name / "xla").mkdir(parents=True)
        (root / name / "mosaic").mkdir()
        (root / name / "exported.pkl").write_bytes(pickled)
        jobs.append(
            {
                "name": name,
                "exported": str(root / name / "exported.pkl"),
                "xla_dump": str(root / name / "xla"),
                "mosaic_dump": str(root / name / "mosaic"),
                "artifacts": name in artifacts,
            }
        )
    request = {
        "config": gpu_target_config.description(chip),
        "jobs": jobs,
        "cubin_dir": str(root / "cubins"),
        "tools": {"ptxas": chain.ptxas, "nvdisasm": chain.nvdisasm},
        "result": str(root / "result.json"),
        "on_device": on_device,
    }
    (root / "request.json").write_text(json.dumps(request), encoding="utf-8")
    try:
        _, stderr = worker.process.communicate(
            str(root / "request.json") + "\n", timeout=TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        return XlaGpuCompile(chip, error=f"XLA's GPU compile took over {TIMEOUT_SECONDS} s")
    result_path = root / "result.json"
    if not result_path.exists():
        tail = "\n".join((stderr or "").strip().splitlines()[-20:])
        return XlaGpuCompile(
            chip,
            error=f"the XLA GPU compile worker exited ({worker.process.returncode}):\n{tail}",
        )
    result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    return XlaGpuCompile(
        chip=chip,
        error=str(result.get("error", "")),
        device_kind=str(result.get("device_kind", "")),
        jobs={name: _job(job) for name, job in result.get("jobs", {}).items()},
        seconds=float(result.get("seconds", 0.0)),
    )


def _job(job: dict[str, Any]) -> CompiledJob:
    return CompiledJob(
        error=str(job.get("error", "")),
        hlo=str(job.get("hlo", "")),
        thunks=str(job.get("thunks", "")),
        mosaic=tuple(
            MosaicKernel(
                name=str(k["name"]),
                entry=str(k["entry"]),
                ptx=str(k["ptx"]),
                ptxas=str(k["ptxas"]),
                passes=tuple((str(n), str(t)) for n, t in k["passes"]),
                sass=str(k["sass"]),
                sass_from=str(k["sass_from"]),
            )
            for k in job.get("mosaic", [])
        ),
        modules=tuple(
            XlaModule(
                file=str(m["file"]),
                ptx=str(m["ptx"]),
                ptxas=str(m["ptxas"]),
                sass=str(m["sass"]),
                sass_from=str(m.get("sass_from", "ptxas")),
            )
            for m in job.get("modules", [])
        ),
        seconds=float(job.get("seconds", 0.0)),
    )


# ---------------------------------------------------------------------------
# Reading what the compile made.

_LAUNCH = re.compile(
    r"^\s*\d+:\s*(\w+)\s*(?:\[[^\]]*\])?\s*([\w$.]+)\s+grid:\s*\[([\d,\s]+)\]\s+"
    r"threads:\s*\[([\d,\s]+)\]\s+shared_memory:\s*(\d+)\s*bytes",
    re.MULTILINE,
)


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel launch in XLA's launch sequence.

    Attributes:
        kind: The thunk kind ("kCustomKernel" for a Triton kernel, "kKernel" ...).
        name: The kernel's function name.
        grid: Blocks (x, y, z).
        threads: Threads per block (x, y, z).
        shared_bytes: Dynamic shared memory per block.
    """

    kind: str
    name: str
    grid: tuple[int, ...]
    threads: tuple[int, ...]
    shared_bytes: int


def launches(thunks: str) -> list[Launch]:
    """The kernel launches of a `*.thunk_sequence.txt` dump."""
    return [
        Launch(
            kind=m.group(1),
            name=m.group(2),
            grid=tuple(int(x) for x in m.group(3).split(",")),
            threads=tuple(int(x) for x in m.group(4).split(",")),
            shared_bytes=int(m.group(5)),
        )
        for m in _LAUNCH.finditer(thunks)
    ]


_THREADS = re.compile(
    r"^\s*\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE
)
_DYNAMIC_SHARED = re.compile(r"dynamic_shared_memory_size\s+%c(\d+)_i32")


def threads_per_block(ptx: str) -> int | None:
    """Threads per block a PTX kernel declares (`.maxntid` / `.reqntid`)."""
    match = _THREADS.search(ptx)
    if match is None:
        return None
    total = 1
    for group in match.groups():
        total *= int(group) if group else 1
    return total


def mosaic_dynamic_shared(passes: tuple[tuple[str, str], ...]) -> int:
    """Dynamic shared memory Mosaic GPU's launch asks for, from its pass pipeline."""
    for _, module in passes:
        match = _DYNAMIC_SHARED.search(module)
        if match:
            return int(match.group(1))
    return 0


_REGISTERS = re.compile(r"Used (\d+) registers")
_LOCAL = re.compile(r"(\d+) bytes lmem")
_STATIC_SHARED = re.compile(r"(\d+) bytes smem")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")
_FUNCTION = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")


def ptxas_report(report: str) -> dict[str, dict[str, int]]:
    """A `ptxas -v` report by function: registers, spill stores/loads, stack, local bytes."""
    figures: dict[str, dict[str, int]] = {}
    current = ""
    for line in report.splitlines():
        if match := _FUNCTION.search(line):
            current = match.group(1)
            figures.setdefault(current, {})
        entry = figures.setdefault(current, {})
        if match := _REGISTERS.search(line):
            entry["registers"] = int(match.group(1))
        if match := _SPILLS.search(line):
            entry["spill_stores"] = int(match.group(1))
            entry["spill_loads"] = int(match.group(2))
        if match := _STACK.search(line):
            entry["stack"] = int(match.group(1))
        if match := _REGISTERS.search(line):
            local = _LOCAL.search(line)
            entry["local"] = int(local.group(1)) if local else 0
    return {k: v for k, v in figures.items() if k and v}


def static_shared(report: str) -> int:
    """Static shared memory a ptxas report names (the first function's)."""
    match = _STATIC_SHARED.search(report)
    return int(match.group(1)) if match else 0


_PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)")
_PTX_DECLARATION = re.compile(r"^\s*\.(?:version|target|address_size|extern|global|shared|const)\b")


def ptx_function(ptx: str, name: str) -> str:
    """One kernel of a PTX module: the module's header and declarations, and its entry.

    The whole module when there is no entry called `name`.
    """
    lines = ptx.splitlines()
    start = next(
        (k for k, line in enumerate(lines) if (m := _PTX_ENTRY.match(line)) and m.group(1) == name),
        None,
    )
    if start is None:
        return ptx
    depth = 0
    end = len(lines)
    opened = False
    for k in range(start, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        opened = opened or "{" in lines[k]
        if opened and depth <= 0:
            end = k + 1
            break
    # Top-level declarations (before any function body) the kernel may use.
    declarations = []
    depth = 0
    for line in lines[:start]:
        if depth == 0 and _PTX_DECLARATION.match(line):
            declarations.append(line)
        depth += line.count("{") - line.count("}")
    return "\n".join([*declarations, "", *lines[start:end]])


_SASS_SECTION = re.compile(r"^\s*//-+ \.text\.([\w$.]+)\s+-+")


def sass_function(sass: str, name: str) -> str:
    """One kernel's section of an nvdisasm listing (the whole listing without one)."""
    lines = sass.splitlines()
    start = next(
        (
            k
            for k, line in enumerate(lines)
            if (m := _SASS_SECTION.match(line)) and m.group(1) == name
        ),
        None,
    )
    if start is None:
        return sass
    end = next(
        (k for k in range(start + 1, len(lines)) if lines[k].lstrip().startswith("//---")),
        len(lines),
    )
    return "\n".join(lines[start:end])
