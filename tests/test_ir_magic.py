"""`%%kernel ... --target T`: the kernel lowered, the IR tab opened on it."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from tests.test_magic import ADD_CELL, run

# The vector-add cell and the runner of the magic's own tests.
CELL = ADD_CELL


def _run(ip, line, cell=CELL):
    return run(ip, line, cell)


pytestmark = pytest.mark.filterwarnings("ignore:Widget.widgets is deprecated")


def _widget(captured):
    import ipywidgets

    for output in captured.outputs:
        view = output.data.get("application/vnd.jupyter.widget-view+json")
        if view:
            return ipywidgets.Widget.widgets[view["model_id"]]
    raise AssertionError("no widget displayed")


def test_target_opens_the_ir_tab_with_cell_lines(ip):
    result, captured = _run(ip, "add(x, y) --no-run --target mosaic-tpu:v5e")
    assert result.success, result.error_in_exec
    widget = _widget(captured)
    assert widget.selected == "ir"
    assert widget.panes["ir"]["initial"] == {"kernel": 0, "target": "mosaic-tpu:v5e"}
    inspection = ip.user_ns["_kernel"]
    lowered = inspection.lower("mosaic-tpu:v5e")  # cached: the magic lowered it
    assert lowered.ok and "arith.addf" in lowered.text
    # The add maps to the cell's own line 6 (the magic line is line 1).
    cell_file = inspection.kernels[0].source.file
    add_lines = lowered.lines_of(cell_file, 6)
    assert any("arith.addf" in lowered.lines[n - 1] for n in add_lines)


def test_a_target_that_cannot_take_the_kernel_still_shows_the_inspector(ip):
    # 1-D blocks of 100 break the TPU tiling rule: the IR tab says so at the BlockSpec.
    cell = CELL.replace("BlockSpec((128,)", "BlockSpec((100,)")
    result, captured = _run(ip, "add(x, y) --no-run --target mosaic-tpu:v5e", cell)
    assert result.success, result.error_in_exec
    widget = _widget(captured)
    assert widget.selected == "ir"
    error = ip.user_ns["_kernel"].lower("mosaic-tpu:v5e").error
    assert error.kind == "tiling" and error.location.line == 9  # the in_specs line


def test_unknown_target_is_a_usage_error(ip):
    result, _ = _run(ip, "add(x, y) --target ptx:sm_9O")
    assert isinstance(result.error_in_exec, UsageError)
    assert "Did you mean ptx:sm_90" in str(result.error_in_exec)
