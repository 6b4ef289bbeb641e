"""A worker process that compiles exported functions with XLA for a GPU it does not have.

Run as a script (`python xla_gpu_worker.py REQUEST.json`, or `--wait SECONDS FOLDER` to
import JAX first and then read the request's path from stdin), never imported by pallaslab:
JAX's CUDA plugin, the compile-only device and the dump settings live and die with
this process, so a crash or a stuck compile cannot take the user's kernel with it.
Only the standard library, JAX and `worker_request` (beside it) are imported here
(not Pallas: the exported module already holds every kernel).

The request names the chip's GpuTargetConfig text, pickled `jax.export.Exported`s
("jobs": the kernel alone, and the program around it), folders for XLA's and Mosaic
GPU's dumps, and NVIDIA's tools. For each job the result JSON (written where the
request says) carries the optimised HLO and XLA's launch sequence; for the kernel
job also every kernel's PTX, ptxas report (registers, spills, shared memory), SASS
(nvdisasm, with source line markers) and Mosaic GPU's pass pipeline.

Mosaic GPU compiles its kernels when XLA instantiates the custom call and runs
`$MOSAIC_GPU_CUDA_ROOT/bin/nvdisasm` on the cubin it built when asked for SASS;
the parent puts a small stand-in there that keeps that cubin (`PALLASLAB_CUBIN_DIR`),
so the SASS shown is that of the very binary Mosaic made. XLA does not dump its
cubins either: it is told to run `$CUDA_ROOT/bin/ptxas`, a stand-in that keeps them.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__:  # imported as part of pallaslab (tests, type checks)
    from pallaslab._src.core.lowering.worker_request import answer
else:  # run as a script, the usual way: this folder is first on sys.path
    from worker_request import answer  # type: ignore[import-not-found,no-redef]

TOOL_TIMEOUT = 120
# XLA's option to assemble PTX with the ptxas library (False: with `$CUDA_ROOT/bin/ptxas`).
_PTXAS_SUBPROCESS = "xla_gpu_enable_libnvptxcompiler"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _run(args: list[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        return 1, "", f"{type(error).__name__}: {error}"
    return done.returncode, done.stdout, done.stderr


def _versions() -> tuple[list[int] | None, list[int] | None]:
    """The CUDA runtime and cuDNN versions the plugin was built with, as (major, minor, patch)."""
    for name in ("jax_cuda12_plugin", "jax_cuda13_plugin"):
        try:
            versions = __import__(f"{name}._versions", fromlist=["_versions"])
        except ImportError:
            continue
        cuda = cudnn = None
        try:
            number = int(versions.cuda_runtime_build_version())  # 12090
            cuda = [number // 1000, number % 1000 // 10, 0]
        except Exception:  # a plugin without the query: XLA assumes its own
            pass
        try:
            number = int(versions.cudnn_build_version())  # 90800
            cudnn = [number // 10000, number % 10000 // 100, number % 100]
        except Exception:
            pass
        return cuda, cudnn
    return None, None


def _with_versions(config: str) -> str:
    cuda, cudnn = _versions()
    extra = ""
    if cuda:
        extra += "runtime_version {{ major: {} minor: {} patch: {} }}\n".format(*cuda)
    if cudnn:
        extra += "dnn_version_info {{ major: {} minor: {} patch: {} }}\n".format(*cudnn)
    return config.rstrip("\n") + "\n" + extra


_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)
_ENTRY = re.compile(r"^\s*\.(?:visible\s+)?\.?entry\s+([\w$.]+)", re.MULTILINE)
_SASS_FUNCTION = re.compile(r"^\s*\.type\s+([\w$.]+),@function", re.MULTILINE)


def _disassemble(cubin: Path, tools: dict[str, str]) -> str:
    """SASS with source line markers (-g) and each instruction's encoding (-hex)."""
    code, sass, error = _run([tools["nvdisasm"], "-c", "-g", "-hex", str(cubin)])
    return sass if code == 0 else f"// nvdisasm failed ({code}): {error.strip()}\n"


def _assemble(ptx: Path, tools: dict[str, str]) -> tuple[Path | None, str]:
    """Assembles a PTX file for the architecture it names: (cubin, ptxas' report)."""
    match = _TARGET.search(_read(ptx))
    arch = match.group(1) if match else "sm_90a"
    cubin = ptx.with_suffix(".cubin")
    code, out, error = _run(
        [tools["ptxas"], f"-arch={arch}", "-v", "-lineinfo", "-o", str(cubin), str(ptx)]
    )
    report = (out + error).strip()
    if code != 0 or not cubin.exists():
        return None, f"ptxas failed ({code}):\n{report}"
    return cubin, report


