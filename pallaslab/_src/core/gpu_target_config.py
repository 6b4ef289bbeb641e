"""What XLA is told about a GPU it compiles for without one: the chips' target descriptions.

Each chip pallaslab can compile for with XLA (`xla-gpu:<chip>` targets) has a
`GpuTargetConfig` text proto in `gpu_target_configs/` beside this module: the chip's
published figures (SMs, threads, shared memory, registers, L2, bandwidth, clock,
memory, compute capability), each file citing its sources. A compile-only CUDA device
is made from it (`jax.experimental.topologies.get_topology_desc`). No JAX here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pallaslab._src.records.targets import XLA_GPU_CHIPS

CONFIG_DIR = Path(__file__).with_name("gpu_target_configs")

# The chips with a description, in the order targets list them.
CHIPS = XLA_GPU_CHIPS


def description(chip: str) -> str:
    """The chip's GpuTargetConfig text proto (sources in its comments).

    Raises:
        KeyError: For a chip without a description.
    """
    path = CONFIG_DIR / f"{chip}.txtpb"
    if chip not in CHIPS or not path.exists():
        raise KeyError(f"no GPU target description for {chip!r}; known: {', '.join(CHIPS)}")
    return path.read_text(encoding="utf-8")


def compute_capability(chip: str) -> tuple[int, int]:
    """(major, minor) of the chip, from its description."""
    info = parse(description(chip))["gpu_device_info"]
    capability = info["cuda_compute_capability"]
    return int(capability.get("major", 0)), int(capability.get("minor", 0))


def device_kind(chip: str) -> str:
    """The device kind a real device of this chip reports ("NVIDIA H100 80GB HBM3")."""
    return str(parse(description(chip))["device_description_str"])


# A comment, a field name (with its colon), a brace, a string, or a bare value.
_TOKEN = re.compile(
    r'\s*(?:(#[^\n]*)|([A-Za-z_][\w.]*)\s*(:)?\s*|(\{)|(\})|("(?:[^"\\]|\\.)*")|([^\s{}#"]+))'
)


def parse(text: str) -> dict[str, Any]:
    """A text proto as nested dicts (repeated fields become lists; enough for these files).

    Raises:
        ValueError: On text that is not a text proto of this simple form.
    """
    stack: list[dict[str, Any]] = [{}]
    pending: str | None = None
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip():
                raise ValueError(f"cannot read the text proto at {text[pos : pos + 20]!r}")
            break
        pos = match.end()
        comment, name, _colon, open_brace, close_brace, string, scalar = match.groups()
        if comment:
            continue
        if name is not None and pending is None:
            pending = name
            continue
        if open_brace:
            if pending is None:
                raise ValueError("a '{' without a field name")
            child: dict[str, Any] = {}
            _store(stack[-1], pending, child)
            stack.append(child)
            pending = None
            continue
        if close_brace:
            if len(stack) == 1:
                raise ValueError("an unmatched '}'")
            stack.pop()
            continue
        if pending is None:
            raise ValueError(f"a value without a field name near {text[pos - 20 : pos]!r}")
        value = string if string is not None else (scalar if scalar is not None else name)
        _store(stack[-1], pending, _value(value or ""))
        pending = None
    if len(stack) != 1 or pending is not None:
        raise ValueError("the text proto ends inside a message")
    return stack[0]


def _store(message: dict[str, Any], name: str, value: Any) -> None:
    if name in message:
        existing = message[name]
        message[name] = [*existing, value] if isinstance(existing, list) else [existing, value]
    else:
        message[name] = value


def _value(token: str) -> Any:
    if token.startswith('"'):
        return token[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    for kind in (int, float):
        try:
            return kind(token)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(token, token)
