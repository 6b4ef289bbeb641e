"""A real Ray cluster on loopback for the cluster tests: a head and small worker nodes.

Started by the tests themselves with `ray.cluster_utils.Cluster` (a head process and
raylets as subprocesses of the test; torn down by `shutdown`, nothing else of Ray on
the machine is touched). Each node is small: one CPU, an 80 MiB object store; worker
nodes carry a custom resource "pallaslab-chip-<kind>" standing in for a chip kind,
and their "timing" is pallaslab's emulator on the CPU.

Everything listens on 127.0.0.1: the nodes are started with that address, and Ray is
told it runs on one machine (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, Ray's switch for
single-machine use), else it rewrites a loopback address to the machine's own.

Two things make start-up robust on a loaded 2-core machine:
- Each node's agent ports are given (free loopback ports), so its raylet does not
  wait for port files the agents write once started.
- Ray's helper processes import `jsonschema`, whose optional `rfc3987_syntax` (brought
  by JupyterLab's dependencies) builds a Lark grammar at import: seconds of CPU per
  process, which on a busy machine pushes the dashboard agent past the raylet's fixed
  15 s wait for its listen port (ray-project/ray#65983) and the node dies. The
  cluster's processes get a path where that optional module reports itself absent
  (`jsonschema` then skips the IRI formats, which Ray never checks).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
# Ray's switch for a cluster on one machine only (its default on Windows and macOS).
SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
OBJECT_STORE = 80 * 1024 * 1024  # Ray's minimum is 75 MiB
START_ATTEMPTS = 3


def _free_ports(count: int) -> list[int]:
    sockets = []
    for _ in range(count):
        handle = socket.socket()
        handle.bind((LOOPBACK, 0))
        sockets.append(handle)
    ports = [h.getsockname()[1] for h in sockets]
    for handle in sockets:
        handle.close()
    return ports


def _agent_ports() -> dict[str, int]:
    metrics, export, listen, runtime_env = _free_ports(4)
    return {
        "metrics_agent_port": metrics,
        "metrics_export_port": export,
        "dashboard_agent_listen_port": listen,
        "runtime_env_agent_port": runtime_env,
    }


def quiet_imports_path(folder: Path) -> str:
    """A folder whose `rfc3987_syntax` says it is absent (see the module's docstring)."""
    stub = folder / "rfc3987_syntax"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text(
        'raise ImportError("left out of the test cluster: its grammar takes seconds to build")\n',
        encoding="utf-8",
    )
    return str(folder)


class LocalCluster:
    """A head node (no CPUs: it only coordinates) and worker nodes added on demand."""

    def __init__(self, folder: Path) -> None:
        """Starts the head; `folder` holds the import stub."""
        from ray.cluster_utils import Cluster

        self._folder = folder
        self._cluster = self._retry(
            lambda: Cluster(
                initialize_head=True,
                head_node_args=self._node_args(num_cpus=0, include_dashboard=False),
            )
        )
        self.address: str = self._cluster.address

    def _node_args(self, **extra: Any) -> dict[str, Any]:
        return {
            "node_ip_address": LOOPBACK,
            "object_store_memory": OBJECT_STORE,
            "include_log_monitor": False,
            **_agent_ports(),
            **extra,
        }

    @staticmethod
    def _retry(start: Any) -> Any:
        # A start that still times out on a very busy machine is tried again (with
        # fresh ports); the test then runs, or fails with Ray's own message.
        for attempt in range(START_ATTEMPTS):
            try:
                return start()
            except Exception:
                if attempt == START_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def add_worker(self, chip: str | None, num_cpus: int = 1, num_gpus: int = 0) -> Any:
        """A worker node with `num_cpus` CPUs, `num_gpus` GPUs and chip kind `chip` if given."""
        resources = {f"pallaslab-chip-{chip}": 1} if chip else {}
        return self._retry(
            lambda: self._cluster.add_node(
                wait=True,
                **self._node_args(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources),
            )
        )

    def kill(self, node: Any) -> None:
        """Kills a worker node at once (its raylet and workers): a host lost mid-sweep."""
        self._cluster.remove_node(node, allow_graceful=False)

    def node_of(self, node_id_prefix: str) -> Any:
        """The worker node whose id starts with `node_id_prefix`."""
        for node in self._cluster.worker_nodes:
            if node.node_id.startswith(node_id_prefix):
                return node
        raise KeyError(node_id_prefix)

    def shutdown(self) -> None:
        """Stops every node this cluster started."""
        self._cluster.shutdown()


@contextlib.contextmanager
def cluster_environment(folder: Path) -> Iterator[None]:
    """The environment the cluster's processes inherit (see the module's docstring)."""
    saved = os.environ.get("PYTHONPATH")
    stub = quiet_imports_path(folder / "imports")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (stub, saved) if p)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    single = os.environ.get(SINGLE_MACHINE)
    os.environ[SINGLE_MACHINE] = "0"
    import ray._private.ray_constants as constants

    was = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False  # this process may have imported Ray already
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = was
        if single is None:
            os.environ.pop(SINGLE_MACHINE, None)
        else:
            os.environ[SINGLE_MACHINE] = single
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def wait_until(condition: Any, timeout: float = 120.0, what: str = "") -> None:
    """Polls `condition` (a callable) until it holds; fails naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def crash_elsewhere(value: int, pid: int) -> Any:
    """Rebuilds a `CrashesElsewhere` here; in any other process, crashes it (a segfault)."""
    if os.getpid() != pid:
        import ctypes

        ctypes.string_at(0)  # reads address 0: SIGSEGV, as a crashing compiler would
    return CrashesElsewhere(value)


class CrashesElsewhere(int):
    """A config value (an int) that kills whichever other process unpickles it."""

    def __reduce__(self) -> tuple[Any, tuple[int, int]]:
        return (crash_elsewhere, (int(self), os.getpid()))
