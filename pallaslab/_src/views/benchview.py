"""The live benchmark view: a progress bar and a plot that grows as points finish.

`BenchView` is an anywidget that is also a sweep observer: `pallaslab.bench`,
`pallaslab.tune` and the magic's `--bench` / `--tune` call its `begin`, `update` and
`end`, which only set synced traits (so it is tested at the widget-state level).
The browser draws time, TFLOP/s or GB/s vs size (or config), Pallas vs XLA, and a
roofline, switchable in place. The static fallback is a matplotlib PNG and a table.
No JAX here.
"""

from __future__ import annotations

import functools
import html
import math
import time
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from pallaslab._src.bench.configs import config_label
from pallaslab._src.views import benchplot, bundle, heatmap

if TYPE_CHECKING:
    from pallaslab._src.bench.live import Plan
    from pallaslab._src.bench.tune import TuneResult
    from pallaslab._src.records.checks import CheckResult


def _bench_esm() -> str:
    """The benchmark view's ES module (`labextension/src/widget/bench.ts`, built)."""
    return bundle.module("bench")


@functools.cache
def _bench_css() -> str:
    return bundle.stylesheet("inspector") + bundle.stylesheet("bench")


class BenchView(anywidget.AnyWidget):
    """Live progress and plots of a sweep or tuning run.

    Traits (synced): `plan` (what is measured, where, against which roof), `rows`
    (one dict per measurement, in order), `progress` (done, total, state, message,
    elapsed and remaining seconds), `metric` ("time", "tflops", "gbps", "roofline"
    or "table"; the user switches it in the view). Typed in `views/contracts.py`
    (`BenchPlan`, `BenchRow`, `BenchProgress`, `BenchMetric`).
    """

    _esm = _bench_esm()
    _css = _bench_css()

    plan = traitlets.Dict().tag(sync=True)
    rows: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    progress = traitlets.Dict().tag(sync=True)
    metric = traitlets.Unicode("time").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            progress={"done": 0, "total": 0, "state": "waiting", "message": ""}, **kwargs
        )
        self._started = time.monotonic()

    # -- the observer protocol ----------------------------------------------------

    def begin(self, plan: Plan) -> None:
        """A sweep starts: shows its plan and an empty plot."""
        self._started = time.monotonic()
        self.plan = plan.to_json()
        self.rows = []
        # Throughput is what a GPU user wants to see; on CPU only time is honest.
        if plan.backend != "cpu" and self.metric == "time" and plan.kind == "sweep":
            self.metric = "tflops"
        self.progress = {
            "done": 0,
            "total": plan.total,
            "state": "running",
            "message": "",
            "elapsedS": 0.0,
            "etaS": None,
            "current": "",
        }

    def update(self, row: dict[str, Any], done: int) -> None:
        """One measurement finished: the plot grows by a point, the bar moves."""
        self.rows = [*self.rows, row]
        elapsed = time.monotonic() - self._started
        total = int(self.progress.get("total") or 0)
        eta = elapsed / done * (total - done) if done and total >= done else None
        self.progress = {
            **self.progress,
            "done": done,
            "elapsedS": round(elapsed, 2),
            "etaS": round(eta, 1) if eta is not None else None,
            "current": f"{row.get('impl', '')} {row.get('point', '')}".strip(),
        }

    def workers(self, states: list[dict[str, Any]], compiled: int) -> None:
        """On a cluster: what each worker has done and does now, and the compiles so far."""
        self.progress = {**self.progress, "workers": states, "compiled": compiled}

    def end(self, state: str, message: str) -> None:
        """The sweep ended (finished, interrupted or failed)."""
        self.progress = {
            **self.progress,
            "state": state,
            "message": message,
            "elapsedS": round(time.monotonic() - self._started, 2),
            "etaS": None,
        }

    # -- static fallback ----------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None:
            data["text/plain"] = summary_text(self.plan, self.rows, self.progress)
            data["text/html"] = static_html(self.plan, self.rows, self.progress)
        return bundle


class DisplayedBench:
    """An observer that displays a `BenchView` as a sweep begins.

    When the sweep ends it re-renders the output, so the static fallback (the PNG
    kept in saved notebooks) shows the final plot.
    """

    def __init__(self, view: BenchView | None = None) -> None:
        self.view = view or BenchView()
        self._handle: Any = None

    def begin(self, plan: Plan) -> None:
        """Displays the view."""
        from IPython.display import display  # noqa: PLC0415

        self.view.begin(plan)
        self._handle = display(self.view, display_id=True)

    def update(self, row: dict[str, Any], done: int) -> None:
        """Forwards to the view."""
        self.view.update(row, done)

    def workers(self, states: list[dict[str, Any]], compiled: int) -> None:
        """Forwards to the view."""
        self.view.workers(states, compiled)

    def end(self, state: str, message: str) -> None:
        """Forwards to the view and re-renders the output, so its static part is final."""
        self.view.end(state, message)
        if self._handle is not None:
            self._handle.update(self.view)


