"""The lab extension's kernel templates run on CPU as written, and check out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = json.loads((ROOT / "labextension" / "src" / "templates.json").read_text())["templates"]


@pytest.mark.parametrize("template", TEMPLATES, ids=[t["id"] for t in TEMPLATES])
def test_template_runs_and_matches_its_reference(ip, template):
    for cell in template["cells"]:
        if cell["cell_type"] != "code":
            continue
        result = ip.run_cell("\n".join(cell["source"]))
        assert result.success, (template["id"], result.error_in_exec or result.error_before_exec)
    inspection = ip.user_ns["_kernel"]
    assert inspection.kernels, template["id"]
    comparison = inspection.result.comparison
    assert comparison is not None and comparison.ok, (template["id"], comparison)
    assert inspection.result.mode == "emulated"  # CPU runs take the emulator
