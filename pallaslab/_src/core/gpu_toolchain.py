"""What XLA's GPU compile without a GPU needs, where it is, and what to install if not.

The `xla-gpu:<chip>` targets run JAX's own CUDA plugin (`jax-cuda12-plugin` and
`jax-cuda12-pjrt`, or the CUDA 13 pair) in compile-only mode. The plugin must be
the installed jaxlib's release exactly. NVIDIA's tools turn what it writes into
SASS and resource figures: `ptxas` and `libdevice` (the nvcc wheel) and `nvdisasm`
(ptxas' report gives the resources); Mosaic GPU kernels that ask the CUDA runtime
for its version while tracing need `libcudart`. All of it comes from pip wheels
(`pallaslab[gpu-compile]`).

Only the standard library here: targets and views ask whether the targets are
available without importing JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pallaslab._src.base import words

EXTRA = "pallaslab[gpu-compile]"


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One family of JAX's CUDA plugin and the NVIDIA wheels that go with it.

    Attributes:
        cuda: The CUDA major version ("12", "13").
        package: The Python package of the plugin ("jax_cuda12_plugin").
        pjrt_module: The PJRT plugin module JAX discovers ("jax_plugins.xla_cuda12").
        distribution: The plugin's pip name.
        pjrt_distribution: The PJRT library's pip name.
        nvcc: The pip name of the wheel with ptxas and libdevice.
        runtime: The pip name of the CUDA runtime wheel.
        nvidia_dirs: Folders under the `nvidia` namespace where that CUDA's wheels
            put `bin/` and `nvvm/`, most specific first.
        cudart: The CUDA runtime library's file name.
    """

    cuda: str
    package: str
    pjrt_module: str
    distribution: str
    pjrt_distribution: str
    nvcc: str
    runtime: str
    nvidia_dirs: tuple[str, ...]
    cudart: str


PLUGINS = (
    Plugin(
        "12",
        "jax_cuda12_plugin",
        "jax_plugins.xla_cuda12",
        "jax-cuda12-plugin",
        "jax-cuda12-pjrt",
        "nvidia-cuda-nvcc-cu12",
        "nvidia-cuda-runtime-cu12",
        ("cuda_nvcc", "cuda_runtime"),
        "libcudart.so.12",
    ),
    Plugin(
        "13",
        "jax_cuda13_plugin",
        "jax_plugins.xla_cuda13",
        "jax-cuda13-plugin",
        "jax-cuda13-pjrt",
        "nvidia-cuda-nvcc",
        "nvidia-cuda-runtime",
        ("cu13",),
        "libcudart.so.13",
    ),
)
# The family the extra installs, and what a message suggests when none is there.
DEFAULT_PLUGIN = PLUGINS[0]
# NVIDIA's own wheel of the disassembler (a CUDA 13 build, which reads cubins of
# every architecture pallaslab targets).
NVDISASM_WHEEL = "nvidia-cuda-nvdisasm"


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """What this machine has for XLA's GPU compile.

    Attributes:
        plugin: The CUDA plugin family installed (None: none is).
        plugin_version: The plugin's version ("" when absent).
        pjrt_version: The PJRT library's version ("" when absent).
        jaxlib_version: The installed jaxlib's version.
        ptxas: Path of ptxas ("" when not found); also `nvdisasm`.
        libdevice: Path of libdevice.10.bc ("" when not found).
        cudart: Path of the CUDA runtime library ("" when not found).
        problem: What is missing and how to install it, in one message (None: nothing).
    """

    plugin: Plugin | None
    plugin_version: str
    pjrt_version: str
    jaxlib_version: str
    ptxas: str
    nvdisasm: str
    libdevice: str
    cudart: str
    problem: str | None

    @property
    def ok(self) -> bool:
        """Whether XLA's GPU compile can run here."""
        return self.problem is None


def toolchain() -> Toolchain:
    """What this machine has: looked up afresh (a few file checks), versions cached."""
    key = tuple(_spec_origin(name) for p in PLUGINS for name in (p.package, p.pjrt_module))
    found = [p for k, p in enumerate(PLUGINS) if key[2 * k] and key[2 * k + 1]]
    plugin = found[0] if found else None
    family = plugin or DEFAULT_PLUGIN
    jaxlib, plugin_version, pjrt_version = _versions(plugin, key)
    tools = find_tools(family)
    return Toolchain(
        plugin,
        plugin_version,
        pjrt_version,
        jaxlib,
        *tools,
        _problem(
            plugin,
            family,
            jaxlib=jaxlib,
            plugin_version=plugin_version,
            pjrt_version=pjrt_version,
            tools=tools,
        ),
    )


def problem() -> str | None:
    """None when XLA's GPU compile can run here, else one message naming what to install."""
    return toolchain().problem


def _spec_origin(name: str) -> str:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return ""
    if spec is None:
        return ""
    return str(spec.origin or next(iter(spec.submodule_search_locations or []), "") or name)


@functools.lru_cache(maxsize=8)
def _versions(plugin: Plugin | None, key: tuple[str, ...]) -> tuple[str, str, str]:
    """(jaxlib, plugin, pjrt) versions; `key` (where the modules are) keys the cache."""
    del key
    if plugin is None:
        return _version("jaxlib"), "", ""
    return (
        _version("jaxlib"),
        _version(plugin.distribution),
        _version(plugin.pjrt_distribution),
    )


