"""How a tuning run measures and caches, beside what it tunes: `TuneOptions`."""

from __future__ import annotations

import dataclasses
from typing import Any

from pallaslab._src.bench import harness
from pallaslab._src.bench.live import Observer


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How a tuning run measures and caches, beside what it tunes.

    `cache`, `retune`, `live`, `settings`, `chip`, `seed` and `cluster` are `tune`'s
    arguments of those names; two more serve the magic's `--tune`:

    Attributes:
        cache_dir: Where cache files live (default: `base.paths.cache_dir()`).
        cache_key: What the cache's key adds (e.g. a forced interpret mode).
        cluster: A Ray cluster to tune on (`tune`'s `cluster=`): None, an address,
            "local", or a `Cluster`.
    """

    cache: bool = True
    retune: bool = False
    live: bool | Observer | None = None
    settings: harness.TimerSettings | None = None
    chip: str | None = None
    seed: int = 0
    cache_dir: Any = None
    cache_key: dict[str, Any] | None = None
    cluster: Any = None
