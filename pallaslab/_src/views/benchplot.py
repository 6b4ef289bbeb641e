"""Static plots of a sweep or a tuning run (matplotlib's Agg canvas): for saved notebooks.

The live widget draws in the browser; these PNGs are the fallback that stays in a
saved or exported notebook. No JAX here: the inputs are the rows' plain dicts.
Figures are drawn on a `Figure` of their own, never through pyplot: the user's
backend (and every later `plt.show()`) stays as it was.
"""

from __future__ import annotations

import base64
import io
import math
import warnings
from collections.abc import Sequence
from typing import Any

COLOURS = {"pallas": "#1976d2", "xla": "#bc4c00"}
METRICS = {
    "time": ("median_ms", "time (ms, median; bars: IQR)"),
    "tflops": ("tflops", "TFLOP/s"),
    "gbps": ("gbps", "GB/s"),
}


def png(plan: dict[str, Any], rows: Sequence[dict[str, Any]], metric: str = "time") -> bytes:
    """The metric vs size (or config), Pallas vs XLA, and the roofline when a chip is known."""
    # Only when a static plot is asked for. `savefig` draws on an Agg canvas of the
    # figure's own: matplotlib.use() would switch the whole session's backend.
    from matplotlib.figure import Figure  # noqa: PLC0415

    show_roof = bool(plan.get("chip")) and plan.get("backend") != "cpu"
    figure = Figure(figsize=(10 if show_roof else 6, 3.6), dpi=80, layout="constrained")
    axes = figure.subplots(1, 2 if show_roof else 1, squeeze=False)[0]
    _metric_axes(axes[0], plan, rows, metric)
    if show_roof:
        _roofline_axes(axes[1], plan, rows)
    if plan.get("note"):
        figure.suptitle(f"{plan.get('title', '')}\n{plan['note']}", fontsize=9, color="#8a5000")
    else:
        figure.suptitle(str(plan.get("title", "")), fontsize=10)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # Long config labels can leave constrained layout no room; the plot still reads.
        warnings.filterwarnings("ignore", "constrained_layout not applied", UserWarning)
        figure.savefig(buffer, format="png")
    return buffer.getvalue()


def png_base64(plan: dict[str, Any], rows: Sequence[dict[str, Any]], metric: str = "time") -> str:
    """`png` as base64 text, for an `<img src="data:...">`."""
    return base64.b64encode(png(plan, rows, metric)).decode("ascii")


def _metric_axes(
    ax: Any, plan: dict[str, Any], rows: Sequence[dict[str, Any]], metric: str
) -> None:
    key, label = METRICS.get(metric, METRICS["time"])
    measured = [r for r in rows if isinstance(r.get(key), int | float)]
    categorical = plan.get("kind") == "tune" or any(r.get("x") is None for r in measured)
    points = list(
        dict.fromkeys(
            r["point"] for r in rows if r.get("impl") != "xla" or plan.get("kind") != "tune"
        )
    )
    # One point (a sweep over "the cell's inputs"): bars, not an axis of sizes.
    single = plan.get("kind") != "tune" and len(points) == 1
    categorical = categorical or single
    impls = list(dict.fromkeys(series_of(r) for r in measured))
    for impl in impls:
        mine = [r for r in measured if series_of(r) == impl]
        if single:
            _bars(ax, impls, impl, mine, key)
            continue
        if plan.get("kind") == "tune" and mine[0]["impl"] == "xla":
            chip = f" on {mine[0]['chip']}" if mine[0].get("chip") else ""
            for r in mine:
                ax.axhline(
                    r[key],
                    color=COLOURS.get(impl, _OTHER[impls.index(impl) % len(_OTHER)]),
                    linestyle="--",
                    label=f"XLA baseline{chip}",
                )
            continue
        xs = [points.index(r["point"]) if categorical else r["x"] for r in mine]
        ys = [r[key] for r in mine]
        colour = COLOURS.get(impl, _OTHER[impls.index(impl) % len(_OTHER)])
        if key == "median_ms":
            low = [r[key] - (r.get("p25_ms") or r[key]) for r in mine]
            high = [(r.get("p75_ms") or r[key]) - r[key] for r in mine]
            ax.errorbar(
                xs,
                ys,
                yerr=[low, high],
                marker="o",
                color=colour,
                label=impl,
                capsize=3,
                linestyle="none" if categorical else "-",
            )
        else:
            ax.plot(
                xs,
                ys,
                marker="o",
                color=colour,
                label=impl,
                linestyle="none" if categorical else "-",
            )
    failed = [r for r in rows if str(r.get("status", "ok")) != "ok"]
    for r in failed:
        if r["point"] in points:
            ax.annotate(
                "✗" if str(r["status"]).startswith("failed") else "≠",
                (points.index(r["point"]), 0),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="bottom",
                color="#cf222e",
                fontsize=12,
            )
    if categorical:
        ax.set_xticks(range(len(points)))
        # A config's "A=1, B=2" is drawn one name per line.
        ax.set_xticklabels([p.replace(", ", "\n") for p in points], fontsize=7)
    else:
        xs_all = [r["x"] for r in measured if r.get("x")]
        if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(str(plan.get("x_label", "size")))
    ys_all = [r[key] for r in measured if r[key] and r[key] > 0]
    if ys_all and max(ys_all) / min(ys_all) > 20:
        ax.set_yscale("log")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    if measured:
        ax.legend(fontsize=8)


