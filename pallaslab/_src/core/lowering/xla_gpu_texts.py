"""Reading XLA's GPU compile texts: launches, threads, ptxas reports, one function's PTX and SASS.

What `xla_gpu` brings back from the worker is text as XLA, ptxas and nvdisasm wrote
it; `xla_gpu_lowering` asks these readers for the figures and pieces it shows.
"""

from __future__ import annotations

import dataclasses
import re

_LAUNCH = re.compile(
    r"^\s*\d+:\s*(\w+)\s*(?:\[[^\]]*\])?\s*([\w$.]+)\s+grid:\s*\[([\d,\s]+)\]\s+"
    r"threads:\s*\[([\d,\s]+)\]\s+shared_memory:\s*(\d+)\s*bytes",
    re.MULTILINE,
)


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel launch in XLA's launch sequence.

    Attributes:
        kind: The thunk kind ("kCustomKernel" for a Triton kernel, "kKernel" ...).
        name: The kernel's function name.
        grid: Blocks (x, y, z).
        threads: Threads per block (x, y, z).
        shared_bytes: Dynamic shared memory per block.
    """

    kind: str
    name: str
    grid: tuple[int, ...]
    threads: tuple[int, ...]
    shared_bytes: int


def launches(thunks: str) -> list[Launch]:
    """The kernel launches of a `*.thunk_sequence.txt` dump."""
    return [
        Launch(
            kind=m.group(1),
            name=m.group(2),
            grid=tuple(int(x) for x in m.group(3).split(",")),
            threads=tuple(int(x) for x in m.group(4).split(",")),
            shared_bytes=int(m.group(5)),
        )
        for m in _LAUNCH.finditer(thunks)
    ]


_THREADS = re.compile(
    r"^\s*\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE
)
_DYNAMIC_SHARED = re.compile(r"dynamic_shared_memory_size\s+%c(\d+)_i32")


def threads_per_block(ptx: str) -> int | None:
    """Threads per block a PTX kernel declares (`.maxntid` / `.reqntid`)."""
    match = _THREADS.search(ptx)
    if match is None:
        return None
    total = 1
    for group in match.groups():
        total *= int(group) if group else 1
    return total


def mosaic_dynamic_shared(passes: tuple[tuple[str, str], ...]) -> int:
    """Dynamic shared memory Mosaic GPU's launch asks for, from its pass pipeline."""
    for _, module in passes:
        match = _DYNAMIC_SHARED.search(module)
        if match:
            return int(match.group(1))
    return 0


_REGISTERS = re.compile(r"Used (\d+) registers")
_LOCAL = re.compile(r"(\d+) bytes lmem")
_STATIC_SHARED = re.compile(r"(\d+) bytes smem")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")
_FUNCTION = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")


def ptxas_report(report: str) -> dict[str, dict[str, int]]:
    """A `ptxas -v` report by function: registers, spill stores/loads, stack, local bytes."""
    figures: dict[str, dict[str, int]] = {}
    current = ""
    for line in report.splitlines():
        if match := _FUNCTION.search(line):
            current = match.group(1)
            figures.setdefault(current, {})
        entry = figures.setdefault(current, {})
        if match := _REGISTERS.search(line):
            entry["registers"] = int(match.group(1))
        if match := _SPILLS.search(line):
            entry["spill_stores"] = int(match.group(1))
            entry["spill_loads"] = int(match.group(2))
        if match := _STACK.search(line):
            entry["stack"] = int(match.group(1))
        if match := _REGISTERS.search(line):
            local = _LOCAL.search(line)
            entry["local"] = int(local.group(1)) if local else 0
    return {k: v for k, v in figures.items() if k and v}


def static_shared(report: str) -> int:
    """Static shared memory a ptxas report names (the first function's)."""
    match = _STATIC_SHARED.search(report)
    return int(match.group(1)) if match else 0


_PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)")
_PTX_DECLARATION = re.compile(r"^\s*\.(?:version|target|address_size|extern|global|shared|const)\b")


def ptx_function(ptx: str, name: str) -> str:
    """One kernel of a PTX module: the module's header and declarations, and its entry.

    The whole module when there is no entry called `name`.
    """
    lines = ptx.splitlines()
    start = next(
        (k for k, line in enumerate(lines) if (m := _PTX_ENTRY.match(line)) and m.group(1) == name),
        None,
    )
    if start is None:
        return ptx
    depth = 0
    end = len(lines)
    opened = False
    for k in range(start, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        opened = opened or "{" in lines[k]
        if opened and depth <= 0:
            end = k + 1
            break
    # Top-level declarations (before any function body) the kernel may use.
    declarations = []
    depth = 0
    for line in lines[:start]:
        if depth == 0 and _PTX_DECLARATION.match(line):
            declarations.append(line)
        depth += line.count("{") - line.count("}")
    return "\n".join([*declarations, "", *lines[start:end]])


_SASS_SECTION = re.compile(r"^\s*//-+ \.text\.([\w$.]+)\s+-+")


def sass_function(sass: str, name: str) -> str:
    """One kernel's section of an nvdisasm listing (the whole listing without one)."""
    lines = sass.splitlines()
    start = next(
        (
            k
            for k, line in enumerate(lines)
            if (m := _SASS_SECTION.match(line)) and m.group(1) == name
        ),
        None,
    )
    if start is None:
        return sass
    end = next(
        (k for k in range(start + 1, len(lines)) if lines[k].lstrip().startswith("//---")),
        len(lines),
    )
    return "\n".join(lines[start:end])
