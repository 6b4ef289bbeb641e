"""Time from an interrupt to a usable next cell, in a real IPython kernel.

Goal (issue 20, item 6): under 2 s from SIGINT (Jupyter's stop button) on a
`%%kernel` cell whose kernel loops forever, to the next kernel cell having run.

A kernel process is started with `jupyter_client` (as JupyterLab does), pallaslab is
loaded with a loop budget too large to matter (2e9 iterations), and a cell runs a
kernel whose `while_loop` never ends: emulated, then with `--interpret` (Pallas'
interpreter). Once the cell is well into the loop, the kernel is interrupted and, as
soon as the interrupted cell has replied, a small kernel cell is run. Printed per
mode: the seconds until the interrupted cell replied, and until the next cell had run
(its compile included).

Run: python benchmarks/interrupt.py [--wait SECONDS]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from jupyter_client.manager import start_new_kernel

GOAL_SECONDS = 2.0

SPIN = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def spin_kernel(x_ref, o_ref):
    total = jax.lax.while_loop(
        lambda c: c[0] < 10, lambda c: (c[0], c[1] + 1.0), (jnp.int32(0), jnp.float32(0))
    )[1]
    o_ref[...] = x_ref[...] + total

spin = pl.pallas_call(spin_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
x = jnp.ones((8, 128))
print("body ran", flush=True)
"""

NEXT = """\
double = pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
                        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
"""


def reply_to(client: Any, msg_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        reply = client.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            content: dict[str, Any] = reply["content"]
            return content


def wait_for(client: Any, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        if message["msg_type"] == "stream" and text in message["content"].get("text", ""):
            return
    raise RuntimeError(f"the kernel never printed {text!r}")


def measure(flags: str, wait: float) -> tuple[float, float, str]:
    manager, client = start_new_kernel(
        kernel_name="python3", env={**os.environ, "JAX_PLATFORMS": "cpu"}
    )
    try:
        setup = client.execute(
            "%load_ext pallaslab\nimport pallaslab\n"
            "pallaslab.set_run_budget(loop_iterations=2_000_000_000, seconds=None)"
        )
        reply_to(client, setup)
        spinning = client.execute(f"%%kernel spin(x) {flags}\n{SPIN}")
        wait_for(client, "body ran")
        time.sleep(wait)
        interrupted = time.monotonic()
        manager.interrupt_kernel()
        stopped = reply_to(client, spinning, timeout=60)
        replied = time.monotonic() - interrupted
        following = reply_to(client, client.execute(f"%%kernel double(x)\n{NEXT}"), timeout=120)
        usable = time.monotonic() - interrupted
        status = f"{stopped.get('ename', stopped['status'])} / next cell {following['status']}"
        return replied, usable, status
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait", type=float, default=3.0, help="seconds into the loop")
    wait = parser.parse_args().wait
    print(f"{'mode':<14}{'replied (s)':>13}{'next cell ran (s)':>19}  outcome")
    for label, flags in (("emulated", ""), ("--interpret", "--interpret")):
        replied, usable, status = measure(flags, wait)
        verdict = "met" if usable < GOAL_SECONDS else "NOT met"
        print(f"{label:<14}{replied:>13.2f}{usable:>19.2f}  {status}; goal < 2 s: {verdict}")


if __name__ == "__main__":
    main()
