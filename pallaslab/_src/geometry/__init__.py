"""Tile geometry: which elements each program's blocks cover. Pure NumPy, no JAX.

Modules: `blocks` (block offsets, blocks that miss their array), `tilemap` (`TileMap`:
blocks per program, read counts, HBM traffic per schedule) with `grid` (schedules,
open index grids), `operand_tiles` (one operand's blocks), `coverage` (programs per
element, compressed) and `copies` (a sequential schedule's copies), `merit` (figures of
merit against a chip), `accesses` (element-level loads and stores of one program,
summed per buffer).
"""
