"""Checks that run a kernel with the emulator: leaks, out-of-bounds accesses and races.

Each runs one kernel alone, on the values it receives in the program, several times in
one compiled computation:

- `find_leaks` fills edge-block padding, outputs and scratch buffers first as Pallas'
  interpreter does (NaN, or the smallest integer) and then with an ordinary value;
  output tiles that change depend on memory no program should read. The lanes masked
  loads without `other=` turn off (undefined on a GPU) are varied the same way. Each
  source is then varied alone to say which one leaks.
- `find_out_of_bounds` runs the instrumented body for every program and reports the
  loads and stores that reached outside their ref: a dynamic slice JAX clamps into
  the block (so the emulator, like Pallas' interpreter, quietly used other elements),
  or masked lanes enabled outside the array.
- `confirm_races` runs the grid in seeded orders the backend allows (concurrent
  programs reading the same state, TPU cores not reading output blocks back) and
  compares with the grid's order.

Those programs are compiled through the compile cache, keyed on the kernel, the plan
and the variants: checking an unchanged kernel again (a cell run again) compiles
nothing.
"""

from pallaslab._src.core.checking.bounds import find_out_of_bounds as find_out_of_bounds
from pallaslab._src.core.checking.kernel import ALL_CHECKS as ALL_CHECKS
from pallaslab._src.core.checking.kernel import KernelFindings as KernelFindings
from pallaslab._src.core.checking.kernel import check_kernel as check_kernel
from pallaslab._src.core.checking.leaks import find_leaks as find_leaks
from pallaslab._src.core.checking.races import SEEDS as SEEDS
from pallaslab._src.core.checking.races import confirm_races as confirm_races
