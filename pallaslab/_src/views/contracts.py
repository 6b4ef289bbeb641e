"""Every message between Python and the widgets, as types: the contracts.

The inspector's tabs each produce one view model (its pane); the widget renders it
(`labextension/src/widget/`) and the static HTML renderer (`views/statichtml/`)
makes a saved notebook's HTML from the same model. Tabs ask Python for more with
requests (`ctx.request(body)` in TypeScript) answered with replies; the live
benchmark view has its own traits; the inspector's "Open in new tab" dispatches a
`pallaslab:open-text` event to the lab extension.

TypeScript reads the same types from `labextension/src/contracts.ts`, generated from
this module (`python -m pallaslab._src.views.contracts_ts`): a test checks that the
committed file is what generation gives now, and another checks real panes, replies
and traits against these types (`views/conformance.py`). camelCase keys are the
JSON's: they are read in TypeScript. No `from __future__ import annotations` here:
TypedDicts see `NotRequired` only in annotations evaluated when they are defined.
"""

from typing import Literal, NotRequired, TypedDict

# ---------------------------------------------------------------------------------
# Shared pieces.

#: The inspector's tabs, in the order of `views/tabs` (a test checks they agree).
TabId = Literal["overview", "source", "jaxpr", "tiles", "ir", "run"]
#: Every pane the widget draws: the inspector's tabs, and the Diff tab of a diff view.
PaneId = Literal["overview", "source", "jaxpr", "tiles", "ir", "run", "diff"]
#: An operand's role as the views colour it.
Role = Literal["in", "out", "scratch", "prefetch"]
#: [text line, source window index, source line], lines 1-based.
SourceMapEntry = tuple[int, int, int]

#: Colours of tile pictures, shared by the widget's canvas and the static SVG: per
#: operand role (light, dark: more reads, darker), never read, a program's block, and
#: what of an edge block hangs over the array.
TILE_COLOURS = {
    "in": ["#dbe9fb", "#0b4da2"],
    "out": ["#fde4cf", "#a3400a"],
    "prefetch": ["#eadcf8", "#5a2e9c"],
    "other": ["#e6e6e6", "#333333"],
    "unread": "#f6f8fa",
    "highlight": "#ffd33d",
    "outline": "#111111",
    "padding": "#cf222e",
    "border": "#59636e",
}


class Location(TypedDict):
    """A source line as shown: "Cell [3]" line 7."""

    label: str
    line: int


class FileLocation(TypedDict):
    """A source line with the file it is in (to find its source window)."""

    file: str
    label: str
    line: int


class Mark(TypedDict):
    """A note on one source line ("kernel add_kernel", "BlockSpec of x_ref")."""

    line: int
    kind: Literal["kernel", "call", "blockspec"]
    text: str


class SourceWindow(TypedDict):
    """A window of one source file: the lines the views show and link to."""

    file: str
    label: str
    first: int
    lines: list[str]
    marks: list[Mark]


class ErrorPane(TypedDict):
    """A pane (or a reply) in place of one that could not be built."""

    error: str


# ---------------------------------------------------------------------------------
# The inspector's traits.


class HeaderKernel(TypedDict):
    """A kernel as the header counts it."""

    name: str
    grid: list[int]


class Header(TypedDict):
    """The inspector's header: name, where it ran, the reference check."""

    name: str
    backend: str
    mode: str
    kernels: list[HeaderKernel]
    check: bool | None
    #: Badges shown instead of the backend and the kernel count (a diff view's).
    badges: NotRequired[list[str]]


class ProblemModel(TypedDict):
    """What went wrong, as the banner shows it."""

    where: str
    summary: str
    hint: str
    kind: str


class TabInfo(TypedDict):
    """One tab of the bar."""

    id: PaneId
    title: str


# ---------------------------------------------------------------------------------
# Kernels tab (`overview`).


class ProgramArg(TypedDict):
    """One argument or output of the inspected program."""

    path: str
    type: str


class ProgramModel(TypedDict):
    """The inspected program's signature."""

    name: str
    args: list[ProgramArg]
    outputs: list[ProgramArg]


class OperandRow(TypedDict):
    """One operand of a kernel: its array, block, index map and memory."""

    role: Role
    label: str
    origin: str
    type: str
    block: str
    blockBytes: str
    indexMap: str
    memory: str
    buffers: int | None