def live_observer() -> DisplayedBench | None:
    """The default observer in a Jupyter kernel (None elsewhere: terminals get text)."""
    try:
        from IPython import get_ipython  # noqa: PLC0415
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return None
    return DisplayedBench()


# -- text and HTML ---------------------------------------------------------------


def _number(value: Any, digits: int = 4) -> str:
    if not isinstance(value, int | float) or (
        isinstance(value, float) and not math.isfinite(value)
    ):
        return "-"
    return f"{value:.{digits}g}"


def progress_count(plan: dict[str, Any], progress: dict[str, Any]) -> str:
    """`3/8`; for a tuning run, configs only: `4/4 configs` (the XLA baseline is extra)."""
    done, total = int(progress.get("done") or 0), int(progress.get("total") or 0)
    if plan.get("kind") != "tune":
        return f"{done}/{total}"
    configs = max(0, total - int(plan.get("baseline") or 0))
    return f"{min(done, configs)}/{configs} config{'' if configs == 1 else 's'}"


def summary_text(plan: dict[str, Any], rows: list[dict[str, Any]], progress: dict[str, Any]) -> str:
    """A plain-text account: title, label, state, and one line per measurement."""
    lines = [
        f"{plan.get('title', 'benchmark')}: {progress.get('state', '')} "
        f"({progress_count(plan, progress)})"
    ]
    if plan.get("note"):
        lines.append(f"  {plan['note']}")
    lines += [f"  note: {notice}" for notice in plan.get("notices") or ()]
    for row in rows:
        if row.get("status", "ok") == "ok":
            what = f"{_number(row.get('median_ms'))} ms"
            if isinstance(row.get("tflops"), float) and plan.get("backend") != "cpu":
                what += f", {_number(row.get('tflops'), 3)} TFLOP/s"
        else:
            first = str(row.get("error") or "").splitlines()[:1]
            what = f"{row.get('status')}: {first[0] if first else ''}"
        cached = " (cached)" if row.get("cached") else ""
        where = f" on {row['chip']}" if row.get("chip") else ""
        retried = f" (retried: {row.get('retry_reason', '')})" if row.get("retries") else ""
        lines.append(
            f"  {row.get('impl', ''):6} {row.get('point', '')}{where}: {what}{cached}{retried}"
        )
    lines += [f"  {line}" for line in worker_lines(progress)]
    lines += [f"  {line}" for line in speedups(plan, rows)]
    if progress.get("message"):
        lines.append(f"  {progress['message']}")
    return "\n".join(lines)


def worker_lines(progress: dict[str, Any]) -> list[str]:
    """On a cluster, one line per worker: its chip kind, configs done, what it runs now."""
    lines = []
    for state in progress.get("workers") or []:
        doing = (
            "lost (its configs are tried again elsewhere)"
            if state.get("lost")
            else f"timing {state['running']}"
            if state.get("running")
            else "idle"
        )
        lines.append(
            f"{state.get('worker', '')} ({state.get('chip', '')}): "
            f"{state.get('done', 0)} done, {doing}"
        )
    return lines


