"""What a worker of the cluster does: say what it is, compile a config, time and check one.

These run inside Ray tasks (`tasks.py`) on the cluster's hosts, which have the same
Python, JAX and pallaslab as the notebook (`describe_worker` says, and the notebook
refuses workers that differ). A job carries a shipped program (`core.shipping`: the
config's call, traced and exported in the notebook), never the notebook: the inputs
come beside it, once per sweep, from Ray's object store. A config's correctness is
checked here, against the reference's outputs on the same inputs, with the one
comparison (`programs.compare_placed`), its mismatches located on the kernel's
blocks as in the notebook.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import os
import platform
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import jax

from pallaslab._src.base import messages, version
from pallaslab._src.bench import harness, roofline, sweep
from pallaslab._src.core import programs, shipping
from pallaslab._src.core.comparison import Placement


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """A worker as it describes itself.

    Attributes:
        worker: Its name in progress reports ("node 3f2a91 · pid 4121").
        node: The Ray node it runs on (hex id).
        backend: JAX's backend there ("cpu", "gpu", "tpu").
        device: The device kind ("NVIDIA H100 80GB HBM3", "cpu").
        versions: Python, jax, jaxlib and pallaslab versions.
        capability: A GPU's compute capability, (major, minor); None elsewhere.
    """

    worker: str
    node: str
    backend: str
    device: str
    versions: dict[str, str]
    capability: tuple[int, int] | None = None


@dataclasses.dataclass(frozen=True)
class CompileJob:
    """Compile one config for a chip it need not have.

    Attributes:
        shipped: The config's call, exported for the target's platform.
        target: "xla-gpu:<chip>" or "tpu-compile:<chip>".
    """

    shipped: shipping.Shipped
    target: str


@dataclasses.dataclass(frozen=True)
class TimeJob:
    """Time one config (or the XLA baseline) on a chip and check it against the reference.

    Attributes:
        impl: "pallas" (a config) or "xla" (the reference under `jax.jit`).
        label: The config as text ("BLOCK=64").
        config: Its values.
        shipped: The call, exported for the chip's platform.
        chip: The chip kind it is timed on (a row's `chip`).
        settings: Timer settings (None: the harness's defaults).
        work: FLOPs and bytes of one call (for throughput), when known.
        peaks: The chip's (peak FLOP/s, bandwidth), zeros when unknown.
        reference: The reference, exported for the chip's platform (None: the
            expected values come with the task, or there is no reference).
        reference_key: Names the reference and inputs (the worker keeps their
            expected outputs under it, computed once).
        check: Whether to check the outputs against the reference.
        placements: Where each output's mismatches lie on the kernels' blocks.
        cached_row: A cached row to check again instead of timing (JSON), or None.
    """

    impl: str
    label: str
    config: dict[str, Any]
    shipped: shipping.Shipped
    chip: str = ""
    settings: harness.TimerSettings | None = None
    work: roofline.Work | None = None
    peaks: tuple[float, float] = (0.0, 0.0)
    reference: shipping.Shipped | None = None
    reference_key: str = ""
    check: bool = False
    placements: tuple[Placement, ...] = ()
    cached_row: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Started:
    """A time job began on a worker."""

    worker: str


@dataclasses.dataclass(frozen=True)
class Finished:
    """A time job's row (JSON), and how long the worker was busy with it."""

    row: dict[str, Any]
    busy_s: float


def versions() -> dict[str, str]:
    """The versions a shipped program needs to match, here."""
    return {
        "python": ".".join(platform.python_version_tuple()[:2]),
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "pallaslab": version.__version__,
    }


def describe_worker() -> WorkerInfo:
    """This worker: its node, JAX backend and device kind, and versions."""
    node = _node_id()
    backend = jax.default_backend()
    return WorkerInfo(
        worker=worker_name(node),
        node=node,
        backend=backend,
        device=harness.device_name(),
        versions=versions(),
        capability=_capability() if backend == "gpu" else None,
    )


def worker_name(node: str = "") -> str:
    """How progress names this worker: its node (short) and process."""
    node = node or _node_id()
    return f"node {node[:6]} · pid {os.getpid()}" if node else f"pid {os.getpid()}"


def compile_config(job: CompileJob) -> shipping.CompileCheck:
    """Compiles the shipped config for its target (in a fresh process); what it said."""
    try:
        return shipping.compile_check(job.shipped, job.target)
    except Exception as error:  # the compiler's own failure is the config's
        return shipping.CompileCheck(job.target, error=messages.one_line(error))


def time_config(
    job: TimeJob,
    inputs: Sequence[Any],
    expected: Any,
    compiled: shipping.CompileCheck | None,
) -> Iterator[Started | Finished]:
    """Times (or checks again) one config here; says when it starts, then its row."""
    worker = worker_name()
    yield Started(worker)
    started = time.perf_counter()
    row = _measure(job, inputs, expected, compiled)
    row = dataclasses.replace(row, chip=job.chip, worker=worker)
    yield Finished(row.to_json(), time.perf_counter() - started)


def _measure(
    job: TimeJob,
    inputs: Sequence[Any],
    expected: Any,
    compiled: shipping.CompileCheck | None,
) -> sweep.Row:
    def failed(status: str, error: str) -> sweep.Row:
        return sweep.Row(job.impl, job.label, config=job.config, status=status, error=error)

    if compiled is not None and compiled.error and not compiled.unavailable:
        return failed(f"failed to compile ({compiled.target})", compiled.error)
    try:
        prepared = harness.prepare(shipping.load(job.shipped), tuple(inputs), {})
    except Exception as error:
        return failed("failed to compile", messages.one_line(error))
    # How the kernels run is the notebook's word: the shipped program holds no kernel
    # the worker could recognise (they were lowered where it was traced).
    prepared = dataclasses.replace(prepared, mode=job.shipped.mode)
    if job.cached_row is not None:
        return _recheck(job, prepared, inputs, expected)
    try:
        timing, outputs = harness.measure_prepared(prepared, job.settings)
    except Exception as error:
        return failed("failed to run", messages.one_line(error))
    fields = _verdict(job, outputs, inputs, expected) if job.check else {}
    work = job.work or roofline.Work(None, None)
    return sweep.measured_row(
        job.impl, job.label, timing, work, peaks=job.peaks, config=job.config, **fields
    )


def _recheck(
    job: TimeJob, prepared: harness.PreparedCall, inputs: Sequence[Any], expected: Any
) -> sweep.Row:
    """A cached row, its correctness checked again on the inputs at hand."""
    assert job.cached_row is not None
    row = dataclasses.replace(sweep.Row.from_json(job.cached_row), cached=True)
    if not job.check or row.status not in ("ok", "wrong"):
        return row
    try:
        outputs = jax.block_until_ready(prepared.run())
    except Exception as error:
        return dataclasses.replace(row, status="failed to run", error=messages.one_line(error))
    fields = _verdict(job, outputs, inputs, expected)
    return dataclasses.replace(
        row,
        status=fields.get("status", "ok"),
        error=fields.get("error", ""),
        correct=fields.get("correct"),
        max_abs_err=fields.get("max_abs_err", math.nan),
    )


def _verdict(job: TimeJob, outputs: Any, inputs: Sequence[Any], expected: Any) -> dict[str, Any]:
    """The row's fields saying whether `outputs` match the reference (and why not)."""
    try:
        if expected is None:
            expected = _expected(job, inputs)
        comparison = programs.compare_placed(outputs, expected, job.placements)
    except Exception as error:
        return {"status": "wrong", "error": f"the reference failed: {messages.one_line(error)}"}
    fields: dict[str, Any] = {"correct": comparison.ok, "max_abs_err": comparison.max_abs_err}
    if not comparison.ok:
        fields.update(status="wrong", error=comparison.problem or sweep.mismatch_text(comparison))
    return fields


# The reference's outputs per (reference, inputs), computed once per worker process.
_EXPECTED: OrderedDict[str, Any] = OrderedDict()
_EXPECTED_KEPT = 2


def _expected(job: TimeJob, inputs: Sequence[Any]) -> Any:
    if job.reference is None:
        raise ValueError("no reference was sent")
    key = job.reference_key
    if key and key in _EXPECTED:
        _EXPECTED.move_to_end(key)
        return _EXPECTED[key]
    found = jax.device_get(jax.jit(shipping.load(job.reference))(*inputs))
    if key:
        _EXPECTED[key] = found
        while len(_EXPECTED) > _EXPECTED_KEPT:
            _EXPECTED.popitem(last=False)
    return found


def _capability() -> tuple[int, int] | None:
    """The first GPU's compute capability ("9.0" -> (9, 0)), when JAX says."""
    text = str(getattr(jax.devices()[0], "compute_capability", "") or "")
    major, _, minor = text.partition(".")
    return (int(major), int(minor or 0)) if major.isdigit() else None


def _node_id() -> str:
    try:
        import ray  # noqa: PLC0415 - only inside a Ray worker

        return str(ray.get_runtime_context().get_node_id() or "")
    except Exception:  # outside Ray (a test calling the job directly)
        return ""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""