class RaceConflict(TypedDict):
    """Programs that write one block (or elements) of an output where they may not."""

    kind: str
    operand: str
    position: int
    block: list[int]
    start: list[int]
    programs: list[list[int]]
    programCount: int
    axes: list[int]
    elements: int
    span: list[list[int]]
    text: str


class RaceEntry(TypedDict):
    """Races under one backend's rules: sentences to show, conflicts as data."""

    sentences: list[str]
    conflicts: list[RaceConflict]
    total: int
    checked: bool


class HintModel(TypedDict):
    """One performance hint, tied to a source line."""

    id: str
    severity: Literal["error", "warning", "info"]
    message: str
    location: Location | None
    figures: list[tuple[str, str]]
    chip: str


class HintsModel(TypedDict):
    """A kernel's hints; `masks` says whether masked lanes were checked too."""

    hints: list[HintModel]
    masks: bool
    error: NotRequired[str]


class CostModel(TypedDict):
    """The cost a kernel declares."""

    flops: int
    transcendentals: int
    bytes: int


class FitRow(TypedDict):
    """A kernel's memory on one chip (`inspection.fit()`'s row)."""

    chip: str
    target: str
    #: "VMEM" (scoped) or "shared memory" (per block).
    memory: str
    #: Bytes needed, in words ("16.1 MiB"), "" when unknown.
    needed: str
    #: "read" (the compiler's table), "read, rounded" (its message) or "estimated".
    neededFrom: str
    limit: str
    limitFrom: str
    capacity: str
    #: "fits", "fits-with-limit", "does-not-fit" or "unknown".
    verdict: str
    verdictText: str
    #: The `vmem_limit_bytes` to pass, for "fits-with-limit".
    vmemLimitBytes: int | None
    message: str


class FitModel(TypedDict):
    """The Kernels tab's memory-fit table across chips."""

    rows: list[FitRow]
    #: Whether every row was read from a compile (else some are estimates).
    compiled: bool
    error: NotRequired[str]


class FitRequest(TypedDict):
    """Asks to compile a kernel for every chip and read its fit."""

    kind: Literal["fit"]
    kernel: int


class KernelModel(TypedDict):
    """One kernel of the Kernels tab."""

    index: int
    name: str
    kind: str
    kindText: str
    grid: list[int]
    gridNames: list[str] | None
    programs: int
    source: Location | None
    callSite: Location | None
    backend: str
    params: list[tuple[str, str]]
    semantics: list[str] | None
    cost: CostModel | None
    interpret: str
    vmapped: list[int]
    path: list[str]
    aliases: list[tuple[int, int]]
    operands: list[OperandRow]
    races: dict[str, RaceEntry]
    hints: HintsModel
    #: Its memory on each chip: compiles already made, else estimates; a request reads all.
    fit: FitModel
    #: The kernel in one line of facts: what built it, its grid, where it is defined.
    facts: list[str]
    #: Dimension semantics, compiler params, cost, aliases, interpret: one line each.
    details: list[str]


class OverviewPane(TypedDict):
    """The Kernels tab."""

    program: ProgramModel
    kernels: list[KernelModel]
    notices: list[str]


class HintsRequest(TypedDict):
    """Asks for a kernel's hints with masked lanes checked (the body interpreted)."""

    kind: Literal["hints"]
    kernel: int


# ---------------------------------------------------------------------------------
# Source and Jaxpr tabs; whole texts on request ("Open in new tab").


class SourcePane(TypedDict):
    """The Source tab."""

    files: list[SourceWindow]


class JaxprView(TypedDict):
    """One jaxpr (a kernel's or the program's), clipped for drawing inline."""

    id: str
    title: str
    text: str
    map: list[SourceMapEntry]
    #: Lines of the whole jaxpr.
    lines: int
    clipped: bool


class JaxprPane(TypedDict):
    """The Jaxpr tab."""

    views: list[JaxprView]
    files: list[SourceWindow]


class TextRequest(TypedDict):
    """Asks for a whole text of a tab: its header (`chunk` -1), then piece `chunk`."""

    textKey: str
    chunk: int


class OpenTextSource(TypedDict):
    """A source window as an open-text request carries it."""

    label: str
    first: int
    lines: list[str]


