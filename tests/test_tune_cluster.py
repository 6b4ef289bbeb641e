"""Tuning on a real Ray cluster, started here on loopback: a head and worker nodes.

Worker nodes carry the resources "pallaslab-chip-H100" and "pallaslab-chip-B200",
standing in for two chip kinds; pallaslab's emulator does their "timing" on the CPU
(`tests/raycluster.py`). Oracles: the reference (a kernel that scales by a known
factor, against `factor * x`, computed by hand), the cluster's own node ids (which
node has which chip), the cache files on disk, and Ray's word that a task was
cancelled (`TaskCancelledError`).
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.bench import harness
from pallaslab._src.bench.cluster import tasks, tuning
from pallaslab._src.bench.cluster.spec import Cluster, ClusterError

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'pallaslab[cluster]'")
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from tests.raycluster import CrashesElsewhere, LocalCluster, cluster_environment  # noqa: E402

# Ray starts its nodes as subprocesses (fork + exec) of this JAX process: harmless.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")

N = 1024
# Quick timings: these tests are about where configs run and what comes back.
FAST = harness.TimerSettings(warmup=1, warmup_s=0.0, min_reps=2, max_reps=3, budget_s=0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head and two one-CPU worker nodes: chip kinds H100 and B200."""
    folder = tmp_path_factory.mktemp("ray")
    with cluster_environment(folder):
        started = LocalCluster(folder)
        try:
            started.h100 = started.add_worker("H100")
            started.b200 = started.add_worker("B200")
            ray.init(address=started.address, log_to_driver=False)
            yield started
        finally:
            ray.shutdown()
            started.shutdown()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PALLASLAB_SHARED_CACHE_DIR", raising=False)


