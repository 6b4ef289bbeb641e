"""The Ray tasks of a cluster sweep: `work`'s functions, run on the cluster's workers.

Every task is submitted with `max_retries=0`: a worker lost mid-task is retried by
the dispatcher (`dispatch.py`), which knows which config it was, says so in the
table, and tells a config that keeps crashing its worker from a node that went away.
Imported on first use only (it imports Ray).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import ray

from pallaslab._src.bench.cluster import work
from pallaslab._src.core import shipping


@ray.remote(max_retries=0)
def probe_task() -> work.WorkerInfo:
    """What a worker of one chip kind is and runs."""
    return work.describe_worker()


@ray.remote(num_cpus=1, max_retries=0)
def compile_task(job: work.CompileJob) -> shipping.CompileCheck:
    """One config compiled for a chip, on a CPU worker."""
    return work.compile_config(job)


@ray.remote(max_retries=0)
def time_task(
    job: work.TimeJob,
    inputs: Sequence[Any],
    expected: Any,
    compiled: shipping.CompileCheck | None,
) -> Iterator[work.Started | work.Finished]:
    """One config timed and checked on a worker of its chip kind, streaming its progress."""
    yield from work.time_config(job, inputs, expected, compiled)