class TextHeaderReply(TypedDict):
    """What a whole text is, and in how many pieces it comes."""

    title: str
    language: str
    sourceMap: list[SourceMapEntry]
    sources: list[OpenTextSource]
    chunks: int


class TextChunkReply(TypedDict):
    """One piece of a whole text."""

    index: int
    text: str


class OpenTextRequest(TypedDict):
    """The `pallaslab:open-text` event's detail: a text to open in a JupyterLab tab."""

    title: str
    language: str
    text: str
    sourceMap: list[SourceMapEntry]
    sources: list[OpenTextSource]


# ---------------------------------------------------------------------------------
# IR tab: lowerings asked for and sent in pieces.


class IrKernel(TypedDict):
    """A kernel the IR tab can lower."""

    index: int
    name: str
    backend: str
    kind: str
    defaultTarget: str


class IrTarget(TypedDict):
    """A target in the picker."""

    name: str
    title: str
    group: str
    kind: str
    stage: str
    arch: str
    language: str
    program: bool
    #: Why the target cannot be used here ("" when it can).
    unavailable: str


class IrInitial(TypedDict):
    """The kernel and target the tab opens on."""

    kernel: int
    target: str


class IrPane(TypedDict):
    """The IR tab: nothing is lowered until a target is asked for."""

    kernels: list[IrKernel]
    targets: list[IrTarget]
    initial: IrInitial
    files: list[SourceWindow]


class IrLowerRequest(TypedDict):
    """Asks for a lowering's summary (lowering it if need be)."""

    type: Literal["lower"]
    kernel: int
    target: str
    stage: str


class IrChunkRequest(TypedDict):
    """Asks for piece `index` of a lowering's text."""

    type: Literal["chunk"]
    kernel: int
    target: str
    stage: str
    index: int


class IrKey(TypedDict):
    """Which lowering a reply is about."""

    kernel: int | None
    target: str
    stage: str


class IrError(TypedDict):
    """Why a target could not take a kernel."""

    message: str
    kind: str
    detail: str
    where: FileLocation | None


class OccupancyRow(TypedDict):
    """Theoretical occupancy on one GPU."""

    gpu: str
    arch: str
    sameArch: bool
    blocks: int
    warps: str
    percent: int
    limiter: str


class VmemBlockRow(TypedDict):
    """VMEM one operand's blocks take."""

    operand: str
    role: str
    block: str
    dtype: str
    buffers: int
    bytes: str
    padded: str


class TilingRow(TypedDict):
    """A block that breaks the TPU (8, 128) rule."""

    operand: str
    message: str
    hint: str
    where: FileLocation | None


class UtilizationRow(TypedDict):
    """Slots of one TPU unit used per bundle, on average."""

    unit: str
    slots: int
    mean: float


class GpuResourcesModel(TypedDict):
    """What a compiled GPU kernel asks of each SM."""

    kind: Literal["gpu"]
    summary: str
    facts: list[tuple[str, str]]
    occupancy: list[OccupancyRow]


class TpuResourcesModel(TypedDict):
    """What a TPU kernel takes: VMEM, bundles, code."""

    kind: Literal["tpu"]
    summary: str
    facts: list[tuple[str, str]]
    vmemFraction: float
    blocks: list[VmemBlockRow]
    tiling: list[TilingRow]
    utilization: list[UtilizationRow]


ResourcesModel = GpuResourcesModel | TpuResourcesModel


class IrLineCost(TypedDict):
    """The static cost of one source line, for the gutter beside it in the IR tab."""

    #: The source file's index in the pane's files.
    file: int
    line: int
    #: Compact: "12b vld 16 VPU 8" (TPU bundles), "9i 31c w2" (SASS).
    text: str
    #: In words, for the tooltip.
    title: str


class IrLoweredReply(TypedDict):
    """Everything about a lowering but its text."""

    type: Literal["lowered"]
    key: IrKey
    kernel: str | None
    language: str
    header: str
    notes: list[str]
    seconds: float
    error: IrError | None
    resources: ResourcesModel | None
    stages: list[str]
    #: What the main text ("final" in the stage picker) is, in one sentence.
    finalTitle: str
    #: What each of `stages` is, in one sentence each (same order).
    stageTitles: list[str]
    lines: int
    chunks: int
    mapped: int
    #: Static cost per source line (machine code only: TPU bundles, SASS).
    costs: list[IrLineCost]
    #: The kernel body's totals in one line ("" without costs).
    costNote: str
    #: Why no line of this text is linked to the source ("" when some are).
    unlinked: str