def speedups(plan: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Pallas vs XLA per point ("at 1024: 1.08x faster"); never from CPU interpret timings."""
    if plan.get("backend") == "cpu" or plan.get("kind") != "sweep":
        return []
    found = []
    for point in dict.fromkeys(r.get("point") for r in rows):
        times = {
            r.get("impl"): r.get("median_ms")
            for r in rows
            if r.get("point") == point and r.get("status", "ok") == "ok"
        }
        pallas, xla = times.get("pallas"), times.get("xla")
        if isinstance(pallas, float) and isinstance(xla, float) and pallas > 0:
            ratio = xla / pallas
            verdict = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
            found.append(f"Pallas vs XLA at {point}: {verdict} (median times)")
    return found


_COLUMNS = (
    ("impl", "impl"),
    ("point", "point"),
    ("median_ms", "median ms"),
    ("p25_ms", "p25"),
    ("p75_ms", "p75"),
    ("tflops", "TFLOP/s"),
    ("gbps", "GB/s"),
    ("pct_of_peak", "% of peak"),
    ("compile_ms", "compile ms"),
    ("status", "status"),
)


# A cluster's columns, shown when some row has them.
_CLUSTER_COLUMNS = (("chip", "chip"), ("worker", "worker"), ("retries", "retried"))


def _cell(row: dict[str, Any], key: str) -> str:
    if key in ("impl", "point", "status", "chip", "worker"):
        return str(row.get(key, "")) + (
            " (cached)" if key == "status" and row.get("cached") else ""
        )
    if key == "retries":
        return f"{row['retries']}x: {row.get('retry_reason', '')}" if row.get("retries") else ""
    return _number(row.get(key))


def columns(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The table's columns: the usual ones, and a cluster's where some row has them."""
    extra = tuple(c for c in _CLUSTER_COLUMNS if any(row.get(c[0]) for row in rows))
    return _COLUMNS[:2] + extra + _COLUMNS[2:]


def static_html(plan: dict[str, Any], rows: list[dict[str, Any]], progress: dict[str, Any]) -> str:
    """Self-contained HTML (escaped): title, label, PNG plot, table."""
    parts = [
        "<div class='pallaslab-static' style='font-family:system-ui,sans-serif;font-size:13px'>",
        f"<div><b>pallaslab</b> {html.escape(str(plan.get('title', 'benchmark')))} — "
        f"{html.escape(str(progress.get('state', '')))} "
        f"({html.escape(progress_count(plan, progress))})</div>",
    ]
    if plan.get("note"):
        parts.append(f"<p style='color:#8a5000'><b>{html.escape(plan['note'])}</b></p>")
    parts.extend(
        f"<p class='pl-bench-notice' style='color:#59636e'>{html.escape(str(notice))}</p>"
        for notice in plan.get("notices") or ()
    )
    if rows:
        try:
            image = benchplot.png_base64(plan, rows)
            parts.append(f"<img alt='benchmark plot' src='data:image/png;base64,{image}'>")
        except Exception as error:  # a plot must never hide the numbers
            parts.append(
                f"<p>No plot: {html.escape(type(error).__name__)}: {html.escape(str(error))}</p>"
            )
        shown = columns(rows)
        head = "".join(f"<th>{html.escape(title)}</th>" for _, title in shown)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(_cell(row, key))}</td>" for key, _ in shown)
            + "</tr>"
            for row in rows
        )
        parts.append(f"<table style='border-collapse:collapse'><tr>{head}</tr>{body}</table>")
        parts.extend(
            f"<p><b>{html.escape(str(row.get('point', '')))}</b>: "
            f"{html.escape(str(row.get('status', '')))}: "
            f"<code>{html.escape(str(row['error']))}</code></p>"
            for row in rows
            if row.get("error")
        )
    parts.extend(f"<p>{html.escape(line)}</p>" for line in worker_lines(progress))
    parts.extend(f"<p>{html.escape(line)}</p>" for line in speedups(plan, rows))
    if plan.get("peak_label"):
        parts.append(f"<p style='color:#59636e'>Roof: {html.escape(plan['peak_label'])}</p>")
    if progress.get("message"):
        parts.append(f"<p>{html.escape(str(progress['message']))}</p>")
    parts.append("</div>")
    return "".join(parts)


# -- bench records (CheckResult, TuneResult) as Jupyter output ------------------------


def record_bundle(record: Any, **_: Any) -> dict[str, Any] | None:
    """Static HTML and text for a bench record, by its type."""
    kind = type(record).__name__
    if kind == "CheckResult":
        return {"text/plain": record.summary(), "text/html": check_html(record)}
    if kind == "TuneResult":
        return {"text/plain": record.summary(), "text/html": tune_html(record)}
    return None


def check_html(result: CheckResult) -> str:
    """A check's verdict per point, with a heatmap of the blocks that differ."""
    from pallaslab._src.records.checks import describe_point  # noqa: PLC0415 - plain data only

    colour = "#1a7f37" if result.ok else "#cf222e"
    verdict = "✓ matches the reference" if result.ok else "✗ does not match the reference"
    parts = [
        "<div class='pallaslab-static' style='font-family:system-ui,sans-serif;font-size:13px'>",
        f"<div><b>pallaslab</b> check of <code>{html.escape(result.name)}</code>: "
        f"<b style='color:{colour}'>{verdict}</b></div><ul>",
    ]
    parts += [f"<li>{html.escape(describe_point(p))}</li>" for p in result.points]
    parts.append("</ul>")
    for point in result.failing[:1]:
        if point.comparison is None:
            continue
        for data in heatmap.differing(point.comparison.tiles):
            parts.append(
                f"<p>{html.escape(point.label)}: {html.escape(heatmap.describe(data))}</p>"
            )
            parts.append(heatmap.static_svg(data))
            if data["note"]:
                parts.append(f"<p style='color:#59636e'>{html.escape(data['note'])}</p>")
    parts.append("</div>")
    return "".join(parts)


def tune_html(result: TuneResult) -> str:
    """A tuning run: the best config, the plot, the table, and why configs failed."""
    rows = [r.to_json() for r in result.rows]
    progress = {"state": result.state, "done": len(rows), "total": len(rows), "message": ""}
    best = result.best_row
    lead = (
        f"<p>Best: <b>{html.escape(best.point)}</b> ({best.median_ms:.4g} ms)</p>"
        if best is not None
        else "<p><b>No config ran and matched the reference.</b></p>"
    )
    if result.chips:  # a cluster's run: each chip kind has its best
        lead = "".join(
            f"<p>Best on {html.escape(chip)}: <b>{html.escape(config_label(config))}</b></p>"
            if config is not None
            else f"<p>On {html.escape(chip)}: <b>no config ran and matched the reference.</b></p>"
            for chip, config in result.best_by_chip.items()
        )
    notices = "".join(f"<p style='color:#59636e'>{html.escape(n)}</p>" for n in result.notices)
    return lead + static_html(result.plan.to_json(), rows, progress) + notices
