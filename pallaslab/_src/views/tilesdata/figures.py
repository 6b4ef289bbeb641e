"""Figures of merit and chip fits, as the Tiles tab shows them."""

from __future__ import annotations

from pallaslab._src.base import words
from pallaslab._src.geometry import merit
from pallaslab._src.views import fmt
from pallaslab._src.views.contracts import ChipFit, Merit


def merit_json(figures: merit.KernelMerit) -> Merit:
    found: Merit = {
        "operands": [
            {
                "index": o.index,
                "label": o.label,
                "role": o.role,
                "access": o.access,
                "reads": [o.reads_min, round(o.reads_mean, 3), o.reads_max],
                "transfers": o.transfers,
                "bytes": o.hbm_bytes,
                "bytesText": words.nbytes(o.hbm_bytes),
                "minBytesText": words.nbytes(o.min_bytes),
                "ratio": round(o.traffic_ratio, 3),
                "blockText": words.nbytes(o.block_bytes),
                "buffers": o.buffers,
            }
            for o in figures.operands
        ],
        "bytes": figures.hbm_bytes,
        "bytesText": words.nbytes(figures.hbm_bytes),
        "minBytesText": words.nbytes(figures.min_hbm_bytes),
        "ratio": round(figures.traffic_ratio, 3),
        "workingSet": figures.working_set_bytes,
        "workingSetText": words.nbytes(figures.working_set_bytes),
        "smemText": words.nbytes(figures.smem_bytes),
        "flops": figures.flops,
        "flopsText": si(figures.flops, "FLOP") if figures.flops is not None else "unknown",
        "flopsSource": figures.flops_source,
        "flopsExact": figures.flops_exact,
        "intensity": (
            round(figures.arithmetic_intensity, 3)
            if figures.arithmetic_intensity is not None
            else None
        ),
        "computeDtype": figures.compute_dtype,
    }
    if figures.working_set_name:
        found["workingSetName"] = figures.working_set_name
    return found


def fit_json(fit: merit.ChipFit, working_set: int) -> ChipFit:
    return {
        "chip": fit.chip,
        "capacity": fit.capacity_bytes,
        "capacityText": words.nbytes(fit.capacity_bytes),
        "capacityName": fit.capacity_name,
        "fits": fit.fits,
        "share": working_set / fit.capacity_bytes if fit.capacity_bytes else None,
        "peakText": si(fit.peak_flops, "FLOP/s"),
        "peakName": fit.peak_name,
        "bandwidthText": si(fit.bandwidth, "B/s"),
        "ridge": round(fit.ridge, 2),
        "intensity": round(fit.intensity, 3) if fit.intensity is not None else None,
        "bound": fit.bound,
        "attainableText": (
            si(fit.attainable_flops, "FLOP/s") if fit.attainable_flops is not None else ""
        ),
        "secondsText": duration(fit.seconds),
        "notes": list(fit.notes),
    }


def duration(seconds: float) -> str:
    """A short time, down to nanoseconds: `15 ns`, `3.2 us`, `1.50 ms`."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.3g} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return fmt.seconds(seconds)


def si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
