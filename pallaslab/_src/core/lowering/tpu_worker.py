"""A worker process that compiles one exported kernel for a TPU with libtpu, compile-only.

Run as a script (`python tpu_worker.py REQUEST.json`), never imported by pallaslab:
libtpu reads its flags (dump directories) once, when it loads, and JAX initializes
its backends once per process, so each compile gets a fresh process with its own
environment. Only the standard library, JAX and `worker_request` (beside it) are
imported here.

The request names a pickled `jax.export.Exported` (made by the parent with the same
Python and JAX), the topology to compile for and the dump directories; the result
JSON (written to the path the request names) carries the compiled HLO, memory
figures, the Mosaic pass pipeline and the LLO dumps, or the compiler's error.
"""

from __future__ import annotations

import pickle
import re
import sys
import time
from pathlib import Path
from typing import Any

if __package__:  # imported as part of pallaslab (tests, type checks)
    from pallaslab._src.core.lowering.worker_request import answer
else:  # run as a script, the usual way: this folder is first on sys.path
    from worker_request import answer  # type: ignore[import-not-found,no-redef]

# The runtime programs libtpu also dumps (`TLP`, `<late-initialization>` ...);
# everything else is the exported program's.
_RUNTIME_PROGRAMS = ("TLP",)
_RUNTIME_PREFIX = "<late-"
# An LLO dump: <timestamp>-<program>-<NN>-<stage>.txt. The program is the HLO
# instruction it compiles (`run_kernel.1` for the kernel, `copy.3` for a layout copy
# XLA puts around it); the timestamp says only when libtpu got to it, which varies
# from run to run when programs compile side by side.
_LLO_DUMP = re.compile(r"^\d+-(?P<program>.+?)-(?P<index>\d+)-(?P<stage>.+)$")
# The kernel's instruction in the compiled HLO: a Mosaic custom call.
_KERNEL_CALL = re.compile(r'%(?P<name>[^\s=]+) = .*custom_call_target="tpu_custom_call"')


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _mosaic_stages(directory: Path) -> list[tuple[str, str]]:
    """The Mosaic pass pipeline: the longest run of numbered dumps, in order."""
    runs: dict[str, list[Path]] = {}
    for path in sorted(directory.glob("*.txt")):
        run = path.name.split("-", 1)[0]
        runs.setdefault(run, []).append(path)
    if not runs:
        return []
    # The longest run; of equally long ones the first (by name), whatever the order
    # the file system lists them in.
    longest = max(sorted(runs.items()), key=lambda item: len(item[1]))[1]
    stages = []
    for path in sorted(longest):
        # <run>-<NNNN>-mosaic-dump-<kernel>-<stage>.txt
        parts = path.stem.split("-mosaic-dump-", 1)
        name = parts[1].split("-", 1)[1] if len(parts) == 2 and "-" in parts[1] else path.stem
        stages.append((name, _read(path)))
    return stages


def llo_programs(directory: Path) -> dict[str, dict[str, str]]:
    """Every program's LLO dumps: program name -> stage name ("final_bundles" ...) -> text.

    libtpu's own runtime programs are left out.
    """
    found: dict[str, dict[str, str]] = {}
    for path in sorted(directory.glob("*.txt")):
        match = _LLO_DUMP.match(path.stem)
        if match is None or _runtime(match["program"]):
            continue
        found.setdefault(match["program"], {})[match["stage"]] = _read(path)
    return found


def _runtime(program: str) -> bool:
    return program in _RUNTIME_PROGRAMS or program.startswith(_RUNTIME_PREFIX)


def kernel_programs(hlo: str) -> list[str]:
    """The names of the kernel's instructions (Mosaic custom calls) in compiled HLO."""
    return [m["name"] for m in map(_KERNEL_CALL.search, hlo.splitlines()) if m]


def split_programs(
    programs: dict[str, dict[str, str]], hlo: str
) -> tuple[str, dict[str, str], dict[str, str]]:
    """(the kernel's program, its LLO dumps, the final bundles of every other program).

    The kernel is the program of the compiled HLO's Mosaic custom call, never the
    last one libtpu happened to finish: XLA's layout copies around the kernel (a
    head dimension of 64 makes some) compile alongside it. Where the HLO names none
    that was dumped, the program with the most final bundles stands for it.
    """
    if not programs:
        return "", {}, {}
    named = [name for name in kernel_programs(hlo) if name in programs]
    if named:
        kernel = named[0]
    else:
        kernel = max(
            sorted(programs), key=lambda name: programs[name].get("final_bundles", "").count("\n")
        )
    others = {
        name: stages.get("final_bundles", "")
        for name, stages in sorted(programs.items())
        if name != kernel and stages.get("final_bundles")
    }
    return kernel, programs[kernel], others


def compile_request(request: dict[str, Any]) -> dict[str, Any]:
    """Compiles the request's kernel; returns the result as plain JSON values."""
    started = time.perf_counter()
    import jax  # noqa: PLC0415
    from jax.experimental import topologies  # noqa: PLC0415

    exported = pickle.loads(Path(request["exported"]).read_bytes())
    topology = topologies.get_topology_desc(request["topology"], "tpu")
    device = topology.devices[0]
    mesh = jax.sharding.Mesh([device], ("x",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    result: dict[str, Any] = {"device_kind": str(getattr(device, "device_kind", ""))}
    try:
        compiled = (
            jax.jit(exported.call, in_shardings=replicated, out_shardings=replicated)
            .trace(*exported.in_avals)
            .lower()
            .compile()
        )
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
        result["mosaic_stages"] = _mosaic_stages(Path(request["mosaic_dump"]))
        result["seconds"] = time.perf_counter() - started
        return result
    memory = compiled.memory_analysis()
    result["code_bytes"] = int(getattr(memory, "generated_code_size_in_bytes", 0) or 0)
    result["hlo"] = compiled.as_text()
    result["mosaic_stages"] = _mosaic_stages(Path(request["mosaic_dump"]))
    program, llo, others = split_programs(llo_programs(Path(request["llo_dump"])), result["hlo"])
    result["program"] = program
    result["llo"] = llo
    result["other_programs"] = others
    result["seconds"] = time.perf_counter() - started
    return result


def main(argv: list[str]) -> int:
    """Entry point: `tpu_worker.py REQUEST.json`."""
    return answer(argv[1], compile_request, "TPU")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
