"""Tile geometry: which elements each program's blocks cover. Pure NumPy, no JAX."""
