"""The lowering hook: decides, for each pallas_call lowered, who runs it; and `install`.

Registered on import: wherever pallaslab's CPU lowering rule is installed, the emulator
is consulted.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from pallaslab._src.base import messages
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.emulator.plans import analyse, check_grid
from pallaslab._src.core.emulator.requests import EMULATE, EmulationNotice, Request
from pallaslab._src.core.emulator.runner import run_call
from pallaslab._src.core.jax_adapter import emulation as adapter


def lowering_impl(
    params: dict[str, Any], in_avals: Sequence[Any], auto: bool
) -> Callable[..., list[Any]] | str | None:
    """Called by the adapter's lowering rule for every pallas_call.

    Returns a function computing the call's outputs when the emulator runs it;
    "interpret" when Pallas' interpreter must; None to leave the call to JAX.
    """
    request = adapter.emulation_request()
    interpret = adapter.interpret_kind(adapter.requested_interpret(params))
    if request is None:
        # Without a request: kernels that did not ask for an interpreter, on a
        # backend that cannot compile them (pallaslab's CPU rule), are emulated.
        if interpret or not auto:
            return None
        request = EMULATE
    # Both run every program, one by one or batched: bounded before anything runs.
    check_grid(jax_adapter.written_grid(params))
    if not isinstance(request, Request) or request.mode == "interpret":
        return "interpret"
    call, plan = analyse(params, in_avals)
    if plan.fallback:
        # One line, no source line: the lowering happens far from the user's code.
        warnings.warn_explicit(plan.describe(), EmulationNotice, "pallaslab", 0)
        return "interpret"

    def impl(*args: Any) -> list[Any]:
        return run_call(call, plan, args, request)

    return impl


def _failed(params: dict[str, Any], error: BaseException) -> None:
    name = adapter.call_name(params)
    message = (
        f"{name}: ran in Pallas' interpreter, one program at a time, because pallaslab's "
        f"emulator failed ({messages.one_line(error)}; a bug in pallaslab, please report)."
    )
    warnings.warn_explicit(message, EmulationNotice, "pallaslab", 0)


# Registered on import: wherever pallaslab's CPU lowering rule is installed, the
# emulator is consulted.
jax_adapter.set_emulator(lowering_impl, _failed)


def install() -> str | None:
    """Lets pallas_calls run emulated on CPU (and interpreted where not covered).

    Returns a notice when this JAX cannot run the emulator.
    """
    jax_adapter.set_emulator(lowering_impl, _failed)
    notice = jax_adapter.install_cpu_interpret()
    if notice:
        return notice
    if adapter.UNAVAILABLE:
        return f"the emulator is unavailable: {adapter.UNAVAILABLE}"
    return None
