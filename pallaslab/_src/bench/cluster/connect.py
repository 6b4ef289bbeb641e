"""Reaching the cluster and finding its chips: where each chip kind's configs are timed.

A chip kind is a label ("H100") of workers started with the custom resource
"pallaslab-chip-<label>", or "gpu", "tpu", "cpu" for any such worker. Each is probed
once with a task that lands where its configs will: the worker says its JAX backend,
its device kind and its versions, and a worker whose Python, JAX or pallaslab differs
from the notebook's is refused (a program exported here would not load there).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any

import ray

from pallaslab._src.base import messages
from pallaslab._src.bench import roofline
from pallaslab._src.bench.cluster import tasks, work
from pallaslab._src.bench.cluster.spec import (
    CHIP_RESOURCE_PREFIX,
    GENERIC_CHIPS,
    Cluster,
    ClusterError,
)


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one chip kind's configs are timed.

    Attributes:
        label: The chip kind as the sweep names it ("H100", "gpu", "cpu").
        options: Ray task options that land a task there (resources).
        slots: How many of its tasks can run at once in the cluster.
        info: What its worker said it is (backend, device kind, versions).
        chip: The hardware table's chip it is ("H100"; "" when unknown): the roof,
            the chip a program is lowered for, and part of the cache key.
    """

    label: str
    options: dict[str, Any]
    slots: int
    info: work.WorkerInfo
    chip: str

    @property
    def platform(self) -> str:
        """The JAX platform its programs are exported for."""
        return {"gpu": "cuda", "tpu": "tpu"}.get(self.info.backend, "cpu")

    def measurer(self) -> dict[str, str]:
        """Who measures here, for the cache key (a label stands in for a CPU's chip)."""
        return {"backend": self.info.backend, "device": self.info.device, "chip": self.chip}


def connect(spec: Cluster) -> str:
    """Connects this process to the cluster (or starts a local Ray); says which.

    Raises:
        ClusterError: When no cluster answers at the address.
    """
    if ray.is_initialized():
        return f"the Ray cluster at {_address()}"
    logging.getLogger("ray").setLevel(logging.WARNING)
    # Ray starts its processes with fork + exec, which JAX warns about in vain.
    quiet = warnings.catch_warnings()
    if spec.local:
        try:
            with quiet:
                warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
                ray.init(
                    include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING
                )
        except Exception as error:
            raise ClusterError(f"a local Ray could not start: {messages.one_line(error)}") from None
        return "a local Ray on this machine"
    try:
        with quiet:
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            ray.init(address=spec.address, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as error:
        raise ClusterError(
            f"no Ray cluster answers at {spec.address!r}: {messages.one_line(error)} "
            "(start one with `ray start --head`, or use cluster='local')"
        ) from None
    return f"the Ray cluster at {spec.address}"


def _address() -> str:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # an older Ray without it
        return "this session's Ray"


def find_places(spec: Cluster) -> list[Place]:
    """The chip kinds to time on, each probed where its configs will run.

    Raises:
        ClusterError: For a chip kind the cluster does not have, a worker that does
            not answer in time, or one whose versions differ from this notebook's.
    """
    resources = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    offered = sorted(k[len(CHIP_RESOURCE_PREFIX) :] for k in resources if _is_chip(k))
    wanted = list(spec.chips) or offered or [_generic(resources)]
    options = [_options(label, resources, nodes, offered) for label in wanted]
    probes = [tasks.probe_task.options(**o).remote() for o, _ in options]
    ready, _ = ray.wait(probes, num_returns=len(probes), timeout=spec.connect_timeout_s)
    places = []
    mine = work.versions()
    for label, (task_options, slots), probe in zip(wanted, options, probes, strict=True):
        if probe not in ready:
            ray.cancel(probe, force=True)
            raise ClusterError(
                f"no worker for chip kind {label!r} answered within "
                f"{spec.connect_timeout_s:.0f} s (is its host busy or gone?)"
            )
        try:
            info: work.WorkerInfo = ray.get(probe)
        except Exception as error:
            raise ClusterError(
                f"the worker for chip kind {label!r} failed to start: {messages.one_line(error)} "
                "(is pallaslab installed there, in the same versions?)"
            ) from None
        differ = {k: (v, mine.get(k)) for k, v in info.versions.items() if v != mine.get(k)}
        if differ:
            what = ", ".join(f"{k} {v[0]} there, {v[1]} here" for k, v in differ.items())
            raise ClusterError(
                f"the workers for chip kind {label!r} run other versions ({what}): a program "
                "exported here would not load there; install the same on every host"
            )
        places.append(Place(label, task_options, slots, info, _chip_of(label, info)))
    return places


def _is_chip(resource: str) -> bool:
    return resource.startswith(CHIP_RESOURCE_PREFIX) and len(resource) > len(CHIP_RESOURCE_PREFIX)


def _generic(resources: dict[str, float]) -> str:
    if resources.get("GPU"):
        return "gpu"
    if resources.get("TPU"):
        return "tpu"
    return "cpu"


def _options(
    label: str, resources: dict[str, float], nodes: list[dict[str, Any]], offered: list[str]
) -> tuple[dict[str, Any], int]:
    """Ray options landing a task on a worker of chip kind `label`, and how many fit.

    A task timing on an accelerator holds it and no CPU (its CPU waits on the device):
    compile tasks, which hold a CPU each, never keep a GPU waiting. Ray gives a GPU task
    its own GPU (CUDA_VISIBLE_DEVICES) and, by its default for GPU tasks, a fresh worker
    process. A task timing on a CPU (the emulator) holds one CPU.
    """
    lowered = label.lower()
    if lowered == "cpu":
        return {"num_cpus": 1}, max(1, int(resources.get("CPU", 1)))
    if lowered == "gpu":
        _require(resources.get("GPU"), label, offered)
        return {"num_cpus": 0, "num_gpus": 1}, int(resources["GPU"])
    if lowered == "tpu":
        _require(resources.get("TPU"), label, offered)
        # One process owns a TPU host's chips: one timing task per host.
        per_host = max(n.get("Resources", {}).get("TPU", 0) for n in nodes)
        return {"num_cpus": 0, "resources": {"TPU": per_host}}, max(
            1, int(resources["TPU"] // max(per_host, 1))
        )
    name = CHIP_RESOURCE_PREFIX + label
    _require(resources.get(name), label, offered)
    hosts = [n.get("Resources", {}) for n in nodes if n.get("Resources", {}).get(name)]
    task: dict[str, Any] = {"num_cpus": 1, "resources": {name: 1}}
    if hosts and all(h.get("GPU") for h in hosts):
        task.update(num_cpus=0, num_gpus=1)
    return task, int(resources[name])


def _require(amount: float | None, label: str, offered: list[str]) -> None:
    if amount:
        return
    kinds = ", ".join(offered) or "none labelled"
    generic = " or ".join(GENERIC_CHIPS)
    raise ClusterError(
        f"the cluster has no worker for chip kind {label!r} (labelled kinds: {kinds}; "
        f"a worker offers kind X when started with --resources='{{\"{CHIP_RESOURCE_PREFIX}X\": N}}'"
        f"; {generic} take any such worker)"
    )


def _chip_of(label: str, info: work.WorkerInfo) -> str:
    """The hardware table's chip for a place: its device's, else its label's."""
    found = roofline.detect_chip(info.device)
    if found is not None:
        return found.name
    if label.lower() in GENERIC_CHIPS:
        return ""
    try:
        return roofline.chip_named(label).name
    except KeyError:
        return label  # a label of the cluster's own: it still keys the cache apart