# Colours of lines that are neither Pallas nor XLA alone (a cluster's chip kinds).
_OTHER = ("#2e7d32", "#6a1b9a", "#00838f", "#ad1457")


def series_of(row: dict[str, Any]) -> str:
    """A row's line: its implementation, and on a cluster its chip kind."""
    return f"{row['impl']} · {row['chip']}" if row.get("chip") else str(row["impl"])


def _bars(ax: Any, impls: list[str], impl: str, mine: list[dict[str, Any]], key: str) -> None:
    """One bar per implementation at the one point (IQR as error bars for times)."""
    width = 0.8 / len(impls)
    offset = (impls.index(impl) - (len(impls) - 1) / 2) * width
    ys = [r[key] for r in mine]
    errors = None
    if key == "median_ms":
        errors = [
            [r[key] - (r.get("p25_ms") or r[key]) for r in mine],
            [(r.get("p75_ms") or r[key]) - r[key] for r in mine],
        ]
    ax.bar(
        [offset] * len(mine),
        ys,
        width=width * 0.9,
        color=COLOURS.get(impl, "#555"),
        label=impl,
        yerr=errors,
        capsize=3,
    )


def _roofline_axes(ax: Any, plan: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    peak, bandwidth = float(plan.get("peak_flops") or 0), float(plan.get("peak_bandwidth") or 0)
    placed = [
        r
        for r in rows
        if isinstance(r.get("flops"), int | float)
        and isinstance(r.get("bytes"), int | float)
        and r["bytes"]
        and isinstance(r.get("median_ms"), int | float)
        and r["median_ms"] > 0
    ]
    intensities = [r["flops"] / r["bytes"] for r in placed] or [1.0]
    low = min(min(intensities) / 4, peak / bandwidth / 8 if bandwidth else 1)
    high = max(max(intensities) * 4, peak / bandwidth * 8 if bandwidth else 10)
    xs = [low * (high / low) ** (k / 64) for k in range(65)]
    ax.plot(
        xs,
        [min(peak, x * bandwidth) / 1e12 for x in xs],
        color="#333",
        label=f"{plan.get('chip')} roof",
    )
    for r in placed:
        intensity = r["flops"] / r["bytes"]
        achieved = r["flops"] / (r["median_ms"] / 1e3) / 1e12
        ax.scatter([intensity], [achieved], color=COLOURS.get(r["impl"], "#555"), zorder=3)
        pct = r.get("pct_of_peak")
        text = f"{r['impl']} {r['point']}" + (
            f" {pct:.0f}%" if isinstance(pct, int | float) and math.isfinite(pct) else ""
        )
        ax.annotate(
            text, (intensity, achieved), fontsize=6, xytext=(3, 3), textcoords="offset points"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
