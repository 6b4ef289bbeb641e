"""Compiled programs, cached by what they are, so re-running an unchanged cell is instant.

JAX caches compiled programs per Python callable; a notebook cell run again defines
its functions anew, so JAX traces, lowers and compiles it all again (most of the
wait, on CPU, is XLA's compile). pallaslab's runs, checks, sweeps and tuning configs
compile through this module instead, which keys each program on its content:

- a program pallaslab traces (`compile_function`): the traced jaxpr with every
  parameter (kernel bodies, index maps, compiler params), closed-over constants by
  content, each argument's type and placement, and the jit options (compiler
  options) — see `jax_adapter.fingerprint`;
- a program pallaslab builds itself, e.g. the emulator's leak and race re-runs
  (`compile_keyed`): what it is built from (the kernel's parameters, the emulator's
  plan, the orders and fills requested), so it is not even traced on a hit;
- both: what changes how the same jaxpr lowers and compiles — JAX's trace context
  (x64, matmul precision, interpret mode, pallaslab's emulation request), whether
  pallaslab's CPU rule emulates or interprets kernels, the backend and its device.

Two different kernels never share an entry; a kernel redefined identically (same
code, same values) finds its entry, wherever and whenever it was defined.

The cache lives in memory, least recently used first out, bounded by a count of
programs (64) and by bytes (512 MiB): the constants each program holds plus its
generated code where the backend reports it (GPU, TPU; XLA:CPU does not, so on a CPU
the count bounds the code). `set_compile_cache_limits` changes both; `max_entries=0` turns it off.
For whole sessions across processes, `use_persistent_cache` turns on JAX's
persistent compilation cache (on disk, keyed on the lowered program).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from pallaslab._src.base import paths
from pallaslab._src.core import jax_adapter

DEFAULT_MAX_ENTRIES = 64
DEFAULT_MAX_BYTES = 512 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class CompileCacheInfo:
    """The state of pallaslab's compile cache.

    Attributes:
        entries: Compiled programs held.
        bytes: Their estimated bytes (constants held, plus generated code where the
            backend reports it).
        max_entries: The bound on `entries` (0: the cache is off).
        max_bytes: The bound on `bytes`.
        hits: Programs found compiled.
        misses: Programs compiled (also those that could not be cached).
        evictions: Programs dropped to stay within the bounds.
        compile_seconds: Time spent lowering and compiling the misses.
        saved_seconds: Compile time the hits did not spend again.
    """

    entries: int
    bytes: int
    max_entries: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int
    compile_seconds: float
    saved_seconds: float

    def __str__(self) -> str:
        return (
            f"{self.entries} compiled program(s), {self.bytes / 2**20:.1f} MiB "
            f"(at most {self.max_entries}, {self.max_bytes / 2**20:.0f} MiB); "
            f"{self.hits} hit(s), {self.misses} compile(s), {self.evictions} eviction(s); "
            f"{self.saved_seconds:.2f} s of compiling saved"
        )


@dataclasses.dataclass
class _Entry:
    compiled: Any
    nbytes: int
    compile_seconds: float


class CompileCache:
    """A bounded LRU map from program keys to compiled programs (thread-safe)."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._entries: collections.OrderedDict[Any, _Entry] = collections.OrderedDict()
        self._bytes = 0  # the entries' nbytes, summed
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._hits = self._misses = self._evictions = 0
        self._compile_seconds = self._saved_seconds = 0.0

    def get_or_compile(self, key: Any, compile_: Callable[[], Any], held_bytes: int = 0) -> Any:
        """The compiled program for `key`; compiles (and keeps) it on a miss.

        Args:
            key: What the program is (hashable); None compiles without caching.
            compile_: Lowers and compiles the program.
            held_bytes: Bytes of constants the compiled program holds.
        """
        if key is not None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    self._hits += 1
                    self._saved_seconds += entry.compile_seconds
                    return entry.compiled
        started = time.perf_counter()
        compiled = compile_()
        seconds = time.perf_counter() - started
        with self._lock:
            self._misses += 1
            self._compile_seconds += seconds
            if key is not None and self.max_entries > 0:
                nbytes = held_bytes + _generated_code_bytes(compiled)
                replaced = self._entries.get(key)
                self._bytes += nbytes - (replaced.nbytes if replaced is not None else 0)
                self._entries[key] = _Entry(compiled, nbytes, seconds)
                self._entries.move_to_end(key)
                self._evict()
        return compiled

    def _evict(self) -> None:
        # Kept as a running total: summing every entry on each insertion made a long
        # session (a test suite's thousands of programs) quadratic.
        while self._entries and (
            len(self._entries) > self.max_entries or self._bytes > self.max_bytes
        ):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.nbytes
            self._evictions += 1

    def set_limits(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        """Changes the bounds (evicting at once what no longer fits)."""
        with self._lock:
            if max_entries is not None:
                self.max_entries = max(0, int(max_entries))
            if max_bytes is not None:
                self.max_bytes = max(0, int(max_bytes))
            self._evict()

    def clear(self) -> None:
        """Drops every compiled program and zeroes the counters."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._hits = self._misses = self._evictions = 0
            self._compile_seconds = self._saved_seconds = 0.0

    def info(self) -> CompileCacheInfo:
        """The cache's state and counters."""
        with self._lock:
            return CompileCacheInfo(
                entries=len(self._entries),
                bytes=sum(e.nbytes for e in self._entries.values()),
                max_entries=self.max_entries,
                max_bytes=self.max_bytes,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                compile_seconds=self._compile_seconds,
                saved_seconds=self._saved_seconds,
            )


_CACHE = CompileCache()


def _generated_code_bytes(compiled: Any) -> int:
    try:
        stats = compiled.memory_analysis()
    except Exception:  # not every backend has it
        return 0
    return int(getattr(stats, "generated_code_size_in_bytes", 0) or 0) + int(
        getattr(stats, "host_generated_code_size_in_bytes", 0) or 0
    )


def _context() -> tuple[Any, ...]:
    """What changes how one jaxpr lowers and compiles, besides the jaxpr."""
    device = jax.devices()[0]
    return (
        jax_adapter.trace_context(),
        jax_adapter.lowering_state(),
        jax.default_backend(),
        (device.platform, device.id, getattr(device, "device_kind", "")),
        jax.__version__,
    )


def compile_function(fn: Callable[..., Any], args: Sequence[Any], **jit_options: Any) -> Any:
    """`jax.jit(fn, **jit_options).trace(*args).lower().compile()`, cached.

    From the cache when the same program was compiled before. Runs within the
    caller's scope (pallaslab's `kernel_scope`, an emulation request ...), which is
    part of the key. Call the result with `*args`.
    """
    return compile_traced(jax.jit(fn, **jit_options).trace(*args), args)


def compile_traced(traced: Any, args: Sequence[Any]) -> Any:
    """`traced.lower().compile()` (a `jax.jit(...).trace(*args)`), cached.

    For callers that need the traced program too (the timing harness finds its
    kernels in it). Lowered within the caller's scope, which is part of the key.
    """
    stats = jax_adapter.KeyStats()
    try:
        key = jax_adapter.traced_key(traced, args, stats)
    except Exception:  # a program the key cannot describe is compiled, not cached
        key = None
    full_key = None if key is None else ("jit", key, _context())
    return _CACHE.get_or_compile(
        full_key, lambda: traced.lower().compile(), held_bytes=stats.const_bytes
    )


def compile_keyed(what: Any, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    """A program pallaslab builds itself, keyed by what it is built from.

    `what` must determine `fn` entirely given the arguments' types (e.g. the
    kernel's parameters, the emulator's plan and requests); `fn` is traced only on
    a miss. Call the result with `*args`.
    """
    leaves, tree = jax.tree_util.tree_flatten(list(args))
    stats = jax_adapter.KeyStats()
    try:
        key: Any = (
            "built",
            jax_adapter.value_key(what, stats),
            tree,
            tuple(_argument_type(leaf) for leaf in leaves),
            _context(),
        )
    except Exception:
        key = None

    def compile_() -> Any:
        traced = jax.jit(fn).trace(*args)
        return traced.lower().compile()

    return _CACHE.get_or_compile(key, compile_, held_bytes=stats.const_bytes)


def _argument_type(leaf: Any) -> tuple[Any, ...]:
    aval = jax.typeof(leaf) if hasattr(jax, "typeof") else jax.api_util.shaped_abstractify(leaf)
    sharding = getattr(leaf, "sharding", None) if isinstance(leaf, jax.Array) else None
    return (aval, type(leaf).__name__, sharding, getattr(leaf, "committed", None))


# ---------------------------------------------------------------------------
# The public face.


def compile_cache_info() -> CompileCacheInfo:
    """The compile cache: programs held, bounds, hits, compiles, time saved.

    Example:
        >>> pallaslab.compile_cache_info()
        1 compiled program(s), 0.0 MiB (at most 64, 512 MiB); 3 hit(s), 1 compile(s) ...
    """
    return _CACHE.info()


def clear_compile_cache() -> None:
    """Forgets every compiled program pallaslab holds (and zeroes the counters)."""
    _CACHE.clear()


def set_compile_cache_limits(
    max_entries: int | None = None, max_bytes: int | None = None
) -> CompileCacheInfo:
    """Bounds pallaslab's compile cache (LRU); `max_entries=0` turns it off.

    Args:
        max_entries: Compiled programs kept at most (default 64).
        max_bytes: Estimated bytes kept at most (default 512 MiB): the constants
            the programs hold, plus their generated code where the backend reports
            it.
    """
    _CACHE.set_limits(max_entries, max_bytes)
    return _CACHE.info()


# ---------------------------------------------------------------------------
# JAX's persistent compilation cache, for whole sessions.

_persistent: dict[str, Any] = {"dir": None, "previous": None, "by_setting": None}


def use_persistent_cache(path: str | Path | None = None, *, enabled: bool = True) -> Path | None:
    """Turns on JAX's persistent compilation cache: compiled programs saved on disk.

    A new session (a restarted kernel, a script run again) then loads what an
    earlier one compiled instead of compiling it again; the key is the lowered
    program, so it holds for any function. Every program JAX compiles in this
    process is saved, however quickly it compiled (JAX's default saves only those
    over a second). Off by default; the JupyterLab setting "Persistent compile
    cache" turns it on for every kernel cell.

    The directory is trusted: whoever can write to it can make this process run
    their code. Do not point it at a shared directory.

    Args:
        path: The directory (default: `pallaslab`'s cache directory's `xla/`, under
            `$PALLASLAB_CACHE_DIR` or `~/.cache/pallaslab`).
        enabled: False turns it off again (nothing is deleted).

    Returns:
        The directory in use, or None when turned off.
    """
    from jax.experimental.compilation_cache import compilation_cache  # noqa: PLC0415

    if not enabled:
        if _persistent["dir"] is not None:
            jax.config.update("jax_compilation_cache_dir", None)
            previous = _persistent["previous"]
            if previous is not None:
                jax.config.update("jax_persistent_cache_min_compile_time_secs", previous)
            compilation_cache.reset_cache()
            _persistent.update(dir=None, previous=None)
        return None
    directory = _persistent_dir(path)
    directory.mkdir(parents=True, exist_ok=True)
    if _persistent["dir"] == str(directory):
        return directory
    if _persistent["previous"] is None:
        _persistent["previous"] = jax.config.jax_persistent_cache_min_compile_time_secs  # type: ignore[attr-defined]
    compilation_cache.set_cache_dir(str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    compilation_cache.reset_cache()  # JAX opens its cache once: open the new one
    _persistent["dir"] = str(directory)
    return directory


def _persistent_dir(path: str | Path | None) -> Path:
    return Path(path).expanduser() if path else paths.cache_dir() / "xla"


def persistent_cache_dir() -> Path | None:
    """The persistent cache's directory when pallaslab turned it on, else None."""
    current = _persistent["dir"]
    return Path(current) if current else None


def follow_setting(enabled: bool, path: str = "") -> str | None:
    """Applies the "Persistent compile cache" setting (read before each kernel cell).

    Turns the persistent cache on as the setting asks, and off again only when the
    setting turned it on (not when `use_persistent_cache` was called by hand).
    Never raises: returns what went wrong, in one line, or None.
    """
    try:
        if enabled:
            directory = use_persistent_cache(path or None)
            _persistent["by_setting"] = str(directory)
        elif _persistent.get("by_setting") and _persistent["by_setting"] == _persistent["dir"]:
            use_persistent_cache(enabled=False)
            _persistent["by_setting"] = None
    except OSError as error:
        return (
            f"the persistent compile cache is off: its directory {str(_persistent_dir(path))!r} "
            f"cannot be used ({error.strerror or error})"
        )
    return None