class IrChunkReply(TypedDict):
    """One piece of a lowering's text: its lines and their source-map entries."""

    type: Literal["chunk"]
    index: int
    first: int
    lines: list[str]
    map: list[SourceMapEntry]
    last: bool


class IrFailedReply(TypedDict):
    """A request the tab could not answer."""

    type: Literal["failed"]
    message: str


class IrStaticLowering(TypedDict):
    """A lowering as a saved notebook shows it: its summary, its text's first piece."""

    summary: IrLoweredReply
    first: IrChunkReply | None


class IrStatic(TypedDict):
    """The IR tab in a saved notebook: the pane and the lowerings done so far.

    The lowerings are as the widget receives them: replies to its requests.
    """

    pane: IrPane
    lowered: list[IrStaticLowering]


# ---------------------------------------------------------------------------------
# Tiles tab.


class EncodedArray(TypedDict):
    """An integer array: little-endian base64 of the narrowest type that holds it."""

    dtype: Literal["u8", "u16", "i16", "u32", "i32", "f64"]
    shape: list[int]
    data: str


class DrawnDims(TypedDict):
    """Which dimensions a picture draws as rows and columns; the others are cut."""

    rows: int | None
    cols: int | None
    sliced: list[int]


class Coverage(TypedDict):
    """How many programs read (or write) each cell of an operand."""

    edges: list[EncodedArray]
    counts: EncodedArray
    merged: bool
    min: int
    max: int
    mean: float
    never: int


class ViewBounds(TypedDict):
    """The span a picture shows per drawn dimension: the array and any overhang."""

    rows: list[int]
    cols: list[int]


class TilesOperand(TypedDict):
    """One operand of a tile map; the arrays only when its blocks are known."""

    index: int
    label: str
    role: Role
    access: str
    reason: str
    shape: list[int]
    type: str
    block: str
    blockShape: list[int | None]
    kinds: list[str]
    indexMap: str
    memory: str
    dims: DrawnDims
    mapped: bool
    starts: NotRequired[list[EncodedArray]]
    extents: NotRequired[list[EncodedArray]]
    coverage: NotRequired[Coverage]
    bounds: NotRequired[ViewBounds]
    revisitAxes: NotRequired[list[int]]


class MeritOperand(TypedDict):
    """One operand's traffic."""

    index: int
    label: str
    role: str
    access: str
    reads: list[float]
    transfers: int
    bytes: int
    bytesText: str
    minBytesText: str
    ratio: float
    blockText: str
    buffers: int


class Merit(TypedDict):
    """A kernel's figures of merit under one schedule."""

    operands: list[MeritOperand]
    bytes: int
    bytesText: str
    minBytesText: str
    ratio: float
    workingSet: int
    workingSetText: str
    smemText: str
    flops: float | None
    flopsText: str
    flopsSource: str
    flopsExact: bool
    intensity: float | None
    computeDtype: str
    workingSetName: NotRequired[str]


class ChipFit(TypedDict):
    """The figures against one chip."""

    chip: str
    capacity: int
    capacityText: str
    capacityName: str
    fits: bool
    share: float | None
    peakText: str
    peakName: str
    bandwidthText: str
    ridge: float
    intensity: float | None
    bound: str
    attainableText: str
    secondsText: str
    notes: list[str]


class Schedules(TypedDict):
    """A value per schedule."""

    tpu: str
    gpu: str


class MeritBySchedule(TypedDict):
    """Figures of merit per schedule."""

    tpu: Merit
    gpu: Merit


class FitsBySchedule(TypedDict):
    """Chip fits per schedule."""

    tpu: list[ChipFit]
    gpu: list[ChipFit]


class SmemRow(TypedDict):
    """One allocation of a Mosaic GPU kernel's shared memory."""

    label: str
    kind: str
    shape: str
    stored: str
    transforms: str
    bytes: int
    bytesText: str
    depth: int
    atPeak: bool
    pipeline: int | None
    line: str


class SmemChip(TypedDict):
    """A Mosaic GPU kernel's shared memory against one chip."""

    chip: str
    limit: int
    limitText: str
    fits: bool
    share: float
    blocksPerSm: int
    note: str


