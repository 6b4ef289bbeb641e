"""Which cluster a sweep runs on, and on which chips: `Cluster`, as `tune(cluster=...)` takes.

No Ray here: a spec is read and checked before anything of Ray is imported, so a
notebook without the `cluster` extra gets one message naming it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

#: A worker offering chip kind X declares the custom Ray resource "pallaslab-chip-X".
CHIP_RESOURCE_PREFIX = "pallaslab-chip-"
#: Chip kinds that are no label: any GPU, any TPU, a plain CPU worker (the emulator).
GENERIC_CHIPS = ("gpu", "tpu", "cpu")
#: What to install for `cluster=`.
EXTRA_HINT = "pip install 'pallaslab[cluster]'"


class ClusterError(Exception):
    """A cluster sweep cannot start: no Ray, no cluster there, no such chip kind."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A Ray cluster to tune on, and how.

    Attributes:
        address: A Ray address ("10.0.0.1:6379", "ray://head:10001", "auto") or
            "local": a Ray started on this machine (its CPUs compile, its GPU times).
        chips: The chip kinds to time each config on: labels of workers started with
            the resource "pallaslab-chip-<label>" ("H100", "B200"), or "gpu", "tpu",
            "cpu" for any such worker. Empty: every labelled kind the cluster offers,
            else its GPUs, else its TPUs, else its CPUs.
        compile: The target each config is compiled for on CPU workers before a chip
            times it ("xla-gpu:H100", "tpu-compile:v5e"); "auto": the chip's own
            (`xla-gpu:<chip>` for GPU kinds, `tpu-compile:<chip>` for TPU kinds,
            none for CPUs); None: no compile stage.
        shared_cache: A cache directory every host and notebook mounts ("": the
            `PALLASLAB_SHARED_CACHE_DIR` environment variable, if set).
        retries: How often a config is tried again after its worker was lost
            (a config that crashes its worker that often is that config's failure).
        connect_timeout_s: How long to wait for the cluster and its workers.
    """

    address: str = "local"
    chips: tuple[str, ...] = ()
    compile: str | None = "auto"
    shared_cache: str = ""
    retries: int = 2
    connect_timeout_s: float = 180.0

    def __post_init__(self) -> None:
        if not isinstance(self.address, str) or not self.address.strip():
            raise ValueError("cluster address must be 'local' or a Ray address such as 'head:6379'")
        chips: Any = self.chips
        if isinstance(chips, str):  # "H100,B200", as a setting or the magic line gives it
            chips = chips.split(",")
        object.__setattr__(self, "chips", tuple(str(c).strip() for c in chips if str(c).strip()))
        if self.retries < 0:
            raise ValueError("retries must be 0 or more")

    @property
    def local(self) -> bool:
        """Whether this is a Ray started on this machine."""
        return self.address.strip().lower() == "local"


def cluster_spec(value: str | Cluster | None) -> Cluster | None:
    """The cluster a `cluster=` argument (or the setting) names; None: tune here.

    Raises:
        TypeError: For a value that is neither text nor a `Cluster`.
        ClusterError: When Ray is not installed.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or text.lower() == "none":
            return None
        value = Cluster(text)
    if not isinstance(value, Cluster):
        raise TypeError(
            f"cluster= takes a Ray address, 'local' or pallaslab.Cluster(...), "
            f"not {type(value).__name__}"
        )
    require_ray()
    return value


def require_ray() -> None:
    """Says, in one message naming the extra, that Ray is missing.

    Raises:
        ClusterError: When Ray cannot be imported.
    """
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or hidden install
        found = False
    if not found:
        raise ClusterError(
            f"tuning on a cluster needs Ray, which is not installed here: {EXTRA_HINT} "
            "(on this machine and on every host of the cluster)"
        )
