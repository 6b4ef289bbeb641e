"""SASS control codes: the scheduling the assembler wrote into each Volta+ instruction.

From Volta on, an NVIDIA instruction is 128 bits, and its top bits carry the control
information the hardware obeys instead of tracking dependencies itself. In the second
64-bit word (as nvdisasm `-hex` prints it), from bit 41 up (the layout published by
Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
2018, and used by the turingas and CuAssembler assemblers):

    bits 41-44  stall: cycles to wait before the warp issues its next instruction
    bit  45     yield: 0 lets the scheduler switch to another warp (written `Y`)
    bits 46-48  write barrier: scoreboard (0-5) this instruction's result releases, 7: none
    bits 49-51  read barrier: scoreboard released once its operands are read, 7: none
    bits 52-57  wait mask: scoreboards to wait on before issuing (bit k: barrier k)
    bits 58-61  reuse: operand reuse-cache flags (bit 0: operand A, 1: B, 2: C, 3: D)

Variable-latency instructions (memory, `MUFU`, `S2R` ...) set a barrier; the ones that
need their result wait on it. Fixed-latency ones are covered by the stalls alone.
"""

from __future__ import annotations

import dataclasses
import re

_NO_BARRIER = 7


@dataclasses.dataclass(frozen=True)
class Control:
    """One instruction's control information.

    Attributes:
        stall: Cycles before the warp's next instruction issues (0-15).
        yield_hint: Whether the scheduler may switch warps after it (the bit is 0).
        write_barrier: Scoreboard its result releases (0-5), None for none.
        read_barrier: Scoreboard released when its operands have been read, or None.
        wait_mask: Scoreboards it waits on (bit k: barrier k).
        reuse: Operand reuse-cache flags (bit 0: A, 1: B, 2: C, 3: D).
    """

    stall: int
    yield_hint: bool
    write_barrier: int | None
    read_barrier: int | None
    wait_mask: int
    reuse: int

    @property
    def waits(self) -> tuple[int, ...]:
        """The scoreboards waited on."""
        return tuple(k for k in range(6) if self.wait_mask >> k & 1)

    def __str__(self) -> str:
        """CuAssembler's notation: `[B0-----:R-:W1:Y:S04]`."""
        mask = "".join(str(k) if self.wait_mask >> k & 1 else "-" for k in range(6))
        read = "-" if self.read_barrier is None else str(self.read_barrier)
        write = "-" if self.write_barrier is None else str(self.write_barrier)
        return f"[B{mask}:R{read}:W{write}:{'Y' if self.yield_hint else '-'}:S{self.stall:02d}]"


def decode(high_word: int) -> Control:
    """The control information of a Volta+ instruction from its second 64-bit word."""
    bits = high_word >> 41
    write = bits >> 5 & 0x7
    read = bits >> 8 & 0x7
    return Control(
        stall=bits & 0xF,
        yield_hint=not bits >> 4 & 1,
        write_barrier=None if write == _NO_BARRIER else write,
        read_barrier=None if read == _NO_BARRIER else read,
        wait_mask=bits >> 11 & 0x3F,
        reuse=bits >> 17 & 0xF,
    )