class SmemModel(TypedDict):
    """A Mosaic GPU kernel's shared memory: each allocation, the total, per chip."""

    rows: list[SmemRow]
    total: int
    totalText: str
    summary: str
    chips: list[SmemChip]


class CopyRow(TypedDict):
    """One line of a Mosaic GPU kernel moving data between GMEM and the chip."""

    kind: str
    operand: str
    smem: str
    window: str
    bytesEachText: str
    copies: int
    totalText: str
    exact: bool
    multicast: int
    pipeline: int | None
    line: str


class MmaRow(TypedDict):
    """One matrix product of a Mosaic GPU kernel."""

    kind: str
    shape: str
    dtypes: str
    lhs: str
    layout: str
    count: int
    flopsText: str
    exact: bool
    line: str


class PipelineBuffer(TypedDict):
    """One operand of a pipeline: its window and SMEM buffer."""

    operand: str
    window: str
    transforms: str
    bytesText: str


class PipelineRow(TypedDict):
    """One pipeline of a Mosaic GPU kernel."""

    index: int
    kind: str
    slots: int
    steps: int
    runs: float
    buffers: list[PipelineBuffer]
    line: str


class MosaicWork(TypedDict):
    """A Mosaic GPU kernel's work and traffic over its grid."""

    flopsText: str
    mmaFlopsText: str
    bytesText: str
    exact: bool


class MosaicGpuModel(TypedDict):
    """What a Mosaic GPU kernel does: its grid, SMEM, copies, products and pipelines.

    Each `...Missing` says in one sentence why a part is empty ("" when it is not).
    """

    ctas: int
    grid: list[int]
    axisNames: list[str]
    threads: int
    steps: int
    copyMap: bool
    smem: SmemModel
    copies: list[CopyRow]
    copiesMissing: str
    mmas: list[MmaRow]
    mmasMissing: str
    pipelines: list[PipelineRow]
    pipelinesMissing: str
    work: MosaicWork
    persistent: str
    notices: list[str]


class TilesKernel(TypedDict):
    """One kernel's tile map, figures of merit and the chips to compare them with.

    `mosaic`: for a Mosaic GPU kernel, what it does (or `mosaicError`, why that could
    not be read). `accessesNote`: when element-level accesses are not recorded for
    this kernel, why (the tab then asks for none).
    """

    index: int
    name: str
    grid: list[int]
    axisNames: list[str]
    programs: int
    stride: list[int]
    shown: list[int]
    shownPrograms: int
    table: bool
    schedule: Literal["tpu", "gpu"]
    semantics: list[str] | None
    order: Schedules
    operands: list[TilesOperand]
    merit: MeritBySchedule
    fits: FitsBySchedule
    defaultChip: Schedules
    notices: list[str]
    dtypes: list[str]
    mosaic: NotRequired[MosaicGpuModel]
    mosaicError: NotRequired[str]
    accessesNote: NotRequired[str]


class TilesKernelError(TypedDict):
    """A kernel without a tile map, and why."""

    index: int
    name: str
    error: str


class TilesPane(TypedDict):
    """The Tiles tab."""

    kernels: list[TilesKernel | TilesKernelError]


class AccessesRequest(TypedDict):
    """Asks for the element-level loads and stores of one program."""

    kind: Literal["accesses"]
    kernel: int
    program: list[int]


class AccessSummary(TypedDict):
    """What one program did to one buffer, counted."""

    accesses: int
    untouched: int
    readTwice: int
    writtenTwice: int
    maskedLanes: int
    outsideLanes: int
    elements: int


class AccessMapModel(TypedDict):
    """One buffer's reads, writes and masked lanes, ready to draw."""

    label: str
    role: str
    operand: int | None
    shape: list[int]
    type: str
    origin: list[int]
    box: list[int]
    pool: list[int]
    reads: EncodedArray
    writes: EncodedArray
    masked: EncodedArray
    inside: EncodedArray
    summary: AccessSummary


class AccessRow(TypedDict):
    """One load or store."""

    kind: str
    ref: int
    primitive: str
    line: int
    #: Where the access is written, named as the other views name it ("Cell [3]").
    file: str
    lanes: int
    masked: int
    outside: int
    bbox: list[list[int]]