def _passes(log: str) -> list[list[str]]:
    """Mosaic GPU's `*.mlir-passes.log` as [name, module] stages.

    Each dump is the module *before* a pass: the first is the original module, the
    next ones what each pass made. Names are numbered (passes repeat).
    """
    header = re.compile(r"^// -----// IR Dump Before (\S+): ([\w.-]+)")
    dumps: list[tuple[str, list[str]]] = []  # (the pass that made it, module lines)
    previous = ""
    for line in log.splitlines():
        match = header.match(line)
        if match:
            dumps.append((previous, []))
            previous = match.group(2)
        elif dumps:
            dumps[-1][1].append(line)
    stages: list[list[str]] = []
    last = None
    for index, (made_by, lines) in enumerate(dumps):
        text = "\n".join(lines)
        if text != last:  # a pass that changed nothing adds no stage
            stages.append([_stage_name(index, made_by), text])
        last = text
    return stages


def _stage_name(index: int, previous_pass: str) -> str:
    # The dump before pass 1 is the original; the one before pass k+1 is after pass k.
    return f"{index:02d} original" if index == 0 else f"{index:02d} after {previous_pass}"


def _mosaic_kernels(
    folder: Path, cubins: list[Path], tools: dict[str, str]
) -> list[dict[str, Any]]:
    """Every Mosaic GPU kernel dumped in `folder`, with the SASS of its captured cubin."""
    captured: dict[str, str] = {}
    for kept in cubins:
        listing = _disassemble(kept, tools)
        for function in _SASS_FUNCTION.findall(listing):
            captured[function] = listing
    kernels = []
    for ptx_path in sorted(folder.glob("*.ptx")):
        base = ptx_path.stem
        ptx = _read(ptx_path)
        entries = _ENTRY.findall(ptx)
        entry = entries[0] if entries else ""
        origin = "captured" if entry in captured else "ptxas"
        if entry in captured:
            sass = captured[entry]
        else:  # Mosaic did not hand its cubin over: assemble its PTX here
            assembled, _ = _assemble(ptx_path, tools)
            sass = _disassemble(assembled, tools) if assembled else ""
        ptxas_path = folder / f"{base}.ptxas"
        passes_path = folder / f"{base}.mlir-passes.log"
        kernels.append(
            {
                "name": base,
                "entry": entry,
                "ptx": ptx,
                "ptxas": _read(ptxas_path) if ptxas_path.exists() else "",
                "passes": _passes(_read(passes_path)) if passes_path.exists() else [],
                "sass": sass,
                "sass_from": origin,
            }
        )
    return kernels


def _xla_modules(folder: Path, cubins: list[Path], tools: dict[str, str]) -> list[dict[str, Any]]:
    """XLA's own PTX modules (its fusions, Triton kernels), with their cubins' SASS.

    The cubins XLA's own ptxas run made are used when they were kept (`xla-*.cubin`
    beside its report); a module without one is assembled here.
    """
    captured: dict[frozenset[str], tuple[str, str]] = {}  # functions -> (SASS, report)
    for kept in cubins:
        listing = _disassemble(kept, tools)
        log = kept.with_suffix(".ptxas")
        captured[frozenset(_SASS_FUNCTION.findall(listing))] = (
            listing,
            _read(log) if log.exists() else "",
        )
    modules = []
    for ptx_path in sorted(folder.glob("*.ptx")):
        ptx = _read(ptx_path)
        entries = frozenset(_ENTRY.findall(ptx))
        if not entries:
            continue
        found = next((v for k, v in captured.items() if entries <= k), None)
        origin = "captured"
        if found is None:
            origin = "ptxas"
            assembled, report = _assemble(ptx_path, tools)
            found = (_disassemble(assembled, tools) if assembled else "", report)
        sass, report = found
        modules.append(
            {"file": ptx_path.name, "ptx": ptx, "ptxas": report, "sass": sass, "sass_from": origin}
        )
    return modules


def _first(folder: Path, pattern: str) -> str:
    found = sorted(folder.glob(pattern))
    return _read(found[0]) if found else ""


