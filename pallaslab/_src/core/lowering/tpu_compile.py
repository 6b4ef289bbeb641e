"""A real TPU compile on any machine: libtpu in compile-only mode, in a worker process.

The parent exports the kernel for TPU (in-process, no libtpu needed), then a fresh
Python process loads libtpu with dump flags set, compiles for a compile-only TPU
topology, and returns the Mosaic pass pipeline, the LLO (down to the final VLIW
bundles, each annotated with its source line) and the code size.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pallaslab._src.core.lowering.failures import exit_words

# pallaslab's chip names -> (compile-only topology, TPU_ACCELERATOR_TYPE).
TOPOLOGIES: dict[str, tuple[str, str]] = {
    "v4": ("v4:1x1x1", "v4-8"),
    "v5e": ("v5e:1x1", "v5litepod-1"),
    "v5p": ("v5p:1x1x1", "v5p-8"),
    "v6e": ("v6e:1x1", "v6e-1"),
    "7x": ("tpu7x:1x1x1", "tpu7x-2"),
}
WORKER = Path(__file__).with_name("tpu_worker.py")
TIMEOUT_SECONDS = 300


@dataclasses.dataclass(frozen=True)
class TpuCompile:
    """What one libtpu compile of a kernel returned.

    Attributes:
        chip: The TPU generation.
        error: The compiler's error ("" when it compiled).
        code_bytes: Generated code size.
        hlo: The compiled TPU HLO, with its layouts.
        mosaic_stages: (pass, module text) for each pass of Mosaic's pipeline.
        llo: The kernel's LLO dumps by stage ("final_bundles", "original", ...).
        program: The kernel's program (its HLO instruction, "run_kernel.1").
        other_programs: Final bundles of the programs XLA compiled around the
            kernel (layout copies), by program name.
        seconds: Worker time, process start excluded.
    """

    chip: str
    error: str = ""
    code_bytes: int | None = None
    hlo: str = ""
    mosaic_stages: tuple[tuple[str, str], ...] = ()
    llo: dict[str, str] = dataclasses.field(default_factory=dict)
    program: str = ""
    other_programs: dict[str, str] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0


def libtpu_version() -> str:
    """The installed libtpu's version ("" when it is not installed)."""
    try:
        return importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        return ""


def compile_exported(exported: bytes, chip: str) -> TpuCompile:
    """Compiles a pickled `Exported` for `chip` in a libtpu worker process."""
    topology, accelerator = TOPOLOGIES[chip]
    with tempfile.TemporaryDirectory(prefix="pallaslab-tpu-") as tmp:
        root = Path(tmp)
        (root / "mosaic").mkdir()
        (root / "llo").mkdir()
        (root / "exported.pkl").write_bytes(exported)
        request = {
            "exported": str(root / "exported.pkl"),
            "topology": topology,
            "mosaic_dump": str(root / "mosaic"),
            "llo_dump": str(root / "llo"),
            "result": str(root / "result.json"),
        }
        (root / "request.json").write_text(json.dumps(request), encoding="utf-8")
        flags = " ".join(
            [
                os.environ.get("LIBTPU_INIT_ARGS", ""),
                f"--xla_mosaic_dump_to={root / 'mosaic'}",
                "--xla_mosaic_enable_dump_debug_info=true",
                f"--xla_jf_dump_to={root / 'llo'}",
                "--xla_mosaic_enable_llo_source_annotations=true",
            ]
        ).strip()
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "TPU_ACCELERATOR_TYPE": accelerator,
            "TPU_WORKER_HOSTNAMES": "localhost",
            "TPU_WORKER_ID": "0",
            # Compile-only: no TPU to share, so workers (and other users' libtpu) may
            # run side by side instead of failing on libtpu's machine-wide lockfile.
            "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
            "LIBTPU_INIT_ARGS": flags,
            "TF_CPP_MIN_LOG_LEVEL": "3",
        }
        try:
            done = subprocess.run(
                [sys.executable, str(WORKER), str(root / "request.json")],
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return TpuCompile(
                chip, error=f"the libtpu compile worker took over {TIMEOUT_SECONDS} s"
            )
        result_path = root / "result.json"
        if not result_path.exists():
            tail = "\n".join((done.stderr or "").strip().splitlines()[-20:])
            return TpuCompile(
                chip,
                error=f"the libtpu compile worker exited ({exit_words(done.returncode)}):\n{tail}",
            )
        result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    return TpuCompile(
        chip=chip,
        error=str(result.get("error", "")),
        code_bytes=result.get("code_bytes"),
        hlo=str(result.get("hlo", "")),
        mosaic_stages=tuple((str(n), str(t)) for n, t in result.get("mosaic_stages", [])),
        llo={str(k): str(v) for k, v in result.get("llo", {}).items()},
        program=str(result.get("program", "")),
        other_programs={str(k): str(v) for k, v in result.get("other_programs", {}).items()},
        seconds=float(result.get("seconds", 0.0)),
    )


_BUNDLE = re.compile(r"^\s*(?:0x[0-9a-f]+|\d+)\s+(?:[A-Z]{2})?:\s*(>*)\s*\{")


def bundle_counts(final_bundles: str) -> tuple[int, int]:
    """(all bundles, bundles of the innermost loop) of a final-bundles listing.

    Each bundle line carries one `>` per enclosing loop; the innermost loop's body
    is the bundles at the deepest level (for a Pallas kernel, one grid step).
    """
    depths = [len(m.group(1)) for m in map(_BUNDLE.match, final_bundles.splitlines()) if m]
    if not depths:
        return 0, 0
    deepest = max(depths)
    return len(depths), sum(1 for d in depths if d == deepest) if deepest else 0


def utilization(per_bundle: str) -> tuple[tuple[str, int, float], ...]:
    """(unit, slots per bundle, mean slots used) from libtpu's per-bundle utilization."""
    lines = [line.strip() for line in per_bundle.splitlines() if line.strip()]
    try:
        start = next(k for k, line in enumerate(lines) if line.startswith("== CAPAC"))
        units = [u.strip() for u in lines[start + 1].split(",")]
        capacity = [int(x) for x in lines[start + 2].split()]
        table = lines.index("== UTILIZATION:")
    except (StopIteration, ValueError, IndexError):
        return ()
    rows = []
    for line in lines[table + 1 :]:
        if line.startswith("=="):
            break
        values = line.split()
        if len(values) == len(units) and all(v.isdigit() for v in values):
            rows.append([int(v) for v in values])
    if not rows or len(capacity) != len(units):
        return ()
    return tuple(
        (unit, capacity[k], sum(row[k] for row in rows) / len(rows)) for k, unit in enumerate(units)
    )