class AccessesReply(TypedDict):
    """Every buffer's access map and the loads and stores of one program."""

    kernel: str
    program: list[int]
    refs: list[AccessMapModel]
    accesses: list[AccessRow]
    accessCount: int
    notices: list[str]
    complete: bool


# ---------------------------------------------------------------------------------
# Run tab.


class LeakModel(TypedDict):
    """Output tiles that depend on padding or never-written memory."""

    title: str
    text: str
    kernel: str
    output: str
    source: str
    cause: str
    tiles: list[list[int]]
    where: Location | None


class OutOfBoundsModel(TypedDict):
    """A slice or block that reaches outside its ref."""

    text: str
    kernel: str
    ref: str
    access: str
    cause: str
    programs: list[list[int]]
    programCount: int
    where: Location | None


class RaceCheckModel(TypedDict):
    """A kernel run in another order its backend allows."""

    text: str
    kernel: str
    backend: str
    confirmed: bool
    tiles: list[tuple[str, list[int]]]


class InterpreterRaceModel(TypedDict):
    """A race JAX's Mosaic GPU interpreter found: two unordered accesses of a buffer."""

    text: str
    kernel: str
    memory: str
    where: Location | None
    otherWhere: Location | None


class OutputRow(TypedDict):
    """One output of the run."""

    path: str
    type: str
    preview: str
    min: str
    max: str
    nan: int
    inf: int


class HeatmapModel(TypedDict):
    """Mismatches per output block, laid out in 2-D (pooled when large)."""

    output: str
    kernel: str
    operand: str
    shape: list[int]
    tileShape: list[int]
    tiles: list[int]
    rowLabel: str
    colLabel: str
    pool: list[int]
    perTile: int
    counts: list[list[int]]
    nonfinite: list[list[int]]
    badTiles: list[list[int]]
    badTileCount: int
    badPrograms: list[list[int]]
    badProgramCount: int
    grid: list[int]
    pattern: str
    nan: int
    inf: int
    referenceNonfinite: int
    note: str
    #: The heatmap in one sentence.
    description: str


class ComparisonModel(TypedDict):
    """The outputs against the reference."""

    ok: bool
    maxAbs: str
    maxRel: str
    rtol: str
    atol: str
    mismatched: int
    problem: str
    #: "✓ matches the reference" or "✗ does not match the reference".
    verdict: str
    #: The errors (or the problem) in one sentence.
    detail: str
    tiles: list[HeatmapModel]


class RunResultModel(TypedDict):
    """How and where the program ran, its outputs and the check."""

    backend: str
    mode: str
    seconds: str
    note: str
    inputs: str
    notices: list[str]
    leaks: list[LeakModel]
    outOfBounds: list[OutOfBoundsModel]
    raceChecks: list[RaceCheckModel]
    interpreterRaces: list[InterpreterRaceModel]
    outputs: list[OutputRow]
    comparison: ComparisonModel | None


class RunPane(TypedDict):
    """The Run tab: a result, or why there is none."""

    result: RunResultModel | None
    message: str


# ---------------------------------------------------------------------------------
# Diff tab: two inspections side by side (`pallaslab.diff`, `%%kernel --diff`).


class DiffSource(TypedDict):
    """A source line an IR line comes from, with its text (shown on hover)."""

    label: str
    line: int
    text: str


class DiffRow(TypedDict):
    """One row of two aligned texts; a `gap` row stands for equal lines not drawn."""

    op: Literal["equal", "replace", "delete", "insert", "gap"]
    aLine: int | None
    bLine: int | None
    aText: str
    bText: str
    aSources: list[DiffSource]
    bSources: list[DiffSource]
    #: Equal lines a gap row stands for (0 for other rows).
    hidden: int


class DiffIr(TypedDict):
    """One IR of both sides, aligned: the changed rows with a few equal ones around."""

    title: str
    aTarget: str
    bTarget: str
    language: str
    #: How much changed, in one line ("Triton IR: 3 changed, 1 added of 40 lines").
    description: str
    aError: str
    bError: str
    changed: int
    lines: int
    rows: list[DiffRow]
    #: Changed rows not drawn (past the pane's budget).
    more: int


class DiffFigure(TypedDict):
    """One figure on both sides, as people read it."""

    name: str
    a: str
    b: str
    #: "+60%", "-12 points", "" when unchanged or not a number.
    change: str
    changed: bool
    #: Whether b is better or worse than a (for figures with a better direction).
    verdict: Literal["better", "worse", ""]
    note: str


