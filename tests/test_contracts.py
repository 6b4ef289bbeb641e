"""Python and TypeScript agree on every message: the contracts, checked both ways.

`labextension/src/contracts.ts` is generated from `views/contracts.py` (the widget's
TypeScript is type-checked against it by tsc); here: the committed file is what
generation gives now, and real panes, replies and traits, as JSON, have exactly the
fields and types the contracts say (no key missing, none extra).
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal, NotRequired, Union, get_args, get_origin, is_typeddict

import pytest

import pallaslab
from pallaslab._src.bench import live, sweep
from pallaslab._src.views import contracts, contracts_ts
from pallaslab._src.views.benchview import BenchView
from pallaslab._src.views.header import Problem
from pallaslab._src.views.inspector import Inspector
from pallaslab._src.views.tabs import all_tabs
from tests import corpus


def violations(value: Any, annotation: Any, path: str = "$") -> list[str]:
    """Where a JSON value breaks a contract type (empty: it conforms)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is Any:
        return []
    if annotation is type(None) or annotation is None:
        return [] if value is None else [f"{path}: {value!r} is not null"]
    if annotation is bool:
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a bool"]
    if annotation in (int, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if annotation is int:
            ok = ok and float(value).is_integer()
        return [] if ok else [f"{path}: {value!r} is not {annotation.__name__}"]
    if annotation is str:
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not a string"]
    if origin is Literal:
        return [] if value in args else [f"{path}: {value!r} not in {args}"]
    if origin in (Union, types.UnionType):
        found = [violations(value, a, path) for a in args]
        return [] if any(not f for f in found) else min(found, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} is not a list"]
        return [e for k, v in enumerate(value) for e in violations(v, args[0], f"{path}[{k}]")]
    if origin is tuple:
        if not isinstance(value, list) or len(value) != len(args):
            return [f"{path}: {value!r} is not a {len(args)}-tuple"]
        return [
            e
            for k, (v, a) in enumerate(zip(value, args, strict=True))
            for e in violations(v, a, f"{path}[{k}]")
        ]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not an object"]
        return [e for k, v in value.items() for e in violations(v, args[1], f"{path}.{k}")]
    if is_typeddict(annotation):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not a {annotation.__name__}"]
        hints = typing.get_type_hints(annotation, include_extras=True)
        errors = [f"{path}: unexpected key {k!r}" for k in value if k not in hints]
        errors += [f"{path}: missing {k!r}" for k in annotation.__required_keys__ if k not in value]
        for key, hint in hints.items():
            if key in value:
                inner = get_args(hint)[0] if get_origin(hint) is NotRequired else hint
                errors += violations(value[key], inner, f"{path}.{key}")
        return errors
    raise TypeError(f"no check for {annotation!r}")


def check(value: Any, annotation: Any) -> None:
    """The value, as the kernel sends it (JSON), conforms to the contract type."""
    sent = json.loads(json.dumps(value))
    errors = violations(sent, annotation)
    assert not errors, errors[:10]


def test_the_typescript_contracts_are_generated_from_python():
    committed = contracts_ts.TARGET.read_text(encoding="utf-8")
    assert committed == contracts_ts.generate(), (
        "labextension/src/contracts.ts is stale: python -m pallaslab._src.views.contracts_ts"
    )


def test_the_generator_writes_each_form():
    assert contracts_ts.ts_type(list[contracts.SourceMapEntry]) == "SourceMapEntry[]"
    assert contracts_ts.ts_type(list[int | None]) == "(number | null)[]"
    assert contracts_ts.ts_type(dict[str, bool]) == "{ [key: string]: boolean }"
    assert contracts_ts.ts_type(tuple[str, int]) == "[string, number]"
    assert contracts_ts.ts_type(contracts.HintModel) == "IHintModel"
    assert contracts_ts.ts_type(Literal["a", "b'"]) == "'a' | 'b\\''"
    text = contracts_ts.generate()
    assert "export interface IHintsModel {\n" in text and "  error?: string;\n" in text
    assert "export type TabId = 'overview' | 'source'" in text


def test_the_tab_ids_are_the_contracts():
    assert {t.id for t in all_tabs()} == set(get_args(contracts.TabId))


@pytest.fixture(scope="module")
def checked():
    case = corpus.seed_matmul()
    inspection = pallaslab.inspect(case.fn, *case.args)
    return inspection.with_result(inspection.run(ref=case.reference))


PANES = {
    "overview": contracts.OverviewPane,
    "source": contracts.SourcePane,
    "jaxpr": contracts.JaxprPane,
    "tiles": contracts.TilesPane,
    "ir": contracts.IrPane,
    "run": contracts.RunPane,
}


def all_panes(inspection) -> dict[str, Any]:
    widget = Inspector(inspection)
    for tab in widget.tabs:
        widget.selected = tab["id"]
    return widget, widget.panes


@pytest.mark.parametrize(
    "make",
    [corpus.seed_matmul, corpus.row_softmax, corpus.scalar_prefetch, corpus.two_kernels],
    ids=lambda m: m.__name__,
)
def test_every_pane_conforms(make):
    case = make()
    inspection = pallaslab.inspect(case.fn, *case.args)
    widget, panes = all_panes(inspection)
    assert set(panes) == set(PANES)
    for tab, pane in panes.items():
        check(pane, PANES[tab])
    check(widget.header, contracts.Header)
    check(widget.tabs, list[contracts.TabInfo])


def test_a_run_with_a_check_conforms(checked):
    _, panes = all_panes(checked)
    check(panes["run"], contracts.RunPane)
    assert panes["run"]["result"]["comparison"]["ok"] is True
    widget = Inspector(checked, Problem("Cell line 7", "broke", "fix it", "error"))
    check(widget.problem, contracts.ProblemModel)


def test_a_differing_run_conforms():
    from tests.test_bench_views import wrong_last_row

    fn = wrong_last_row()
    inspection = pallaslab.inspect(fn, corpus.f32(64, 96))
    inspection = inspection.with_result(inspection.run(ref=lambda v: v))

    pane = Inspector(inspection).panes["run"]
    check(pane, contracts.RunPane)
    assert pane["result"]["comparison"]["tiles"]


def test_replies_conform(checked):
    widget = Inspector(checked)
    check(
        widget.request({"tab": "overview", "body": {"kind": "hints", "kernel": 0}}),
        contracts.HintsModel,
    )
    accesses = widget.request(
        {"tab": "tiles", "body": {"kind": "accesses", "kernel": 0, "program": [1, 2]}}
    )
    check(accesses, contracts.AccessesReply)
    header = widget.request({"tab": "jaxpr", "body": {"textKey": "kernel0", "chunk": -1}})
    check(header, contracts.TextHeaderReply)
    piece = widget.request({"tab": "jaxpr", "body": {"textKey": "kernel0", "chunk": 0}})
    check(piece, contracts.TextChunkReply)
    lower = {"type": "lower", "kernel": 0, "target": "stablehlo", "stage": ""}
    summary = widget.request({"tab": "ir", "body": lower})
    check(summary, contracts.IrLoweredReply)
    first = widget.request({"tab": "ir", "body": {**lower, "type": "chunk", "index": 0}})
    check(first, contracts.IrChunkReply)
    failed = widget.request({"tab": "ir", "body": {**lower, "target": "nope"}})
    check(failed, contracts.IrFailedReply)
    for bad in ({"tab": "nope", "body": {}}, {"tab": "tiles", "body": {"kind": "x"}}):
        check(widget.request(bad), contracts.ErrorPane)
    check(
        checked.lower("mosaic-tpu:v5e")
        and widget.request({"tab": "ir", "body": {**lower, "target": "mosaic-tpu:v5e"}}),
        contracts.IrLoweredReply,
    )


def test_sent_replies_carry_their_request(checked, monkeypatch):
    widget = Inspector(checked)
    sent = []
    monkeypatch.setattr(widget, "send", sent.append)
    widget._on_request(
        widget, {"tab": "jaxpr", "id": 7, "body": {"textKey": "kernel0", "chunk": -1}}, []
    )
    check(sent[-1], contracts.TabReplyMessage)
    request = {"tab": "overview", "id": 8, "body": {"kind": "hints", "kernel": 0}}
    check(request, contracts.TabRequestMessage)


def test_the_open_text_request_conforms(checked):
    from pallaslab._src.views.tabs import jaxpr

    check(jaxpr.text_of(checked, "program"), contracts.OpenTextRequest)


def test_the_static_ir_model_conforms(checked):
    from pallaslab._src.views.tabs import ir

    checked.lower("stablehlo")
    check(ir.static_model(checked), contracts.IrStatic)


def test_bench_traits_conform():
    view = BenchView()
    plan = live.Plan("matmul vs XLA", "sweep", 2, "size", live.CPU_LABEL, "cpu", "cpu")
    view.begin(plan)
    view.update(sweep.Row("pallas", "128", size=128, x=128.0, median_ms=1.5).to_json(), 1)
    view.update(sweep.Row("xla", "128", status="failed to compile", error="boom").to_json(), 2)
    view.end("finished", "")
    check(view.plan, contracts.BenchPlan)
    check(view.rows, list[contracts.BenchRow])
    check(view.progress, contracts.BenchProgress)
    assert view.metric in get_args(contracts.BenchMetric)


def test_the_checker_catches_what_typescript_would_not_expect():
    assert violations({"label": "x"}, contracts.Location) == ["$: missing 'line'"]
    assert violations({"label": "x", "line": 1, "col": 2}, contracts.Location) == [
        "$: unexpected key 'col'"
    ]
    assert violations({"label": "x", "line": "1"}, contracts.Location)
    assert violations([1, 2], contracts.SourceMapEntry)


def test_the_diff_view_conforms():
    from pallaslab._src.views.diffview import DiffView

    case = corpus.seed_matmul()
    small = pallaslab.inspect(corpus.make_seed_matmul(64, 64, 32), *case.args)
    large = pallaslab.inspect(corpus.make_seed_matmul(128, 128, 32), *case.args)
    view = DiffView(pallaslab.diff(small, large, resources=False))
    check(view.header, contracts.Header)
    check(view.tabs, list[contracts.TabInfo])
    check(view.pane_diff, contracts.DiffPane)
    assert view.pane_diff["irs"][0]["rows"]
