"""A kernel body instrumented for checks: what every load and store touched, lane by lane.

The emulator runs Pallas' discharged body (`program_body.py`). For its checks, this package
evaluates the kernel body itself, before discharge, on JAX values: each load and store
is done with Pallas' own discharge rule for it (so values are exactly those of
interpret mode) and, beside it, what the access touched is recorded, as JAX values, so
the whole thing runs vectorised over programs like the body does:

- per access site (one load or store of the source), whether an enabled lane lay
  outside its ref: a dynamic `pl.ds` or index that JAX clamps into the block, or a
  masked load or store whose enabled lanes leave the array;
- for chosen refs, which elements the program stored (programs that share an array
  write back only those, in GPU-like orders), and, across programs, the first and last
  program that stored or touched each element (races between programs that share an
  array, decided element by element);
- for masked loads without `other=`, the masked-out lanes replaced by a given value (a
  check varies it to see whether those lanes reach an output).

Loops, branches, calls and scoped buffers are followed: the refs and the records are
carried through `lax.scan`, `lax.while_loop` and `lax.switch` rebuilt over the bodies.
Private shapes read here are pinned in tests/test_jax_adapter.py.
"""

from pallaslab._src.core.jax_adapter.instrument.body import instrumented_body as instrumented_body
from pallaslab._src.core.jax_adapter.instrument.body import unavailable as unavailable
from pallaslab._src.core.jax_adapter.instrument.records import STATS as STATS
from pallaslab._src.core.jax_adapter.instrument.records import AccessSite as AccessSite
from pallaslab._src.core.jax_adapter.instrument.records import InstrumentedBody as InstrumentedBody
from pallaslab._src.core.jax_adapter.instrument.records import Probe as Probe
from pallaslab._src.core.jax_adapter.instrument.records import Probed as Probed
from pallaslab._src.core.jax_adapter.instrument.records import UnsupportedError as UnsupportedError
from pallaslab._src.core.jax_adapter.instrument.records import empty_stats as empty_stats
from pallaslab._src.core.jax_adapter.instrument.sites import uses_grid as uses_grid
