"""Benchmarking and checking: kernels against references, timings, sweeps, autotuning.

Layer: imports the core and geometry, never IPython or widgets. Modules: `tiles`
(where outputs differ, per output block; pure NumPy), `check` (kernel vs reference on
seeded inputs), `harness` (timing one callable), `roofline` (work, peaks, % of peak),
`sweep` (`pallaslab.bench`), `tune` (autotuning), `cache` (tuning results on disk),
`live` (how progress reaches a view). Nothing is imported here, so views can import
the plain-data modules without pulling in JAX.
"""
