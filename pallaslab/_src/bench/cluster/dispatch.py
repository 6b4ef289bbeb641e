"""Submitting a sweep's tasks, streaming what they report, retrying, cancelling.

Each config (per chip kind) is a pipeline: an optional compile task on any CPU, then
a time task on a worker of the chip kind, which waits for the compile (Ray passes its
result as an argument) and streams two events: it started (on which worker), then
its row. The dispatcher waits on every pipeline at once (`ray.wait`), hands rows over
as they arrive, and keeps what each worker is doing for the live view.

Ray retries nothing itself (`max_retries=0`): when a pipeline's worker or node is
lost, the dispatcher submits it again, elsewhere if its node is gone, and the row
says it was retried and why. A worker process that dies on the same config every
time (a segfault in a compile) is that config's failure after `retries` more tries;
the sweep goes on. `cancel_all` (on an interrupt) cancels whatever has not finished.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import ray
import ray.exceptions as ray_errors

from pallaslab._src.base import messages
from pallaslab._src.bench import sweep
from pallaslab._src.bench.cluster import tasks, work
from pallaslab._src.bench.cluster.connect import Place
from pallaslab._src.core import shipping

# A node (or its raylet) went away: its tasks are retried elsewhere.
_NODE_LOST = (ray_errors.NodeDiedError, ray_errors.LocalRayletDiedError)
# The task's worker process died, or Ray lost what it needed: the task may be at fault.
_WORKER_LOST = (
    ray_errors.WorkerCrashedError,
    ray_errors.ObjectLostError,
    ray_errors.OutOfMemoryError,
    ray_errors.RaySystemError,
)
# Losses of nodes a pipeline survives beyond its retries (a cluster shrinking under it).
_EXTRA_NODE_LOSSES = 3
# Statuses of rows about a worker, not a config's result: never cached.
CRASHED = "failed: crashed its worker"
WORKER_FAILURES = (CRASHED, "failed on the worker", "failed: its workers kept being lost")


@dataclasses.dataclass
class Pipeline:
    """One config (or baseline) on one chip kind: its jobs, and what became of them.

    Attributes:
        key: Names it among the sweep's pipelines.
        place: The chip kind that times it.
        job: The time job.
        inputs: The inputs' object (Ray's store).
        expected: The reference's outputs' object, when they were computed here.
        compile_job: The compile job, or None.
        attempts: Times submitted.
        crashes: Attempts whose worker process died.
        losses: Attempts whose node was lost.
        reasons: Why each retry happened.
        generator: The current time task's stream.
        compile_ref: The current compile task's result.
        worker: The worker timing it now ("" before it starts).
        submitted: When the current attempt was submitted (perf_counter).
    """

    key: str
    place: Place
    job: work.TimeJob
    inputs: Any
    expected: Any = None
    compile_job: work.CompileJob | None = None
    attempts: int = 0
    crashes: int = 0
    losses: int = 0
    reasons: list[str] = dataclasses.field(default_factory=list)
    generator: Any = None
    compile_ref: Any = None
    worker: str = ""
    submitted: float = 0.0


@dataclasses.dataclass
class WorkerState:
    """What one timing worker has done and does now (the live view's line)."""

    worker: str
    chip: str
    done: int = 0
    running: str = ""
    lost: bool = False

    def to_json(self) -> dict[str, Any]:
        """As `contracts.BenchWorker`."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Arrival:
    """A pipeline's row, as it arrived."""

    pipeline: Pipeline
    row: sweep.Row
    busy_s: float
    latency_s: float


class Dispatcher:
    """Runs pipelines on the cluster; calls back with each row and each change of workers."""

    def __init__(
        self,
        retries: int,
        on_row: Callable[[Arrival], None],
        on_workers: Callable[[list[dict[str, Any]], int], None] | None = None,
    ) -> None:
        """A dispatcher.

        Args:
            retries: Tries after the first for a pipeline whose worker was lost.
            on_row: Called with each row as it arrives.
            on_workers: Called with every worker's state (and the compiles done)
                when one starts or finishes a config.
        """
        self.retries = retries
        self._on_row = on_row
        self._on_workers = on_workers
        self._running: dict[Any, Pipeline] = {}  # generator -> pipeline
        self._compiling: dict[Any, Pipeline] = {}  # compile ref -> pipeline
        self.workers: dict[str, WorkerState] = {}
        self.compiled = 0
        self.compile_notices: list[str] = []
        self.cancelled: list[Any] = []
        self.submitted = 0

    @property
    def pending(self) -> int:
        """Pipelines not finished."""
        return len(self._running)

    def submit(self, pipeline: Pipeline) -> None:
        """Starts (or starts again) a pipeline's tasks."""
        pipeline.attempts += 1
        self.submitted += 1
        pipeline.worker = ""
        pipeline.submitted = time.perf_counter()
        compiled: Any = None
        if pipeline.compile_job is not None:
            # No accelerator for it (Ray hides GPUs from tasks that ask for none), and the
            # compile itself runs in a fresh process on the CPU; its worker process is the
            # same kind as a CPU chip kind's timing one, so neither waits for the other's.
            compiled = tasks.compile_task.remote(pipeline.compile_job)
            pipeline.compile_ref = compiled
            self._compiling[compiled] = pipeline
        pipeline.generator = tasks.time_task.options(**pipeline.place.options).remote(
            pipeline.job, pipeline.inputs, pipeline.expected, compiled
        )
        self._running[pipeline.generator] = pipeline

    def poll(self, timeout: float) -> None:
        """Handles whatever arrives within `timeout` seconds (0: only what is there)."""
        waitables = [*self._running, *self._compiling]
        if not waitables:
            return
        ready, _ = ray.wait(waitables, num_returns=1, timeout=timeout, fetch_local=True)
        if ready:  # then everything else that is ready as well
            ready, _ = ray.wait(waitables, num_returns=len(waitables), timeout=0)
        for item in ready:
            if item in self._compiling:
                self._compile_done(self._compiling.pop(item), item)
            elif item in self._running:
                self._next_event(item)

    def cancel_all(self) -> int:
        """Cancels every task not finished; how many pipelines that stopped."""
        count = 0
        for generator, pipeline in list(self._running.items()):
            for target in (generator, pipeline.compile_ref):
                if target is None:
                    continue
                try:
                    ray.cancel(target)
                except Exception:  # already finished, or its owner is gone
                    continue
                self.cancelled.append(target)
            count += 1
            if pipeline.worker in self.workers:
                self.workers[pipeline.worker].running = ""
        self._running.clear()
        self._compiling.clear()
        return count

    # -- events ---------------------------------------------------------------------

    def _compile_done(self, pipeline: Pipeline, ref: Any) -> None:
        try:
            outcome: shipping.CompileCheck = ray.get(ref)
        except Exception:  # the time task, which depends on it, reports the failure
            return
        self.compiled += 1
        if outcome.unavailable:
            note = (
                f"{outcome.target} could not be compiled on the CPU workers "
                f"({outcome.error.splitlines()[0] if outcome.error else ''}); "
                "configs were timed without it"
            )
            if note not in self.compile_notices:
                self.compile_notices.append(note)
        self._tell_workers()

    def _next_event(self, generator: Any) -> None:
        pipeline = self._running[generator]
        try:
            event = ray.get(next(generator))
        except StopIteration:  # ended without a row (should not happen): a failure
            self._running.pop(generator, None)
            self._fail(pipeline, "failed on the worker", "its task ended without a result")
            return
        except ray_errors.TaskCancelledError:
            self._running.pop(generator, None)
            return
        except Exception as error:
            self._running.pop(generator, None)
            self._lost(pipeline, error)
            return
        if isinstance(event, work.Started):
            pipeline.worker = event.worker
            state = self.workers.setdefault(
                event.worker, WorkerState(event.worker, pipeline.place.label)
            )
            state.running, state.lost = pipeline.job.label, False
            self._tell_workers()
            return
        self._running.pop(generator, None)
        assert isinstance(event, work.Finished)
        if pipeline.worker in self.workers:
            state = self.workers[pipeline.worker]
            state.done += 1
            state.running = ""
        row = sweep.Row.from_json(event.row)
        if pipeline.attempts > 1:
            row = dataclasses.replace(
                row, retries=pipeline.attempts - 1, retry_reason=pipeline.reasons[-1]
            )
        latency = time.perf_counter() - pipeline.submitted
        self._on_row(Arrival(pipeline, row, event.busy_s, latency))
        self._tell_workers()

    def _lost(self, pipeline: Pipeline, error: BaseException) -> None:
        """A task failed: retried when its worker or node was lost, else the config's failure."""
        cause = getattr(error, "cause", None)
        found = cause if isinstance(cause, _NODE_LOST + _WORKER_LOST) else error
        where = f" on {pipeline.worker}" if pipeline.worker else ""
        if pipeline.worker in self.workers:
            self.workers[pipeline.worker].running = ""
        if isinstance(found, _NODE_LOST):
            pipeline.losses += 1
            reason = f"its node was lost{where} ({type(found).__name__})"
            if pipeline.worker in self.workers:
                self.workers[pipeline.worker].lost = True
        elif isinstance(found, _WORKER_LOST):
            pipeline.crashes += 1
            reason = f"its worker process died{where} ({_first_line(found)})"
        else:
            # Our own task raised: not something another try would change.
            self._fail(pipeline, "failed on the worker", _first_line(error))
            return
        pipeline.reasons.append(reason)
        if pipeline.crashes > self.retries:
            tries = pipeline.attempts
            self._fail(
                pipeline,
                CRASHED,
                f"the worker process died on this config on {tries} attempt"
                f"{'s' if tries != 1 else ''} ({reason}); the rest of the sweep went on",
            )
            return
        if pipeline.losses > self.retries + _EXTRA_NODE_LOSSES:
            self._fail(pipeline, "failed: its workers kept being lost", reason)
            return
        self._tell_workers()
        self.submit(pipeline)

    def _fail(self, pipeline: Pipeline, status: str, error: str) -> None:
        job = pipeline.job
        row = sweep.Row(
            job.impl,
            job.label,
            config=job.config,
            status=status,
            error=error,
            chip=job.chip,
            worker=pipeline.worker,
            retries=max(0, pipeline.attempts - 1),
            retry_reason=pipeline.reasons[-1] if pipeline.attempts > 1 and pipeline.reasons else "",
        )
        latency = time.perf_counter() - pipeline.submitted
        self._on_row(Arrival(pipeline, row, 0.0, latency))
        self._tell_workers()

    def _tell_workers(self) -> None:
        if self._on_workers is not None:
            self._on_workers([w.to_json() for w in self.workers.values()], self.compiled)


def _first_line(error: BaseException) -> str:
    text = messages.one_line(error)
    return text if len(text) <= 240 else text[:237] + "..."
