"""A tuning cache file that is valid JSON with damaged entries: ignored and rewritten.

(What the cache is keyed on, and that it never vouches for correctness:
test_tune_cache.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import pallaslab
from pallaslab._src.bench import harness
from pallaslab._src.bench.cache import TuneCache
from pallaslab._src.bench.sweep import is_row_json

FAST = harness.TimerSettings(warmup=1, warmup_s=0.0, min_reps=3, max_reps=5, budget_s=0.1)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path / "cache"))


def build(SCALE):  # noqa: N803 - the tuned name
    return lambda x: x * SCALE


def tune():
    return pallaslab.tune(
        build,
        {"SCALE": [1.0, 2.0, 3.0]},
        jax.ShapeDtypeStruct((64,), jnp.float32),
        ref=lambda x: x * 2.0,
        settings=FAST,
        live=False,
    )


@pytest.mark.parametrize(
    ("entry", "sound"),
    [
        ({"impl": "pallas", "point": "SCALE=1.0"}, True),
        ({"impl": "pallas", "point": "p", "median_ms": None, "correct": True}, True),
        ("not an object", False),
        ({"point": "p"}, False),  # no impl
        ({"impl": "pallas", "point": "p", "median_ms": "fast"}, False),
        ({"impl": "pallas", "point": "p", "reps": 2.5}, False),
        ({"impl": "pallas", "point": "p", "config": [1]}, False),
        ({"impl": "pallas", "point": "p", "correct": "yes"}, False),
        ({"impl": 3, "point": "p"}, False),
    ],
)
def test_which_entries_are_sound(entry, sound):
    assert is_row_json(entry) is sound


def test_damaged_entries_are_ignored_measured_again_and_rewritten():
    first = tune()
    assert not any(r.cached for r in first.rows)
    path = Path(first.cache_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    keys = set(data["configs"])
    # Entries are keyed on what was traced; find them by the config they hold.
    by_config = {
        tuple(sorted(entry.get("config", {}).items())): key
        for key, entry in data["configs"].items()
    }
    one, three = by_config[(("SCALE", 1.0),)], by_config[(("SCALE", 3.0),)]
    # Damage two entries: one is not an object, one has a text for a time.
    data["configs"][one] = "garbage"
    data["configs"][three] = {**data["configs"][three], "median_ms": "fast"}
    path.write_text(json.dumps(data), encoding="utf-8")

    second = tune()  # no error
    cached = {r.config.get("SCALE", r.impl): r.cached for r in second.rows}
    assert cached == {1.0: False, 2.0: True, 3.0: False, "xla": True}
    assert second.best == {"SCALE": 2.0}
    # Rewritten: every entry sound again, and all cached the third time.
    rewritten = json.loads(path.read_text(encoding="utf-8"))["configs"]
    assert set(rewritten) == keys and all(is_row_json(e) for e in rewritten.values())
    assert all(r.cached for r in tune().rows)


def test_a_damaged_file_layout_is_ignored(tmp_path):
    cache = TuneCache({"k": 1}, tmp_path, valid=is_row_json)
    cache.path.parent.mkdir(parents=True)
    for text in ('{"key": {"k": 1}, "configs": [1, 2]}', "[]", '{"key": {"k": 1}}'):
        cache.path.write_text(text)
        assert cache.load() == {}
    cache.path.write_text(
        '{"key": {"k": 1}, "configs": {"a": 1, "b": {"impl": "x", "point": "p"}}}'
    )
    assert cache.load() == {"b": {"impl": "x", "point": "p"}}