class DiffGroup(TypedDict):
    """Figures of one kind: config, kernel, resources, figures of merit, check, timing."""

    id: str
    title: str
    figures: list[DiffFigure]
    #: Unchanged figures left out (the config and kernel groups list changes only).
    unchanged: int


class DiffPane(TypedDict):
    """The Diff tab: the summary line, the figures by group, the IRs side by side."""

    aName: str
    bName: str
    aKernel: str
    bKernel: str
    chip: str
    summary: str
    #: "better" when b fixes a (its check went from differs to matches), "worse" for
    #: a regression, "": the summary's colour.
    verdict: Literal["better", "worse", ""]
    groups: list[DiffGroup]
    irs: list[DiffIr]
    notes: list[str]


# ---------------------------------------------------------------------------------
# Every pane, request and reply, and the messages that carry them.

Pane = OverviewPane | SourcePane | JaxprPane | TilesPane | IrPane | RunPane | DiffPane | ErrorPane
TabRequestBody = (
    HintsRequest | FitRequest | AccessesRequest | IrLowerRequest | IrChunkRequest | TextRequest
)
TabReply = (
    HintsModel
    | FitModel
    | AccessesReply
    | IrLoweredReply
    | IrChunkReply
    | IrFailedReply
    | TextHeaderReply
    | TextChunkReply
    | ErrorPane
)


class TabRequestMessage(TypedDict):
    """A tab's request, from the widget to Python (a custom widget message)."""

    tab: PaneId
    id: int
    body: TabRequestBody


class TabReplyMessage(TypedDict):
    """Python's reply, carrying the request's id."""

    tab: PaneId
    id: int | None
    reply: TabReply


# ---------------------------------------------------------------------------------
# The live benchmark view's traits.


class BenchRoof(TypedDict):
    """One chip's roof for the sweep's dtype."""

    name: str
    peak_flops: float
    peak_bandwidth: float
    peak_label: str


class BenchPlan(TypedDict):
    """What a sweep or a tuning run is about to measure."""

    title: str
    kind: Literal["sweep", "tune"]
    total: int
    x_label: str
    note: str
    backend: str
    device: str
    chip: str
    peak_flops: float
    peak_bandwidth: float
    peak_label: str
    #: Measurements of `total` that are no config: a tuning run's XLA baseline.
    baseline: int
    #: What the run will not do, and why (no XLA baseline for a value reference ...).
    notices: list[str]
    #: Every chip of the hardware table as a roof, for the roofline's chip picker.
    roofs: list[BenchRoof]


class BenchRow(TypedDict):
    """One measurement: one implementation at one point (None: not measured)."""

    impl: str
    point: str
    size: int | float | str | None
    x: float | None
    config: dict[str, int | float | str | bool | None]
    status: str
    error: str
    median_ms: float | None
    p25_ms: float | None
    p75_ms: float | None
    min_ms: float | None
    reps: int
    compile_ms: float | None
    flops: float | None
    bytes: float | None
    tflops: float | None
    gbps: float | None
    pct_of_peak: float | None
    correct: bool | None
    max_abs_err: float | None
    mode: str
    note: str
    method: str
    cached: bool
    #: The chip kind and the worker that measured it, on a cluster ("" locally).
    chip: str
    worker: str
    #: How often it was tried again after its worker was lost, and why.
    retries: int
    retry_reason: str


class BenchWorker(TypedDict):
    """One worker of a cluster sweep: what it measured and what it measures now."""

    worker: str
    chip: str
    done: int
    #: The config it is timing now ("" when idle).
    running: str
    #: Whether it was lost (its configs are tried again elsewhere).
    lost: bool


class BenchProgress(TypedDict):
    """How far a run is."""

    done: int
    total: int
    state: str
    message: str
    elapsedS: NotRequired[float]
    etaS: NotRequired[float | None]
    current: NotRequired[str]
    #: On a cluster: one entry per worker that has timed a config.
    workers: NotRequired[list[BenchWorker]]
    #: On a cluster: configs compiled on CPU workers so far (and how many to go).
    compiled: NotRequired[int]


BenchMetric = Literal["time", "tflops", "gbps", "roofline", "table"]
