"""A fast, faithful CPU emulator for `pallas_call`.

Pallas' interpreter runs a kernel's grid one program at a time. The emulator runs the
same discharged kernel body (so the same arithmetic, masks and padding), but decides per
grid axis, from the evaluated index maps and the body's effects, whether the axis's
programs are independent:

- An axis whose programs write disjoint blocks (and share no scratch state) is
  *batched*: every block its programs read is gathered at once with the index maps,
  the body runs once under `jax.vmap`, and the blocks written are scattered back.
- An axis along which programs revisit a block, or carry scratch state, runs
  *sequentially* in a `lax.scan`, in the grid's order (the order Pallas' interpreter
  and a TPU core use).

Batching changes no program's arithmetic and preserves the order of the programs that
touch any one block, so results match `interpret=True`.

The same machinery runs a grid in other orders (seeded permutations in "waves" of
programs that read the same state, as concurrent programs would), to confirm races
dynamically, and with padding and unwritten buffers filled with other values, to find
which output tiles depend on them.

What the emulator does not cover (DMAs, semaphores, remote copies, dynamic grids ...)
goes to Pallas' own interpreter with a one-line notice.
"""

from pallaslab._src.core.emulator.blocks import fill_value as fill_value
from pallaslab._src.core.emulator.hook import install as install
from pallaslab._src.core.emulator.hook import lowering_impl as lowering_impl
from pallaslab._src.core.emulator.plans import Plan as Plan
from pallaslab._src.core.emulator.plans import analyse as analyse
from pallaslab._src.core.emulator.plans import check_key as check_key
from pallaslab._src.core.emulator.plans import clamped_starts as clamped_starts
from pallaslab._src.core.emulator.plans import iter_plans as iter_plans
from pallaslab._src.core.emulator.plans import make_plan as make_plan
from pallaslab._src.core.emulator.plans import plan_for_site as plan_for_site
from pallaslab._src.core.emulator.requests import EMULATE as EMULATE
from pallaslab._src.core.emulator.requests import INTERPRET as INTERPRET
from pallaslab._src.core.emulator.requests import EmulationNotice as EmulationNotice
from pallaslab._src.core.emulator.requests import Mode as Mode
from pallaslab._src.core.emulator.requests import Request as Request
from pallaslab._src.core.emulator.requests import kernel_key as kernel_key
from pallaslab._src.core.emulator.runner import ProbeResult as ProbeResult
from pallaslab._src.core.emulator.runner import run_call as run_call
from pallaslab._src.core.emulator.runner import run_probed as run_probed
from pallaslab._src.core.emulator.schedules import Schedule as Schedule
from pallaslab._src.core.emulator.schedules import grid_schedule as grid_schedule
from pallaslab._src.core.emulator.schedules import permuted_schedule as permuted_schedule
from pallaslab._src.core.emulator.wrap import emulate as emulate
from pallaslab._src.core.emulator.wrap import scope as scope