def compile_job(
    job: dict[str, Any],
    device: Any,
    tools: dict[str, str],
    cubin_dir: Path,
    *,
    keep_cubins: bool = True,
) -> dict[str, Any]:
    """Compiles one exported function; returns what XLA and Mosaic GPU made of it.

    `keep_cubins` has XLA assemble with the ptxas stand-in that keeps its cubins (a
    compile on a real GPU keeps XLA's defaults instead, to compare with them).
    """
    import jax  # noqa: PLC0415

    exported = pickle.loads(Path(job["exported"]).read_bytes())
    xla_dump = Path(job["xla_dump"])
    mosaic_dump = Path(job["mosaic_dump"])
    # Mosaic GPU reads its dump folder at each compile.
    os.environ["MOSAIC_GPU_DUMP_TO"] = str(mosaic_dump)
    before = set(cubin_dir.glob("*.cubin"))
    started = time.perf_counter()
    sharding = jax.sharding.SingleDeviceSharding(device)
    result: dict[str, Any] = {}
    options: dict[str, Any] = {"xla_dump_to": str(xla_dump), "xla_dump_hlo_as_text": True}
    # XLA then assembles with `$CUDA_ROOT/bin/ptxas` (same release as its library build),
    # which keeps the cubin: nothing is assembled twice. Dropped if this XLA lacks it.
    if keep_cubins:
        options[_PTXAS_SUBPROCESS] = False
    try:
        with jax.default_device(device):
            lowered = (
                jax.jit(exported.call, in_shardings=tuple(sharding for _ in exported.in_avals))
                .trace(*exported.in_avals)
                .lower()
            )
            try:
                compiled = lowered.compile(compiler_options=options)
            except Exception as error:
                unknown = f"No such compile option: '{_PTXAS_SUBPROCESS}'" in str(error)
                if not keep_cubins or not unknown:
                    raise
                del options[_PTXAS_SUBPROCESS]
                compiled = lowered.compile(compiler_options=options)
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
        result["seconds"] = time.perf_counter() - started
        return result
    result["seconds"] = time.perf_counter() - started
    result["hlo"] = compiled.as_text()
    result["thunks"] = _first(xla_dump, "*.thunk_sequence.txt")
    if job.get("artifacts", True):
        started = time.perf_counter()
        cubins = sorted(set(cubin_dir.glob("*.cubin")) - before)
        mosaic = [c for c in cubins if c.name.startswith("mosaic-")]
        xla = [c for c in cubins if c.name.startswith("xla-")]
        result["mosaic"] = _mosaic_kernels(mosaic_dump, mosaic, tools)
        result["modules"] = _xla_modules(xla_dump, xla, tools)
        result["tool_seconds"] = time.perf_counter() - started
    return result


def compile_request(request: dict[str, Any]) -> dict[str, Any]:
    """Makes the compile-only device and compiles every job of the request."""
    started = time.perf_counter()
    _import_jax()
    import jax  # noqa: PLC0415
    from jax.experimental import topologies  # noqa: PLC0415

    if request.get("on_device"):
        # A real GPU (to compare the compile-only build with): XLA may autotune.
        device = jax.devices("cuda")[0]
    else:
        topology = topologies.get_topology_desc(
            platform="cuda", target_config=_with_versions(request["config"]), topology="1x1x1"
        )
        device = topology.devices[0]
    result: dict[str, Any] = {
        "startup_seconds": time.perf_counter() - started,
        "device_kind": str(getattr(device, "device_kind", "")),
        "runtime_type": str(getattr(getattr(device, "client", None), "runtime_type", "")),
        "jobs": {},
    }
    cubin_dir = Path(request["cubin_dir"])
    for job in request["jobs"]:
        result["jobs"][job["name"]] = compile_job(
            job, device, request["tools"], cubin_dir, keep_cubins=not request.get("on_device")
        )
    result["seconds"] = time.perf_counter() - started
    del jax
    return result


def _import_jax() -> None:
    """JAX, its CUDA plugin and Mosaic GPU's runtime, ready for a compile.

    Mosaic GPU's host code links against its runtime library, which its Python module
    names in `MOSAIC_GPU_RUNTIME_LIB_PATH` when imported (it also points
    `MOSAIC_GPU_CUDA_ROOT` at `CUDA_ROOT`, the parent's folder of tools).
    """
    import jax  # noqa: PLC0415
    from jax.experimental import topologies  # noqa: PLC0415, F401

    # Without Mosaic GPU (no absl ...), Triton kernels and XLA's own still compile.
    with contextlib.suppress(ImportError):
        import jax.experimental.mosaic.gpu  # noqa: PLC0415
    jax.devices()  # the backends and the CUDA plugin, initialised
    _versions()


def _wait_for_request(idle_seconds: float) -> str:
    """Gets ready, then waits for a request's path on stdin ("" after `idle_seconds`)."""
    _import_jax()
    ready, _, _ = select.select([sys.stdin], [], [], idle_seconds)
    return sys.stdin.readline().strip() if ready else ""


def main(argv: list[str]) -> int:
    """Entry point: `xla_gpu_worker.py REQUEST.json`, or `--wait SECONDS FOLDER`.

    A waiting worker that gets no request (idle too long, or its parent went away:
    stdin closed, as when the parent is killed and cannot clean up) removes FOLDER,
    the working folder its parent made for it.
    """
    path = argv[1]
    if path == "--wait":
        path = _wait_for_request(float(argv[2]))
        if not path:
            if len(argv) > 3:
                shutil.rmtree(argv[3], ignore_errors=True)
            return 0
    return answer(path, compile_request, "XLA GPU")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
