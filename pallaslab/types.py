"""The types pallaslab's public functions and methods return, for annotations and checks.

Every one is a frozen record of plain Python and NumPy values (an `Inspection` also
keeps its traced program, privately). Nothing here needs importing to use pallaslab:
`pallaslab.inspect(...)` returns an `Inspection` either way.

    from pallaslab.types import Inspection, Kernel, RunResult
"""

from pallaslab._src.bench.harness import Timing
from pallaslab._src.bench.live import Plan
from pallaslab._src.bench.sweep import Row
from pallaslab._src.bench.tune import TuneResult
from pallaslab._src.core.compile_cache import CompileCacheInfo
from pallaslab._src.core.emulator import EmulationNotice
from pallaslab._src.core.inspection import Inspection
from pallaslab._src.core.lowering.compare import LoweringComparison
from pallaslab._src.core.reproducer import Reproducer
from pallaslab._src.core.run_budget import RunBudget, RunStoppedError
from pallaslab._src.core.settings import Settings
from pallaslab._src.core.sharing import RaceReport
from pallaslab._src.geometry.accesses import AccessMap, BlockAccesses, ElementAccess, RefInfo
from pallaslab._src.geometry.merit import ChipFit, KernelMerit, OperandMerit
from pallaslab._src.geometry.mosaic_gpu import CopyMap, SmemBudget, SmemFit, SmemLine
from pallaslab._src.geometry.races import Conflict
from pallaslab._src.geometry.tilemap import Coverage, OperandTiles, TileMap
from pallaslab._src.records.checks import CheckPoint, CheckResult
from pallaslab._src.records.cost import CostTable, LineCost
from pallaslab._src.records.diffs import Delta, Diff, IrDiff, LinePair
from pallaslab._src.records.fit import Allocation, FitPart, FitTable, MemoryFit
from pallaslab._src.records.hardware import Gpu, Tpu
from pallaslab._src.records.hints import Hint
from pallaslab._src.records.indexmap import IndexMap
from pallaslab._src.records.kernels import (
    ArraySpec,
    CostEstimate,
    Kernel,
    KernelWork,
    Operand,
    SourceLocation,
)
from pallaslab._src.records.lowered import (
    BlockVmem,
    GpuResources,
    Lowered,
    LoweringError,
    Occupancy,
    Stage,
    TilingProblem,
    TpuResources,
)
from pallaslab._src.records.mosaic_gpu import (
    CopySite,
    CopyWindows,
    GpuPipeline,
    GpuTransform,
    MmaSite,
    MosaicGpuPlan,
    PersistentLoop,
    SmemAllocation,
    SmemScope,
)
from pallaslab._src.records.runs import (
    Comparison,
    InterpreterRace,
    Leak,
    OutOfBounds,
    OutputSummary,
    RaceCheck,
    RunResult,
    TileMismatch,
)
from pallaslab._src.records.targets import Target

__all__ = [
    "AccessMap",
    "Allocation",
    "ArraySpec",
    "BlockAccesses",
    "BlockVmem",
    "CheckPoint",
    "CheckResult",
    "ChipFit",
    "Comparison",
    "CompileCacheInfo",
    "Conflict",
    "CopyMap",
    "CopySite",
    "CopyWindows",
    "CostEstimate",
    "CostTable",
    "Coverage",
    "Delta",
    "Diff",
    "ElementAccess",
    "EmulationNotice",
    "FitPart",
    "FitTable",
    "Gpu",
    "GpuPipeline",
    "GpuResources",
    "GpuTransform",
    "Hint",
    "IndexMap",
    "Inspection",
    "InterpreterRace",
    "IrDiff",
    "Kernel",
    "KernelMerit",
    "KernelWork",
    "Leak",
    "LineCost",
    "LinePair",
    "Lowered",
    "LoweringComparison",
    "LoweringError",
    "MemoryFit",
    "MmaSite",
    "MosaicGpuPlan",
    "Occupancy",
    "Operand",
    "OperandMerit",
    "OperandTiles",
    "OutOfBounds",
    "OutputSummary",
    "PersistentLoop",
    "Plan",
    "RaceCheck",
    "RaceReport",
    "RefInfo",
    "Reproducer",
    "Row",
    "RunBudget",
    "RunResult",
    "RunStoppedError",
    "Settings",
    "SmemAllocation",
    "SmemBudget",
    "SmemFit",
    "SmemLine",
    "SmemScope",
    "SourceLocation",
    "Stage",
    "Target",
    "TileMap",
    "TileMismatch",
    "TilingProblem",
    "Timing",
    "Tpu",
    "TpuResources",
    "TuneResult",
]
