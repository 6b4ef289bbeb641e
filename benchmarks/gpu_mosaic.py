"""Mosaic GPU kernels on a real GPU: the device, JAX's interpreter and compile-only, compared.

For each kernel of `tests/mosaic_gpu_corpus.py` this GPU's chip can run:
- the device's result (compiled and run on the GPU) and JAX's Mosaic GPU interpreter's
  on the CPU (a subprocess with JAX_PLATFORMS=cpu, traced for this GPU's chip, as
  pallaslab runs it off a GPU), each against NumPy and against each other;
- the `xla-gpu:<chip>` lowering pallaslab makes without a GPU (a compile-only device
  from its description of the chip) beside the same lowering compiled for the GPU
  itself: registers, shared memory, and the SASS instructions the kernel must hold.

Run on a GPU machine: python benchmarks/gpu_mosaic.py (scripts/device-check runs it as
its `mosaic-gpu` section). `--interpret NAME --out FILE` is the CPU half (internal).
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def interpret_one(name: str, chip: str, out: Path) -> int:
    """The CPU half: one kernel run in JAX's Mosaic GPU interpreter, saved to `out`."""
    import pallaslab
    from tests import mosaic_gpu_corpus as corpus

    case = next(c for c in corpus.cases() if c.name == name)
    result = pallaslab.inspect(case.fn, *case.args, chip=chip).run()
    np.savez(out, value=np.asarray(result.values[0]), mode=result.mode)
    return 0


def _interpreted(name: str, chip: str) -> tuple[np.ndarray | None, str]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.npz"
        done = subprocess.run(
            [sys.executable, __file__, "--interpret", name, "--chip", chip, "--out", str(out)],
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"failed: {tail[0][:200]}"
        saved = np.load(out)
        return saved["value"], str(saved["mode"])


def _lowerings(case, chip: str):
    """(compile-only, on-device) `xla-gpu:<chip>` lowerings of the case's kernel."""
    import pallaslab
    from pallaslab._src.core.lowering import xla_gpu

    compile_only = pallaslab.inspect(case.fn, *case.args).lower(f"xla-gpu:{chip}")
    original = xla_gpu.compile_exports
    xla_gpu.compile_exports = functools.partial(original, on_device=True)
    try:
        on_device = pallaslab.inspect(case.fn, *case.args).lower(f"xla-gpu:{chip}")
    finally:
        xla_gpu.compile_exports = original
    return compile_only, on_device


def _mnemonics(text: str) -> set[str]:
    found = set()
    for line in text.splitlines():
        body = line.strip()
        if body.startswith("/*"):
            body = body.split("*/", 1)[-1].strip()
        if body.startswith("@"):
            body = body.split(None, 1)[-1] if " " in body else ""
        if body[:1].isupper():
            found.add(body.split()[0].split(".")[0])
    return found


def _close(a: np.ndarray | None, b: np.ndarray, rtol: float) -> str:
    if a is None:
        return "-"
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
    diff = float(np.max(np.abs(a32 - b32))) if a32.size else 0.0
    ok = np.allclose(a32, b32, rtol=rtol, atol=rtol)
    return f"{'ok' if ok else 'DIFFERS'} ({diff:.2g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interpret", help=argparse.SUPPRESS)
    parser.add_argument("--chip", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.interpret:
        return interpret_one(options.interpret, options.chip, options.out)

    import jax

    from pallaslab._src.core import gpu_toolchain
    from pallaslab._src.core.lowering import compare
    from pallaslab._src.records import hardware
    from tests import mosaic_gpu_corpus as corpus

    device = jax.devices()[0]
    if device.platform != "gpu":
        print(f"no GPU here ({device.platform}): run this on a GPU machine")
        return 1
    gpu = hardware.gpu_of_device_kind(device.device_kind)
    chip = gpu.name if gpu is not None else ""
    print(f"{device.device_kind} ({chip or 'not in the hardware table'}), jax {jax.__version__}")
    compile_problem = gpu_toolchain.problem()
    failures = 0
    rows = []
    for case in corpus.cases():
        if chip not in case.chips:
            rows.append((case.name, f"not for this GPU (for {', '.join(case.chips)})", "", "", ""))
            continue
        reference = case.reference(*case.args)
        on_gpu = np.asarray(jax.jit(case.fn)(*case.args))
        device_vs_numpy = _close(on_gpu, reference, case.rtol)
        if case.interpretable():
            interpreted, mode = _interpreted(case.name, chip)
            interp = f"{_close(interpreted, reference, case.rtol)} [{mode}]"
            agree = _close(interpreted, on_gpu, case.rtol)
        else:
            interp, agree = f"not run by jax {jax.__version__}'s interpreter", "-"
        if compile_problem is None:
            compile_only, on_device = _lowerings(case, chip)
            if compile_only.ok and on_device.ok:
                missing = set(case.sass[chip]) - _mnemonics(on_device.text)
                summary = compare.compare_lowered(compile_only, on_device).summary
                sass = f"{summary}; device SASS lacks {sorted(missing)}" if missing else summary
            else:
                sass = f"lowering failed: {(compile_only.error or on_device.error).message[:160]}"
        else:
            sass = f"not compared: {compile_problem}"
        failures += sum("DIFFERS" in s or "failed" in s for s in (device_vs_numpy, interp, agree))
        rows.append((case.name, device_vs_numpy, interp, agree, sass))
    for name, device_result, interp, agree, sass in rows:
        print(f"\n{name}")
        print(f"  device vs NumPy:         {device_result}")
        if interp:
            print(f"  interpreter vs NumPy:    {interp}")
            print(f"  interpreter vs device:   {agree}")
        if sass:
            print(f"  compile-only vs device:  {sass}")
    print(f"\n{failures} difference(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