# Instruction classes, by opcode (the text's first word, predicate and modifiers off).
CLASSES = ("tensor", "fp", "int", "sfu", "global", "shared", "async", "const", "control", "other")
_TENSOR: tuple[str, ...] = (
    "HMMA",
    "HGMMA",
    "IMMA",
    "IGMMA",
    "QGMMA",
    "DMMA",
    "BMMA",
    "BGMMA",
    "UTC",
)
_FP: tuple[str, ...] = (
    "FADD",
    "FMUL",
    "FFMA",
    "FMNMX",
    "FSEL",
    "FSETP",
    "FSET",
    "FCHK",
    "FRND",
    "FSWZ",
)
_FP += ("HADD2", "HMUL2", "HFMA2", "HMNMX2", "HSETP2", "DADD", "DMUL", "DFMA", "DSETP")
_FP += ("F2F", "F2I", "I2F", "F2FP", "I2FP", "F2IP")
_GLOBAL: tuple[str, ...] = ("LDG", "STG", "LD", "ST", "RED", "ATOM", "ATOMG", "CCTL", "LDL", "STL")
_SHARED = ("LDS", "STS", "LDSM", "STSM", "ATOMS")
_ASYNC = ("UTMA", "UBLKCP", "LDGSTS", "LDGDEPBAR", "SYNCS", "UBLKRED", "UBLKPF", "ARRIVES")
_CONTROL: tuple[str, ...] = (
    "BRA",
    "BRX",
    "JMP",
    "EXIT",
    "RET",
    "CALL",
    "BAR",
    "BSSY",
    "BSYNC",
    "WARPSYNC",
)
_CONTROL += ("NOP", "YIELD", "DEPBAR", "MEMBAR", "ERRBAR", "FENCE", "BPT", "KILL", "NANOSLEEP")
_CONTROL += ("ELECT", "ACQBULK", "WARPGROUP", "ENDCOLLECTIVE", "BMOV", "CGAERRBAR")


def opcode(text: str) -> str:
    """The opcode of an instruction's text (`@!P0 LDG.E.64 R2, ...` -> `LDG`)."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def instruction_class(name: str) -> str:
    """The class (one of `CLASSES`) of an opcode."""
    if name.startswith(_TENSOR):
        return "tensor"
    if name in _SHARED:
        return "shared"
    if name.startswith(_ASYNC):
        return "async"
    if name in _GLOBAL:
        return "global"
    if name in ("LDC", "ULDC"):
        return "const"
    if name == "MUFU":
        return "sfu"
    if name.startswith(_CONTROL):
        return "control"
    if name in _FP:
        return "fp"
    if name.startswith(("S2R", "S2UR", "CS2R", "R2UR", "SHFL", "VOTE", "MATCH", "P2R", "R2P")):
        return "other"
    return "int"


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One SASS instruction with its decoded control information.

    Attributes:
        address: Its address in the function.
        text: Its text.
        opcode: Its opcode ("FFMA").
        kind: Its class (`CLASSES`).
        control: Its control information (None without the encoding).
        source: (file, line) it comes from, when nvdisasm says.
    """

    address: int
    text: str
    opcode: str
    kind: str
    control: Control | None
    source: tuple[str, int] | None


def instructions(
    listing: list[tuple[int, str, tuple[int, ...], tuple[str, int] | None]],
) -> tuple[Instruction, ...]:
    """`sourcemap.sass_instructions` with each instruction's control information decoded."""
    found = []
    for address, text, words, source in listing:
        name = opcode(text)
        control = decode(words[1]) if len(words) == 2 else None
        found.append(Instruction(address, text, name, instruction_class(name), control, source))
    return tuple(found)


_LABEL = re.compile(r"^\s*(\.L\w+):\s*$")
_ADDRESS = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/")


def labels(sass: str) -> dict[str, int]:
    """Each label of a listing (`.L_x_3:`) and the address of the instruction after it."""
    found: dict[str, int] = {}
    waiting: list[str] = []
    for line in sass.splitlines():
        label = _LABEL.match(line)
        if label:
            waiting.append(label.group(1))
            continue
        address = _ADDRESS.match(line)
        if address and waiting:
            found.update(dict.fromkeys(waiting, int(address.group(1), 16)))
            waiting = []
    return found


def loops(found: tuple[Instruction, ...], named: dict[str, int]) -> list[tuple[int, int]]:
    """(first, last) addresses of each loop: a branch back to an earlier address."""
    spans = []
    for instruction in found:
        if instruction.opcode not in ("BRA", "JMP"):
            continue
        target = _branch_target(instruction.text, named)
        if target is not None and target < instruction.address:
            spans.append((target, instruction.address))
    return spans


def _branch_target(text: str, named: dict[str, int]) -> int | None:
    for raw in reversed(text.replace(",", " ").split()):
        word = raw.strip(" ;`()")
        if word in named:
            return named[word]
        if word.startswith("0x"):
            try:
                return int(word, 16)
            except ValueError:
                return None
    return None
