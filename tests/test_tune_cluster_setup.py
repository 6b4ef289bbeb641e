"""Before a cluster: `cluster=` read and refused with one message; what is sent runs alone.

No Ray cluster here (tests/test_tune_cluster.py starts one). Oracles: the messages
name what to do; a program exported here runs in a fresh Python process that holds
nothing of this one (no notebook, no closures) and gives the hand-computed result.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.bench.cluster.spec import EXTRA_HINT, Cluster, ClusterError, cluster_spec
from pallaslab._src.core import shipping


def test_a_cluster_is_an_address_local_or_a_spec():
    assert cluster_spec(None) is None
    assert cluster_spec("") is None
    assert cluster_spec("none") is None
    assert cluster_spec("local") == Cluster("local")
    assert cluster_spec(" head:6379 ") == Cluster("head:6379")
    spec = Cluster("ray://head:10001", chips="H100, B200", compile=None)
    assert spec.chips == ("H100", "B200") and cluster_spec(spec) is spec
    with pytest.raises(TypeError, match="cluster= takes a Ray address"):
        cluster_spec(6379)
    with pytest.raises(ValueError, match="retries must be 0 or more"):
        Cluster(retries=-1)


@pytest.fixture
def no_ray(monkeypatch):
    """Ray looks uninstalled (as without the `cluster` extra)."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "ray" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_without_ray_cluster_is_one_message_naming_the_extra(no_ray):
    x = jnp.ones((256,), jnp.float32)
    with pytest.raises(ClusterError) as raised:
        pallaslab.tune(make_scale, {"BLOCK": [128]}, x, cluster="local")
    assert EXTRA_HINT in str(raised.value) and "Ray" in str(raised.value)
    # Tuning here needs nothing of Ray.
    assert pallaslab.tune(make_scale, {"BLOCK": [128]}, x, live=False).state == "finished"


CELL = """
BLOCK = 128
def run(x):
    return make_scale(BLOCK)(x)
x = jnp.ones((256,), jnp.float32)
"""


def test_the_magic_says_so_before_the_cell_runs(ip, no_ray):
    ip.user_ns.update(make_scale=make_scale, jnp=jnp)
    with capture_output():
        result = ip.run_cell(f"%%kernel run(x) --tune BLOCK=64,128 --cluster local\n{CELL}")
    error = result.error_in_exec
    assert isinstance(error, UsageError)
    assert str(error).startswith("Cell line 1: --cluster: tuning on a cluster needs Ray")
    assert EXTRA_HINT in str(error)
    assert "run" not in ip.user_ns  # refused before the cell ran


def test_cluster_without_tune_is_a_mistake_on_the_magic_line(ip):
    with capture_output():
        result = ip.run_cell("%%kernel run(x) --cluster local\nx = 1")
    assert isinstance(result.error_in_exec, UsageError)
    assert "--cluster runs a tuning sweep" in str(result.error_in_exec)


def test_the_setting_is_a_default_cluster(ip, tmp_path, monkeypatch, no_ray):
    settings = tmp_path / "settings" / "pallaslab"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"tuningCluster": "local"}))
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "settings"))
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path / "lab"))
    assert pallaslab.settings().tuning_cluster == "local"
    ip.user_ns.update(make_scale=make_scale, jnp=jnp)
    with capture_output():
        result = ip.run_cell(f"%%kernel run(x) --tune BLOCK=64,128\n{CELL}")
    assert "--cluster: tuning on a cluster needs Ray" in str(result.error_in_exec)
    with capture_output():  # --cluster none: here, whatever the setting says
        result = ip.run_cell(f"%%kernel run(x) --tune BLOCK=64,128 --cluster none\n{CELL}")
    assert result.success, result.error_in_exec
    assert ip.user_ns["_tune"].chips == () and ip.user_ns["_tune"].state == "finished"


def make_scale(BLOCK, n=256, factor=3.0):  # noqa: N803
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * factor

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
        grid=(n // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)),
    )


def test_what_is_sent_runs_in_a_process_that_has_nothing_of_this_one(tmp_path):
    # A higher-order kernel over a closure and a static argument: all of it resolved by
    # tracing here; the other process gets the exported program and the array inputs.
    table = np.arange(4, dtype=np.float32)

    def outer(x, offset):
        return make_scale(64, factor=float(table[2]))(x) + offset

    x = jnp.arange(256, dtype=jnp.float32)
    shipped = shipping.export_call(outer, (x, 1.0), {}, "cpu")
    assert shipped.platform == "cpu" and shipped.kernels == 1
    assert shipped.mode == "emulated"  # as a local run on this CPU runs it
    inputs = shipping.array_inputs((x, 1.0), {})
    assert len(inputs) == 1  # the offset is fixed into the program
    payload = tmp_path / "shipped.pkl"
    payload.write_bytes(pickle.dumps((shipped, inputs)))
    script = textwrap.dedent(
        f"""
        import pickle, sys
        import numpy as np
        from pallaslab._src.core import shipping
        shipped, inputs = pickle.loads(open({str(payload)!r}, "rb").read())
        out = np.asarray(shipping.load(shipped)(*inputs))
        np.save({str(tmp_path / "out.npy")!r}, out)
        print(sorted(m for m in sys.modules if m.startswith("tests")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"  # nothing of this test module
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.arange(256) * 2.0 + 1.0)


def test_a_program_that_cannot_be_exported_says_why():
    x = jnp.ones((256,), jnp.float32)
    with pytest.raises(ValueError, match="cannot export for platform 'rocm'"):
        shipping.export_call(make_scale(128), (x,), {}, "rocm")
    with pytest.raises(ValueError, match="not a compile target"):
        shipping.compile_platform("ptx:sm_90")


def test_a_config_compiles_for_a_gpu_it_does_not_have():
    from pallaslab._src.core import gpu_toolchain

    if gpu_toolchain.problem():
        pytest.skip(gpu_toolchain.problem())
    x = jnp.ones((1024,), jnp.float32)
    platform, chip = shipping.compile_platform("xla-gpu:H100")
    shipped = shipping.export_call(make_scale(128, 1024), (x,), {}, platform, chip)
    assert (shipped.platform, shipped.chip) == ("cuda", "H100")
    check = shipping.compile_check(shipped, "xla-gpu:H100")
    assert (check.error, check.unavailable) == ("", False)
    assert check.seconds > 0
