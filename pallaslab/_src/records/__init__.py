"""The records layer: plain data, no JAX, nothing above it imported.

One module per family: `kernels` (a traced program's kernels, operands and sources),
`indexmap` (index maps as NumPy-evaluable expressions), `runs` (a run's outputs,
comparisons and findings), `checks` (a program checked against a reference),
`lowered` (IR texts, source maps, resources), `hints`, `diffs`, `feedback` (the
course's verdicts), `hardware` (published chip figures), `targets` (target names) and
`mosaic_gpu` (what a Mosaic GPU kernel allocates, copies and multiplies).
The records of kernels and runs are re-exported here, the ones most code reads.
"""

from pallaslab._src.records.kernels import ArraySpec as ArraySpec
from pallaslab._src.records.kernels import CostEstimate as CostEstimate
from pallaslab._src.records.kernels import Kernel as Kernel
from pallaslab._src.records.kernels import KernelWork as KernelWork
from pallaslab._src.records.kernels import Operand as Operand
from pallaslab._src.records.kernels import Role as Role
from pallaslab._src.records.kernels import SourceLocation as SourceLocation
from pallaslab._src.records.kernels import SourceMapEntry as SourceMapEntry
from pallaslab._src.records.kernels import short_dtype as short_dtype
from pallaslab._src.records.runs import Comparison as Comparison
from pallaslab._src.records.runs import InterpreterRace as InterpreterRace
from pallaslab._src.records.runs import Leak as Leak
from pallaslab._src.records.runs import OutOfBounds as OutOfBounds
from pallaslab._src.records.runs import OutputSummary as OutputSummary
from pallaslab._src.records.runs import RaceCheck as RaceCheck
from pallaslab._src.records.runs import RunResult as RunResult
from pallaslab._src.records.runs import TileMismatch as TileMismatch
