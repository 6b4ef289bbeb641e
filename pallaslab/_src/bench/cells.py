"""Benchmarks and tuning of a `%%kernel` cell: what `--bench` and `--tune` do.

No IPython here: the magic passes the cell's inspection (or its text and namespace)
and an observer that draws, and gets back the table or the tuning result to keep.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from pallaslab._src.bench import plan, sweep, tune
from pallaslab._src.bench.live import Observer
from pallaslab._src.core import programs, running, session
from pallaslab._src.core.inspection import Inspection


def bench_cell(
    inspection: Inspection,
    ref: Any = None,
    *,
    interpret: bool = False,
    live: bool | Observer | None = None,
) -> pd.DataFrame:
    """`--bench`: the cell's call and its XLA baseline, timed on the cell's inputs.

    Args:
        inspection: The cell's inspection (a traced call).
        ref: The reference (`--ref`): a callable is timed under `jax.jit` as the XLA
            baseline and the call is checked against it; a value is not timed.
        interpret: Force Pallas' interpreter (`--interpret`).
        live: Progress and a live plot (see `pallaslab.bench`).

    Returns:
        The sweep's table: one row per implementation at the cell's inputs.
    """
    fn, args, kwargs = programs.example_call(inspection)
    point = sweep.Point("the cell's inputs", None, args, kwargs)
    baseline = ref if callable(ref) else None
    with running.forced_interpret(interpret), running.chip_scope(inspection):
        title = inspection.name + (" vs XLA" if baseline is not None else "")
        # A value reference checked the run already; it has nothing to time: say so.
        options = sweep.SweepOptions(live=live, title=title, notices=plan.no_baseline_notice(ref))
        return sweep.bench_points(fn, [point], baseline, options)


def tune_cell(
    body: str,
    *,
    filename: str,
    call: str,
    space: Mapping[str, Sequence[Any]],
    namespace: Mapping[str, Any],
    name_source: Callable[[str], str | None],
    ref: Any = None,
    name: str = "",
    retune: bool = False,
    interpret: bool = False,
    live: bool | Observer | None = None,
    cluster: tune.Cluster | None = None,
) -> tune.TuneResult:
    """`--tune`: the cell run once per config, each checked against `ref` and timed.

    Args:
        body: The cell's text below the magic line.
        filename: The file name the cell was compiled under.
        call: The call on the magic line, e.g. `matmul(a, b)`.
        space: The values to try per name the cell reads.
        namespace: The user's namespace (copied for each config, never written).
        name_source: Names files in messages ("Cell line").
        ref: The reference (`--ref`).
        name: What is tuned (default: the call).
        retune: Measure cached configs again.
        interpret: Force Pallas' interpreter (`--interpret`).
        live: Progress and a live plot.
        cluster: A Ray cluster to tune on (`--cluster`): the cell still runs here, once
            per config, and each config's traced call is sent (see `pallaslab.tune`).

    Raises:
        session.CellError: When the cell does not compile, or never reads a name of
            `space`.
    """
    runner = session.config_runner(
        body,
        filename=filename,
        call=call,
        namespace=namespace,
        names=list(space),
        name_source=name_source,
        interpret=interpret,
    )

    def build(config: dict[str, Any]) -> tune.Built:
        fn, args, kwargs = runner(config)
        return tune.Built(fn, args, kwargs)

    with running.forced_interpret(interpret):
        return tune.tune_configs(
            build,
            space,
            ref=ref,
            name=name or call,
            options=tune.TuneOptions(
                retune=retune,
                live=live,
                cache_key={"forced_interpret": bool(interpret)},
                cluster=cluster,
            ),
        )