def _problem(
    plugin: Plugin | None,
    family: Plugin,
    *,
    jaxlib: str,
    plugin_version: str,
    pjrt_version: str,
    tools: tuple[str, str, str, str],
) -> str | None:
    missing: list[str] = []  # what is wrong, in words
    install: list[str] = []  # pip arguments that fix it
    if not sys.platform.startswith("linux"):
        return (
            "XLA's GPU compile needs Linux: JAX's CUDA plugin is built for Linux only. "
            "The other GPU targets (mosaic-gpu, triton, stablehlo:cuda) work here."
        )
    if plugin is None:
        missing.append(f"JAX's CUDA plugin for jaxlib {jaxlib}")
        install += _pinned(family, jaxlib)
    elif _release(plugin_version) != _release(jaxlib) or _release(pjrt_version) != _release(jaxlib):
        missing.append(
            f"JAX's CUDA plugin at jaxlib's version {jaxlib} (installed: {plugin.distribution} "
            f"{plugin_version}, {plugin.pjrt_distribution} {pjrt_version or 'none'})"
        )
        install += _pinned(family, jaxlib)
    ptxas, nvdisasm, libdevice, cudart = tools
    if not ptxas or not libdevice:
        missing.append(
            words.and_list([n for n, p in (("ptxas", ptxas), ("libdevice", libdevice)) if not p])
        )
        install.append(family.nvcc)
    if not nvdisasm:
        missing.append("nvdisasm")
        install.append(NVDISASM_WHEEL)
    if not cudart:
        missing.append("the CUDA runtime")
        install.append(family.runtime)
    if not missing:
        return None
    command = "pip install " + " ".join(f"'{arg}'" if "=" in arg else arg for arg in install)
    everything = f" (everything at once: pip install '{EXTRA}')" if family is DEFAULT_PLUGIN else ""
    needs = words.and_list(missing)
    return f"XLA's GPU compile (xla-gpu targets) needs {needs}: {command}{everything}."


def _pinned(family: Plugin, jaxlib: str) -> list[str]:
    return [f"{family.distribution}=={jaxlib}", f"{family.pjrt_distribution}=={jaxlib}"]


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _release(version: str) -> tuple[int, ...]:
    """(0, 10, 2) for "0.10.2", "0.10.2.1" or "0.10.2.dev2026": the release a build belongs to."""
    numbers = re.findall(r"\d+", version.split("+", maxsplit=1)[0])[:3]
    return tuple(int(n) for n in numbers)


# ---------------------------------------------------------------------------
# NVIDIA's tools.


def _nvidia_roots() -> list[Path]:
    """The folders of the `nvidia` namespace package (where NVIDIA's wheels install)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])]


def _triton_nvidia() -> Path | None:
    """The triton wheel's NVIDIA backend folder (it ships ptxas, nvdisasm, libdevice)."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "backends" / "nvidia"
    return folder if folder.is_dir() else None


def find_tools(family: Plugin) -> tuple[str, str, str, str]:
    """(ptxas, nvdisasm, libdevice, cudart) paths, "" for each not found.

    NVIDIA's pip wheels first (the plugin's CUDA version before the other), then the
    triton wheel's copies, then a CUDA toolkit (`CUDA_HOME`, /usr/local/cuda, PATH).
    """
    others = [p for p in PLUGINS if p is not family]
    folders = [
        root / name
        for root in _nvidia_roots()
        for plugin in (family, *others)
        for name in plugin.nvidia_dirs
    ]
    # nvdisasm wheels of either CUDA install under these.
    folders += [root / name for root in _nvidia_roots() for name in ("cu13", "cuda_nvdisasm")]
    triton = _triton_nvidia()
    toolkits = [Path(p) for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    toolkits.append(Path("/usr/local/cuda"))

    def binary(name: str) -> str:
        for folder in folders:
            if (folder / "bin" / name).is_file():
                return str(folder / "bin" / name)
        if triton is not None and (triton / "bin" / name).is_file():
            return str(triton / "bin" / name)
        for toolkit in toolkits:
            if (toolkit / "bin" / name).is_file():
                return str(toolkit / "bin" / name)
        return shutil.which(name) or ""

    def libdevice() -> str:
        candidates = [f / "nvvm" / "libdevice" / "libdevice.10.bc" for f in folders]
        if triton is not None:
            candidates.append(triton / "lib" / "libdevice.10.bc")
        candidates += [t / "nvvm" / "libdevice" / "libdevice.10.bc" for t in toolkits]
        return next((str(c) for c in candidates if c.is_file()), "")

    def cudart() -> str:
        candidates = [
            root / name / "lib" / family.cudart
            for root in _nvidia_roots()
            for name in family.nvidia_dirs
        ]
        candidates += [t / "lib64" / family.cudart for t in toolkits]
        return next((str(c) for c in candidates if c.is_file()), "")

    return binary("ptxas"), binary("nvdisasm"), libdevice(), cudart()


@functools.lru_cache(maxsize=16)
def tool_version(path: str) -> str:
    """The version a CUDA tool prints ("12.9.86"), "" when it does not say."""
    if not path:
        return ""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    match = re.search(r"\bV(\d+\.\d+\.\d+)", done.stdout) or re.search(
        r"release (\d+\.\d+)", done.stdout
    )
    return match.group(1) if match else ""
