"""`pytest --pallaslab`'s work: every kernel a test suite runs, captured once and checked.

Modules: `decisions` (what is checked, decided before anything runs, with the reason),
`session` (`Sanitizer`: observing lowered kernels, capturing their first run, checking
after each test), `verify` (one captured program checked: the emulator against the
test's result, then the emulator's checks), `interpreted` (a kernel the emulator does
not model, checked in JAX's own interpreter with its race detector), `findings` (what
the emulator's checks found, as findings at source lines).
"""

from pallaslab._src.core.sanitizer.session import Sanitizer as Sanitizer
from pallaslab._src.core.sanitizer.session import SanitizerOptions as SanitizerOptions
from pallaslab._src.core.sanitizer.session import checked_names as checked_names
