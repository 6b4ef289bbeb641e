"""The widgets' front end: built from TypeScript by the lab extension's toolchain,
shipped in the wheel, and loaded by anywidget as an ES module."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from pallaslab._src.views import bundle
from pallaslab._src.views.benchview import BenchView
from pallaslab._src.views.inspector import Inspector

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = json.loads((ROOT / "labextension" / "package.json").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_build_builds_the_widgets_where_python_reads_them():
    scripts = PACKAGE["scripts"]
    for build in ("build", "build:prod"):
        assert "jlpm build:widget" in scripts[build], build
    command = scripts["build:widget"]
    for entry in ("inspector.ts", "bench.ts", "inspector.css", "bench.css"):
        assert f"src/widget/{entry}" in command
    assert "--format=esm" in command and "--bundle" in command
    (outdir,) = re.findall(r"--outdir=(\S+)", command)
    assert (ROOT / "labextension" / outdir).resolve() == bundle.FRONTEND.resolve()
    assert "esbuild" in PACKAGE["devDependencies"]


def test_the_wheel_ships_the_built_front_end():
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "pallaslab/_src/views/frontend" in wheel["artifacts"]
    hook = PYPROJECT["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    for name in ("inspector.js", "bench.js"):
        assert f"pallaslab/_src/views/frontend/{name}" in hook["ensured-targets"]
        assert f"pallaslab/_src/views/frontend/{name}" in hook["skip-if-exists"]
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "pallaslab/_src/views/frontend/" in ignored


def test_the_widgets_load_the_built_modules():
    assert bundle.built(), bundle.BUILD_HINT
    assert Inspector._esm == bundle.module("inspector") != ""
    assert BenchView._esm == bundle.module("bench")
    assert ".pallaslab .pl-header" in Inspector._css.replace("\n", "")


def test_a_missing_build_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "FRONTEND", tmp_path)
    bundle.module.cache_clear()
    bundle.stylesheet.cache_clear()
    try:
        code = bundle.module("inspector")
        assert not bundle.built()
        assert "export default { render(" in code
        assert "jlpm build:prod" in code and "not built" in code
        assert "textContent" in code and "innerHTML" not in code
        assert bundle.stylesheet("inspector") == ""
    finally:
        bundle.module.cache_clear()
        bundle.stylesheet.cache_clear()
