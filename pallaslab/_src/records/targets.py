"""The targets a kernel can be lowered for, and their names.

`stablehlo[:cuda|:tpu]` (the whole program), `mosaic-gpu`, `triton` (TTIR) and the
Triton compiler's stages `ttgir|llir|ptx|sass:sm_XX`, `mosaic-tpu:<chip>` and
`tpu-compile:<chip>` (a real libtpu compile, compile-only), `xla-gpu:<chip>` (XLA's
real GPU compile with JAX's CUDA plugin, compile-only).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools

from pallaslab._src.records import hardware

GPU_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
TRITON_STAGES = ("ttgir", "llir", "ptx", "sass")
TPU_CHIPS = ("v4", "v5e", "v5p", "v6e", "7x")
# Chips XLA's own GPU compile takes (a target description each, in core/gpu_target_configs/).
XLA_GPU_CHIPS = ("A100", "H100", "H200", "B200")
DEFAULT_GPU_ARCH = "sm_90"
DEFAULT_TPU_CHIP = "v5e"
DEFAULT_GPU_CHIP = "H100"
# Architectures people type for a chip (`xla-gpu:sm_90`): the first chip of each.
_CHIP_OF_ARCH = {
    "sm_80": "A100",
    "sm_90": "H100",
    "sm_90a": "H100",
    "sm_100": "B200",
    "sm_100a": "B200",
}

_STAGE_LANGUAGE = {"ttgir": "mlir", "llir": "llvm", "ptx": "ptx", "sass": "sass"}
_STAGE_TITLE = {
    "ttgir": "TritonGPU IR",
    "llir": "LLVM IR",
    "ptx": "PTX",
    "sass": "SASS",
}


@dataclasses.dataclass(frozen=True)
class Target:
    """One target.

    Attributes:
        name: Its canonical name ("ptx:sm_90").
        kind: "stablehlo", "mosaic-gpu", "triton", "mosaic-tpu", "tpu-compile" or
            "xla-gpu".
        stage: For Triton: "ttir", "ttgir", "llir", "ptx" or "sass".
        arch: "sm_90" for GPU stages, the chip for TPU and XLA GPU ones ("v5e",
            "H100"), the platform for StableHLO ("" for the platform at hand).
        language: The text's language.
        title: A short human title ("PTX for sm_90").
    """

    name: str
    kind: str
    stage: str
    arch: str
    language: str
    title: str

    @property
    def program(self) -> bool:
        """Whether the target shows the whole program rather than one kernel."""
        return self.kind == "stablehlo"

    @property
    def group(self) -> str:
        """The group it is listed under, by family and chip.

        "Whole program (StableHLO)", "GPU · Mosaic GPU", "GPU · Triton", "GPU · Triton
        for sm_90 (H100, H200)" (a Triton stage per architecture), "GPU · XLA's own
        compile", "TPU v5e" (Mosaic TPU and libtpu's compile of one chip).
        """
        if self.kind == "stablehlo":
            return "Whole program (StableHLO)"
        if self.kind in ("mosaic-tpu", "tpu-compile"):
            return f"TPU {self.arch}"
        if self.kind == "xla-gpu":
            return "GPU · XLA's own compile"
        if self.kind == "mosaic-gpu":
            return "GPU · Mosaic GPU"
        if not self.arch:
            return "GPU · Triton"
        chips = ", ".join(g.name for g in hardware.GPUS.values() if g.arch == self.arch)
        return f"GPU · Triton for {self.arch}" + (f" ({chips})" if chips else "")

    @property
    def family_rank(self) -> int:
        """Where its family is listed: the program, then GPU targets, then TPU ones."""
        return _FAMILY_RANK.get(self.kind, len(_FAMILY_RANK))


_FAMILY_RANK = {
    "stablehlo": 0,
    "mosaic-gpu": 1,
    "triton": 2,
    "xla-gpu": 3,
    "mosaic-tpu": 4,
    "tpu-compile": 4,
}


@functools.cache
def all_targets() -> tuple[Target, ...]:
    """Every target, in the order they are listed."""
    found = [
        Target("stablehlo", "stablehlo", "", "", "mlir", "StableHLO (this machine)"),
        Target("stablehlo:cuda", "stablehlo", "", "cuda", "mlir", "StableHLO for CUDA"),
        Target("stablehlo:tpu", "stablehlo", "", "tpu", "mlir", "StableHLO for TPU v5e"),
        Target("mosaic-gpu", "mosaic-gpu", "", "", "mlir", "Mosaic GPU"),
        Target("triton", "triton", "ttir", "", "mlir", "Triton IR (TTIR)"),
    ]
    found += [
        Target(
            f"{stage}:{arch}",
            "triton",
            stage,
            arch,
            _STAGE_LANGUAGE[stage],
            f"{_STAGE_TITLE[stage]} for {arch}",
        )
        for stage in TRITON_STAGES
        for arch in GPU_ARCHS
    ]
    found += [
        Target(f"mosaic-tpu:{chip}", "mosaic-tpu", "", chip, "mlir", f"Mosaic TPU for {chip}")
        for chip in TPU_CHIPS
    ]
    found += [
        Target(
            f"tpu-compile:{chip}", "tpu-compile", "", chip, "llo", f"TPU {chip} bundles (libtpu)"
        )
        for chip in TPU_CHIPS
    ]
    found += [
        Target(f"xla-gpu:{chip}", "xla-gpu", "", chip, "sass", f"{chip} SASS (XLA's compile)")
        for chip in XLA_GPU_CHIPS
    ]
    return tuple(found)


def targets() -> list[str]:
    """The names of every target pallaslab can lower for.

    Example:
        >>> pallaslab.targets()[:5]
        ['stablehlo', 'stablehlo:cuda', 'stablehlo:tpu', 'mosaic-gpu', 'triton']
    """
    return [t.name for t in all_targets()]


def implied_chip(target: Target) -> str:
    """The chip a target compiles for, to trace its kernels for ("" when it names none).

    `xla-gpu:B200` is a B200, `ptx:sm_100` the first chip of that architecture (a
    B200), `mosaic-tpu:v6e` a v6e; `mosaic-gpu`, `triton` and `stablehlo` name none.
    """
    if target.kind in ("xla-gpu", "mosaic-tpu", "tpu-compile"):
        return target.arch
    if target.kind == "triton" and target.arch:
        return _CHIP_OF_ARCH.get(target.arch, "")
    return ""


# Short names people type, and what they mean.
_ALIASES = {
    "ttir": "triton",
    "triton:ttir": "triton",
    "mosaic": f"mosaic-tpu:{DEFAULT_TPU_CHIP}",
    "mosaic-tpu": f"mosaic-tpu:{DEFAULT_TPU_CHIP}",
    "tpu-compile": f"tpu-compile:{DEFAULT_TPU_CHIP}",
    "bundles": f"tpu-compile:{DEFAULT_TPU_CHIP}",
    "mgpu": "mosaic-gpu",
    "mosaic_gpu": "mosaic-gpu",
    "hlo": "stablehlo",
    "xla-gpu": f"xla-gpu:{DEFAULT_GPU_CHIP}",
    **{stage: f"{stage}:{DEFAULT_GPU_ARCH}" for stage in TRITON_STAGES},
}


def parse_target(name: str) -> Target:
    """The target called `name` (aliases such as "ptx" = "ptx:sm_90" accepted).

    Raises:
        ValueError: Naming the closest targets, when there is no such target.
    """
    wanted = name.strip().lower()
    wanted = _ALIASES.get(wanted, wanted).lower()
    if ":" in wanted:  # sm90 -> sm_90, v5litepod -> v5e
        head, arch = wanted.split(":", 1)
        if arch.startswith("sm") and not arch.startswith("sm_"):
            arch = "sm_" + arch[2:]
        arch = {"v5lite": "v5e", "v5litepod": "v5e", "v6lite": "v6e", "tpu7x": "7x"}.get(arch, arch)
        if head == "xla-gpu":
            arch = _CHIP_OF_ARCH.get(arch, arch)
        wanted = f"{head}:{arch}".lower()
    for target in all_targets():
        if target.name.lower() == wanted:
            return target
    by_lower = {t.lower(): t for t in targets()}
    matches = difflib.get_close_matches(wanted, list(by_lower), n=3, cutoff=0.5)
    close = [by_lower[match] for match in matches]
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"unknown target {name!r}.{hint} Targets: stablehlo[:cuda|:tpu], mosaic-gpu, triton, "
        f"{{ttgir,llir,ptx,sass}}:{{{','.join(GPU_ARCHS)}}}, "
        f"mosaic-tpu:{{{','.join(TPU_CHIPS)}}}, tpu-compile:{{{','.join(TPU_CHIPS)}}}, "
        f"xla-gpu:{{{','.join(XLA_GPU_CHIPS)}}}."
    )


def reading_note(name: str) -> str:
    """How a target name was read, when not as written ("" when it was its own name).

    `ptx:sm90` is read as `ptx:sm_90`, `ptx` as `ptx:sm_90`: said, so a guess is seen.
    """
    canonical = parse_target(name).name
    if name.strip() == canonical:
        return ""
    return f"target {name.strip()!r} read as {canonical}"
