"""Whether an output matches its reference, element by element, within tolerances.

Pure NumPy: shared by the core's run comparison and the bench layer's check, which
locates the mismatches on the kernel's output blocks.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class ElementErrors:
    """An element-wise comparison of one output with its reference.

    Attributes:
        bad: True where the output is outside tolerance (NaN where the reference is
            not NaN counts as outside).
        diff: Absolute difference (0 where both are NaN or the same infinity; inf
            where exactly one is NaN).
        nonfinite: True where the output is NaN or Inf but the reference is finite.
        atol: The absolute tolerance used (scaled by the reference's magnitude).
        rtol: The relative tolerance used.
        max_abs_err: Largest absolute difference.
        max_rel_err: Largest difference relative to the reference's magnitude.
        nan_count: NaN elements in the output where the reference is not NaN.
        inf_count: Infinite elements in the output where the reference is finite.
        reference_nonfinite: NaN or Inf elements in the reference.
    """

    bad: np.ndarray
    diff: np.ndarray
    nonfinite: np.ndarray
    atol: float
    rtol: float
    max_abs_err: float
    max_rel_err: float
    nan_count: int
    inf_count: int
    reference_nonfinite: int


def element_errors(
    out: np.ndarray, ref: np.ndarray, rtol: float, atol_scale: float
) -> ElementErrors:
    """Compares `out` with `ref` element by element.

    The tolerance is `atol + rtol * |ref|` with `atol = atol_scale * max|ref|` (over
    the reference's finite elements), so outputs of
    kernels that accumulate are compared relative to the output's scale, not to
    each element's (a sum that cancels to near zero is not "wrong by 100%").
    """
    wide = np.complex128 if out.dtype.kind == "c" or ref.dtype.kind == "c" else np.float64
    got, want = out.astype(wide), ref.astype(wide)
    finite_ref = np.isfinite(want)
    magnitude = np.abs(want[finite_ref])
    atol = atol_scale * (float(magnitude.max()) if magnitude.size else 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - want)
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(got) & (got == want)
    diff = np.where(both_nan | same_inf, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    scale = np.abs(np.nan_to_num(want))
    bad = diff > atol + rtol * scale
    got_nonfinite = ~np.isfinite(got)
    nonzero = scale > 0
    return ElementErrors(
        bad=bad,
        diff=diff,
        nonfinite=got_nonfinite & finite_ref,
        atol=atol,
        rtol=rtol,
        max_abs_err=float(diff.max()) if diff.size else 0.0,
        max_rel_err=float((diff[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0,
        nan_count=int((np.isnan(got) & ~np.isnan(want)).sum()),
        inf_count=int((np.isinf(got) & finite_ref).sum()),
        reference_nonfinite=int((~finite_ref).sum()),
    )
