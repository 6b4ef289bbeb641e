"""The lab extension's package ships with the Python package, in step with it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pallaslab

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = json.loads((ROOT / "labextension" / "package.json").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_versions_agree():
    assert PACKAGE["version"] == pallaslab.__version__


def test_the_wheel_ships_the_prebuilt_extension():
    shared = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["pallaslab/labextension"] == "share/jupyter/labextensions/pallaslab"
    assert shared["install.json"] == "share/jupyter/labextensions/pallaslab/install.json"
    assert PACKAGE["jupyterlab"]["outputDir"] == "../pallaslab/labextension"
    assert PACKAGE["name"] == "pallaslab"
    install = json.loads((ROOT / "install.json").read_text())
    assert install["packageName"] == "pallaslab" and install["packageManager"] == "python"
    hook = PYPROJECT["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    assert "pallaslab/labextension/package.json" in hook["ensured-targets"]


def test_labextension_paths_point_at_the_build():
    (entry,) = pallaslab._jupyter_labextension_paths()
    assert entry == {"src": "labextension", "dest": "pallaslab"}


def test_the_lockfile_is_committed():
    assert (ROOT / "labextension" / "yarn.lock").is_file()