def make_scale(BLOCK, SCALE=2.0):  # noqa: N803 - tuned names are the kernel's
    def scale_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * SCALE

    return pl.pallas_call(
        scale_kernel,
        out_shape=jax.ShapeDtypeStruct((N,), jnp.float32),
        grid=(N // int(BLOCK),),
        in_specs=[pl.BlockSpec((int(BLOCK),), lambda i: (i,))],
        out_specs=pl.BlockSpec((int(BLOCK),), lambda i: (i,)),
    )


def tune(space, cluster_spec, *, settings=FAST, live=False, build=make_scale, **kwargs):
    x = jnp.arange(N, dtype=jnp.float32)
    return pallaslab.tune(
        build,
        space,
        x,
        ref=lambda x: 2 * x,
        live=live,
        settings=settings,
        cluster=cluster_spec,
        **kwargs,
    )


def pallas_rows(result, chip=None):
    return [r for r in result.rows if r.impl == "pallas" and (chip is None or r.chip == chip)]


def node_of(row) -> str:
    # Worker names read "node <first 6 hex of the node id> · pid <pid>".
    return row.worker.split()[1]


def test_a_sweep_runs_on_both_chip_kinds_and_results_merge(cluster):
    result = tune({"BLOCK": [128, 256], "SCALE": [2.0, 3.0]}, Cluster(cluster.address))
    assert result.state == "finished"
    assert result.chips == ("B200", "H100")  # every labelled kind the cluster offers
    for chip, node in (("H100", cluster.h100), ("B200", cluster.b200)):
        rows = pallas_rows(result, chip)
        assert sorted((r.config["BLOCK"], r.config["SCALE"]) for r in rows) == [
            (128, 2.0),
            (128, 3.0),
            (256, 2.0),
            (256, 3.0),
        ]
        # Each chip kind's configs ran on the one node that has it.
        assert {node_of(r) for r in rows} == {node.node_id[:6]}
        # Checked on the worker against 2 * x: SCALE=3 is wrong in every block.
        right = {r.config["SCALE"]: (r.status, r.correct) for r in rows}
        assert right == {2.0: ("ok", True), 3.0: ("wrong", False)}
        wrong = next(r for r in rows if r.config == {"BLOCK": 128, "SCALE": 3.0})
        assert wrong.error.startswith(f"{N - 1} element(s) differ")  # x = 0 still matches
        assert "output" in wrong.error  # located on the kernel's blocks, as locally
        assert all(r.median_ms > 0 and r.mode == "emulated" for r in rows if r.status == "ok")
    baselines = [r for r in result.rows if r.impl == "xla"]
    assert sorted(r.chip for r in baselines) == ["B200", "H100"]
    assert all(r.status == "ok" for r in baselines)
    assert sorted(result.best_by_chip) == ["B200", "H100"]
    assert {c["SCALE"] for c in result.best_by_chip.values()} == {2.0}
    assert result.best == result.best_by_chip["B200"]
    table = result.table
    assert {"chip", "worker"} <= set(table.columns)
    assert "retries" not in table.columns  # nothing was retried


def test_the_cache_is_keyed_per_chip_and_reused_only_for_that_chip(cluster, tmp_path):
    shared = tmp_path / "shared"
    both = Cluster(cluster.address, shared_cache=str(shared))
    first = tune({"BLOCK": [128, 256]}, both)
    assert not any(r.cached for r in first.rows)
    files = [
        json.loads(p.read_text()) for p in sorted((tmp_path / "cache" / "tune").glob("*.json"))
    ]
    assert sorted(f["key"]["chip"] for f in files) == ["B200", "H100"]
    assert all(f["key"]["device"] == "cpu" and len(f["configs"]) == 3 for f in files)
    assert sorted(p.name for p in (shared / "tune").glob("*.json")) == sorted(
        p.name for p in (tmp_path / "cache" / "tune").glob("*.json")
    )

    # The same chip kind again: every timing from the cache, still checked on a worker.
    again = tune({"BLOCK": [128, 256]}, Cluster(cluster.address, chips=("H100",)))
    assert again.chips == ("H100",)
    assert all(r.cached and r.chip == "H100" for r in again.rows)
    assert [(r.status, r.correct) for r in pallas_rows(again)] == [("ok", True)] * 2
    cached = {r.config["BLOCK"]: r.median_ms for r in pallas_rows(again)}
    measured = {r.config["BLOCK"]: r.median_ms for r in pallas_rows(first, "H100")}
    assert cached == measured

    # This notebook (a CPU, no chip) never trusts the stand-ins' timings ...
    here = tune({"BLOCK": [128, 256]}, None)
    assert not any(r.cached for r in here.rows)
    # ... and a fresh notebook whose cache is empty reads the shared directory.
    fresh = Cluster(cluster.address, chips=("B200",), shared_cache=str(shared))
    (tmp_path / "cache").rename(tmp_path / "old-cache")
    from_shared = tune({"BLOCK": [128, 256]}, fresh)
    assert all(r.cached for r in from_shared.rows)


def test_a_plain_cpu_workers_timings_serve_a_cpu_notebook(cluster):
    on_cpus = tune({"BLOCK": [128, 256]}, Cluster(cluster.address, chips=("cpu",)))
    assert on_cpus.chips == ("cpu",)
    assert [r.status for r in on_cpus.rows] == ["ok"] * 3
    local = tune({"BLOCK": [128, 256]}, None)  # the same device, no label: the same key
    assert all(r.cached for r in local.rows)
    timings = {r.config["BLOCK"]: r.median_ms for r in pallas_rows(on_cpus)}
    assert {r.config["BLOCK"]: r.median_ms for r in pallas_rows(local)} == timings


def test_a_reference_given_as_values_is_sent_once_and_checked_on_the_worker(cluster):
    x = jnp.arange(N, dtype=jnp.float32)
    expected = np.asarray(3 * x)  # not a callable: no baseline, values compared
    result = pallaslab.tune(
        make_scale, {"BLOCK": [256], "SCALE": [2.0, 3.0]}, x, ref=expected, live=False,
        settings=FAST, cluster=Cluster(cluster.address, chips=("cpu",)),
    )  # fmt: skip
    verdicts = {r.config["SCALE"]: (r.status, r.correct) for r in result.rows}
    assert verdicts == {2.0: ("wrong", False), 3.0: ("ok", True)}
    assert [r.impl for r in result.rows] == ["pallas", "pallas"]


def test_a_worker_lost_mid_sweep_is_survived_and_its_configs_retried(cluster):
    third = cluster.add_worker("H100")  # two H100 nodes: one will be lost
    doomed = third.node_id[:6]
    killed = []
    # Its worker process started (JAX imported) before the sweep, so it takes configs.
    on_third = NodeAffinitySchedulingStrategy(third.node_id, soft=False)
    warm = tasks.probe_task.options(scheduling_strategy=on_third, num_cpus=1).remote()
    assert ray.get(warm, timeout=300).node == third.node_id

    class KillOnStart:
        """Kills the third node as soon as it has started a config."""

        def begin(self, plan):
            pass

        def update(self, row, done):
            pass

        def end(self, state, message):
            pass

        def workers(self, states, compiled):
            busy = [s for s in states if s["running"] and doomed in s["worker"]]
            if busy and not killed:
                killed.append(busy[0]["running"])
                cluster.kill(third)

    # Each timing takes a second or more, so the kill lands while one runs.
    slow = dataclasses.replace(FAST, warmup_s=1.0)
    blocks = [8, 16, 32, 64, 128, 256]
    result = tune({"BLOCK": blocks}, Cluster(cluster.address, chips=("H100",)), settings=slow,
                  live=KillOnStart())  # fmt: skip
    assert killed, "the third node never started a config"
    assert result.state == "finished"
    rows = pallas_rows(result)
    assert sorted(r.config["BLOCK"] for r in rows) == blocks  # every config measured
    assert all(r.status == "ok" and r.correct for r in rows)
    retried = {r.point: r for r in rows if r.retries}
    assert killed[0] in retried  # the config the lost node was running
    assert "its node was lost" in retried[killed[0]].retry_reason
    assert doomed not in {node_of(r) for r in rows if r.point == killed[0]}
    assert "retries" in result.table.columns


def test_a_config_that_crashes_its_worker_is_that_configs_failure(cluster):
    result = tune({"BLOCK": [128, CrashesElsewhere(256), 512]},
                  Cluster(cluster.address, chips=("B200",), retries=1))  # fmt: skip
    assert result.state == "finished"
    by_block = {int(r.config["BLOCK"]): r for r in pallas_rows(result)}
    crashed = by_block[256]
    assert crashed.status == "failed: crashed its worker"
    assert "died on this config on 2 attempts" in crashed.error
    assert crashed.retries == 1
    assert [(by_block[b].status, by_block[b].correct) for b in (128, 512)] == [("ok", True)] * 2
    assert int(result.best["BLOCK"]) != 256


def test_an_interrupt_cancels_outstanding_tasks_and_keeps_finished_points(cluster):
    class StopAfterFirst:
        def begin(self, plan):
            pass

        def update(self, row, done):
            raise KeyboardInterrupt  # the stop button, as the first row arrives

        def end(self, state, message):
            self.ended = (state, message)

    observer = StopAfterFirst()
    slow = dataclasses.replace(FAST, warmup_s=0.5)
    blocks = [8, 16, 32, 64, 128, 256, 512, 1024]
    result = tune({"BLOCK": blocks}, Cluster(cluster.address, chips=("H100",)), settings=slow,
                  live=observer)  # fmt: skip
    assert result.state == "interrupted"
    assert len(result.rows) == 1 and result.rows[0].status == "ok"
    assert observer.ended == ("interrupted", "kept the 1 result(s) so far")
    stats = tuning.last_stats
    cancelled = stats.cancelled
    assert len(cancelled) == stats.submitted - 1 >= 1  # every task sent and not finished
    # Each stream ends cancelled (after "started", if it had), except one that finished
    # while the cancel was on its way: Ray cannot take back a task that already ended.
    ended_cancelled = 0
    for task in cancelled:
        try:
            drain(task)
        except ray.exceptions.TaskCancelledError:
            ended_cancelled += 1
    assert ended_cancelled >= max(1, len(cancelled) - 1), (ended_cancelled, len(cancelled))
    assert any("cancelled on the cluster" in n for n in result.notices)


def drain(stream):
    """Every event of a task's stream (raising what its end raises)."""
    return [ray.get(event, timeout=120) for event in stream]


def test_a_chip_kind_the_cluster_lacks_is_one_message(cluster):
    with pytest.raises(ClusterError, match=r"no worker for chip kind 'A100'.*B200, H100"):
        tune({"BLOCK": [128]}, Cluster(cluster.address, chips=("A100",)))


MAGIC_CELL = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
BLOCK = 128

def run(x):
    return pl.pallas_call(
        scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)),
    )(x)

x = jnp.arange(512, dtype=jnp.float32)
"""


def test_the_magic_tunes_a_cell_on_the_cluster(cluster, ip):
    from IPython.utils.capture import capture_output

    # The kernel comes from an earlier cell: the traced call carries it, not the notebook.
    assert ip.run_cell("def scale_kernel(x_ref, o_ref):\n    o_ref[...] = x_ref[...] * 2").success
    line = f'run(x) --ref "lambda x: 2 * x" --tune BLOCK=64,128 --cluster {cluster.address}'
    with capture_output():
        result = ip.run_cell(f"%%kernel {line}\n{MAGIC_CELL}")
    assert result.success, result.error_in_exec
    tuned = ip.user_ns["_tune"]
    assert tuned.chips == ("B200", "H100") and tuned.state == "finished"
    rows = pallas_rows(tuned)
    assert sorted((r.chip, r.config["BLOCK"]) for r in rows) == [
        ("B200", 64),
        ("B200", 128),
        ("H100", 64),
        ("H100", 128),
    ]
    assert all(r.status == "ok" and r.correct for r in rows)
    assert ip.user_ns["BLOCK"] == 128  # the user's names are never changed
