"""The bench layer: timing, sweeps against XLA, rooflines and autotuning.

Imports the core (through its functions and records, never a traced program) and
geometry; never IPython or widgets. Modules: `harness` (timing one call the core
prepared), `roofline` (work, peaks, % of peak), `sweep` (`pallaslab.bench`), `tune`
(autotuning), `cache` (tuning results on disk), `cells` (what `%%kernel --bench` and
`--tune` do), `live` (how progress reaches a view). pandas is imported with the
first table.
"""
