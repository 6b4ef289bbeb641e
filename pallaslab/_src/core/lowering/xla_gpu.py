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
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TypeVar

from pallaslab._src.core import gpu_target_config, gpu_toolchain
from pallaslab._src.core.lowering.failures import exit_words

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
        [sys.executable, str(WORKER), "--wait", str(SPARE_IDLE_SECONDS), str(root)],
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
        return XlaGpuCompile(
            chip, error=f"the XLA GPU compile worker took over {TIMEOUT_SECONDS} s"
        )
    result_path = root / "result.json"
    if not result_path.exists():
        tail = "\n".join((stderr or "").strip().splitlines()[-20:])
        return XlaGpuCompile(
            chip,
            error=f"the XLA GPU compile worker exited "
            f"({exit_words(worker.process.returncode)}):\n{tail}",
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
            _texts(MosaicKernel, k, passes=tuple((str(n), str(t)) for n, t in k["passes"]))
            for k in job.get("mosaic", [])
        ),
        modules=tuple(_texts(XlaModule, m) for m in job.get("modules", [])),
        seconds=float(job.get("seconds", 0.0)),
    )


_Record = TypeVar("_Record", MosaicKernel, XlaModule)


def _texts(record: type[_Record], data: dict[str, Any], **given: Any) -> _Record:
    """A record of texts from the worker's JSON: each field not `given` read as text.

    A field with a default may be missing from the JSON (older workers' results).
    """
    fields: dict[str, Any] = {
        field.name: str(
            data[field.name]
            if field.default is dataclasses.MISSING
            else data.get(field.name, field.default)
        )
        for field in dataclasses.fields(record)
        if field.name not in given
    }
    return record(**fields, **given)
