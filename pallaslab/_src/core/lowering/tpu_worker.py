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
import sys
import time
from pathlib import Path
from typing import Any

if __package__:  # imported as part of pallaslab (tests, type checks)
    from pallaslab._src.core.lowering.worker_request import answer
else:  # run as a script, the usual way: this folder is first on sys.path
    from worker_request import answer  # type: ignore[import-not-found,no-redef]

# The runtime programs libtpu also dumps; everything else is the kernel's.
_RUNTIME_PREFIXES = ("<late-", "TLP-")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _mosaic_stages(directory: Path) -> list[tuple[str, str]]:
    """The Mosaic pass pipeline: the longest run of numbered dumps, in order."""
    runs: dict[str, list[Path]] = {}
    for path in directory.glob("*.txt"):
        run = path.name.split("-", 1)[0]
        runs.setdefault(run, []).append(path)
    if not runs:
        return []
    longest = max(runs.values(), key=len)
    stages = []
    for path in sorted(longest):
        # <run>-<NNNN>-mosaic-dump-<kernel>-<stage>.txt
        parts = path.stem.split("-mosaic-dump-", 1)
        name = parts[1].split("-", 1)[1] if len(parts) == 2 and "-" in parts[1] else path.stem
        stages.append((name, _read(path)))
    return stages


def _llo_dumps(directory: Path) -> dict[str, str]:
    """The kernel's LLO dumps by stage name ("final_bundles", "original" ...)."""
    found: dict[str, str] = {}
    for path in sorted(directory.glob("*.txt")):
        name = path.name.split("-", 1)[1] if "-" in path.name else path.name
        if name.startswith(_RUNTIME_PREFIXES):
            continue
        # <id>-<hlo name>-<NN>-<stage>.txt: keep the stage.
        pieces = path.stem.split("-")
        numbered = [k for k, piece in enumerate(pieces) if piece.isdigit() and k > 0]
        stage = "-".join(pieces[numbered[-1] + 1 :]) if numbered else path.stem
        found[stage] = _read(path)
    return found


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
    result["llo"] = _llo_dumps(Path(request["llo_dump"]))
    result["seconds"] = time.perf_counter() - started
    return result


def main(argv: list[str]) -> int:
    """Entry point: `tpu_worker.py REQUEST.json`."""
    return answer(argv[1], compile_request, "TPU")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
